#include "report/explain_figures.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "report/plots.h"
#include "report/stats.h"
#include "report/summary.h"

namespace xgrad::report {

namespace fs = std::filesystem;

const std::vector<ExplainFigure>& explain_figures() {
  static const std::vector<ExplainFigure> figures{
      {"score_hist", "Scores q·k as softmax sees them",
       "Histogram of every visible score at initialisation, with the normal density the theory gives "
       "(std = sqrt(d_k)·std(q)·std(k)·multiplier) drawn over it: look at the width of the unscaled histogram as d_k "
       "grows, and at the scaled one staying put."},
      {"score_std_vs_dk", "Score std against d_k",
       "Measured score std (points) and the theory (dashed) on log-log axes: the unscaled line rises with slope 1/2, "
       "the scaled one is flat."},
      {"sorted_weights", "One typical query's attention weights, sorted",
       "The weights of the query with the median entropy, largest first: unscaled, one weight takes nearly all as "
       "d_k grows; scaled, the weights stay spread."},
      {"heatmap", "One attention matrix",
       "Weights of sequence 0, head 0 (rows: queries, columns: keys; blank where masked): unscaled rows turn into "
       "single bright cells as d_k grows."},
      {"entropy_vs_std", "Attention entropy against score std",
       "Measured mean entropy (points, one per d_k) on the curve softmax gives for normal scores of that std over the "
       "same numbers of keys (Monte Carlo): the unscaled points slide down the one curve as d_k grows."},
      {"max_prob_vs_std", "Largest weight against score std",
       "Mean largest weight per query on the same kind of curve: it climbs to 1 as the std grows."},
      {"jacobian_vs_std", "Softmax Jacobian norm against score std",
       "Mean Frobenius norm of diag(p) − ppᵀ per query on its Monte Carlo curve: it falls toward 0 as the std "
       "grows, which is how little gradient a saturated row passes."},
      {"score_grad_vs_dk", "Per-query score gradient at step 0",
       "Median over queries of ‖dLoss/d(score row)‖ after one backward pass, bars from the 10th to the 90th "
       "percentile: look at how far the unscaled median falls as d_k grows."},
      {"w_grad_vs_dk", "W_q and W_k gradient norms at step 0",
       "‖dLoss/dW_q‖ and ‖dLoss/dW_k‖ over every layer: where the unscaled line lies above the scaled one, the usual "
       "story (less gradient unscaled) does not hold at initialisation."},
      {"earned_vs_dk", "Do saturated peaks fall on the answer?",
       "Of the saturated queries whose answer sits at one key, the share whose largest weight is on it, against "
       "the share chance gives (dashed): on the chance line, the peak is not earned."},
      {"saturated_vs_dk", "Saturated queries against d_k",
       "Share of queries whose largest weight exceeds 0.99: where it starts to rise is the d_k from which the "
       "problem appears at initialisation."},
      {"runs_vs_dk", "Training evidence against d_k (--runs)",
       "Final loss, steps to the loss threshold (mean over the seeds that reached it), the median saturated share "
       "over the logged steps and the per-query score gradient relative to the loss before the threshold, of the "
       "runs read (means over seeds), one line per arm: where the unscaled line parts from the scaled one is the "
       "d_k from which the problem shows in training."}};
  return figures;
}

const ExplainFigure* find_explain_figure(const std::string& id) {
  for (const auto& f : explain_figures())
    if (f.id == id) return &f;
  return nullptr;
}

std::string scale_label_of(const std::string& scale) {
  return is_reference_scale(scale) ? "unscaled" : scale == "sqrt_dk" ? "1/sqrt(d_k)" : scale;
}

Histogram score_histogram(const ArmMeasurement& a) {
  Histogram h;
  const double spread = 4.5 * std::max({a.score_std, a.theory_std, 1e-12});
  h.x0 = a.score_mean - spread;
  h.width = 2 * spread / static_cast<double>(kHistogramBins);
  h.density.assign(kHistogramBins, 0);
  for (const double s : a.scores) {
    const double bin = std::floor((s - h.x0) / h.width);
    if (bin >= 0 && bin < static_cast<double>(kHistogramBins)) h.density[static_cast<std::size_t>(bin)] += 1;
  }
  for (auto& d : h.density) d /= static_cast<double>(a.scores.size()) * h.width;
  return h;
}

namespace {

SummaryFigure figure(const std::string& id, const std::string& x_label, Axis x, const std::string& y_label, Axis y) {
  const ExplainFigure& f = *find_explain_figure(id);
  return summary_figure(f.id, f.title, f.caption, x_label, x, y_label, y);
}

// One line per scaling of `field` against d_k.
void add_d_k_lines(SummaryFigure& f, const Explanation& e, double ArmMeasurement::*field, const std::string& suffix,
                   double ArmMeasurement::*lo = nullptr, double ArmMeasurement::*hi = nullptr) {
  for (const auto& scale : e.scales) {
    SummaryLine line = summary_line(scale_label_of(scale) + suffix, scale);
    for (const auto d_k : e.d_ks) {
      const auto& a = *e.arm(d_k, scale);
      line.points.push_back({static_cast<double>(d_k), a.*field, lo ? a.*lo : kNoValue, hi ? a.*hi : kNoValue, 1, 0});
    }
    f.lines.push_back(std::move(line));
  }
}

// The Monte Carlo curve as a theory line, then each scaling's points against its score std.
SummaryFigure curve_figure(const Explanation& e, const std::string& id, const std::vector<double>& curve,
                           double ArmMeasurement::*field, const std::string& y_label) {
  SummaryFigure f = figure(id, "score std", Axis::log, y_label, Axis::linear);
  f.tabulate = false;
  SummaryLine theory = summary_line("softmax of normal scores (Monte Carlo)", e.scales.front());
  theory.theory = true;
  for (std::size_t i = 0; i < e.curves.std.size(); ++i) theory.points.push_back({e.curves.std[i], curve[i]});
  f.lines.push_back(std::move(theory));
  for (const auto& scale : e.scales) {
    SummaryLine line = summary_line(scale_label_of(scale) + " (d_k " + std::to_string(e.d_ks.front()) + " to " +
                                        std::to_string(e.d_ks.back()) + ")",
                                    scale);
    for (const auto d_k : e.d_ks) line.points.push_back({e.arm(d_k, scale)->score_std, e.arm(d_k, scale)->*field});
    f.lines.push_back(std::move(line));
  }
  return f;
}

std::vector<SummaryFigure> line_figures(const Explanation& e) {
  std::vector<SummaryFigure> out;
  SummaryFigure std_fig = figure("score_std_vs_dk", "d_k", Axis::log, "score std", Axis::log);
  add_d_k_lines(std_fig, e, &ArmMeasurement::score_std, "");
  for (const auto& scale : e.scales) {
    SummaryLine theory = summary_line(scale_label_of(scale) + ": theory", scale);
    theory.theory = true;
    for (const auto d_k : e.d_ks) theory.points.push_back({static_cast<double>(d_k), e.arm(d_k, scale)->theory_std});
    std_fig.lines.push_back(std::move(theory));
  }
  out.push_back(std::move(std_fig));
  out.push_back(curve_figure(e, "entropy_vs_std", e.curves.entropy, &ArmMeasurement::entropy_mean, "entropy (nats)"));
  out.push_back(curve_figure(e, "max_prob_vs_std", e.curves.max_prob, &ArmMeasurement::max_prob_mean, "max weight"));
  out.push_back(curve_figure(e, "jacobian_vs_std", e.curves.jacobian_norm, &ArmMeasurement::jacobian_norm_mean,
                             "‖diag(p) − ppᵀ‖_F"));
  SummaryFigure grad = figure("score_grad_vs_dk", "d_k", Axis::log, "‖dLoss/ds‖ per query", Axis::log);
  grad.error_bar_sd = false;
  add_d_k_lines(grad, e, &ArmMeasurement::score_grad_median, "", &ArmMeasurement::score_grad_p10,
                &ArmMeasurement::score_grad_p90);
  out.push_back(std::move(grad));
  SummaryFigure w = figure("w_grad_vs_dk", "d_k", Axis::log, "gradient norm", Axis::log);
  add_d_k_lines(w, e, &ArmMeasurement::grad_norm_w_q, ": W_q");
  add_d_k_lines(w, e, &ArmMeasurement::grad_norm_w_k, ": W_k");
  out.push_back(std::move(w));
  SummaryFigure earned = figure("earned_vs_dk", "d_k", Axis::log, "share of saturated queries", Axis::linear);
  add_d_k_lines(earned, e, &ArmMeasurement::earned_share, ": peak on the answer");
  add_d_k_lines(earned, e, &ArmMeasurement::chance_share, ": chance");
  for (std::size_t i = earned.lines.size() / 2; i < earned.lines.size(); ++i) earned.lines[i].theory = true;
  out.push_back(std::move(earned));
  SummaryFigure saturated =
      figure("saturated_vs_dk", "d_k", Axis::log, "share saturated (max weight > 0.99)", Axis::linear);
  add_d_k_lines(saturated, e, &ArmMeasurement::saturated_share, "");
  out.push_back(std::move(saturated));
  return out;
}

// One figure of a training quantity against d_k, one line per arm without d_k.
SummaryFigure runs_figure(const TrainingEvidence& t, const std::string& name, const std::string& y_label, Axis y,
                          double TrainingPoint::*field) {
  const ExplainFigure& f = *find_explain_figure("runs_vs_dk");
  SummaryFigure out = summary_figure(name, f.title + ": " + y_label, f.caption, "d_k", Axis::log, y_label, y);
  for (const auto& p : t.points) {
    if (out.lines.empty() || out.lines.back().label != p.label) out.lines.push_back(summary_line(p.label, p.scale));
    out.lines.back().points.push_back({static_cast<double>(p.d_k), p.*field, kNoValue, kNoValue, p.n_runs, 0});
  }
  return out;
}

std::vector<SummaryFigure> runs_figures(const TrainingEvidence& t) {
  return {
      runs_figure(t, "runs_vs_dk", "final loss (nats)", Axis::linear, &TrainingPoint::final_loss),
      runs_figure(t, "runs_steps_vs_dk", "steps to the loss threshold", Axis::linear, &TrainingPoint::steps_to_loss),
      runs_figure(t, "runs_saturated_vs_dk", "saturated share (median over steps)", Axis::linear,
                  &TrainingPoint::saturated_share),
      runs_figure(t, "runs_score_grad_vs_dk", "score gradient / loss (before the threshold)", Axis::log,
                  &TrainingPoint::score_grad_relative)};
}

// A multiplot, one row per scaling and one column per d_k; `panel` writes a panel's data and returns its commands.
template <class Panel>
std::string grid_script(const Explanation& e, const std::string& id, Panel panel) {
  const std::size_t rows = e.scales.size(), cols = e.d_ks.size();
  std::string body;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const auto& a = *e.arm(e.d_ks[c], e.scales[r]);
      body += "set title " + gnuplot_string(fmt::format("{}, d_k {}", scale_label_of(a.scale), a.d_k)) + "\n";
      body += panel(a, fmt::format("data/{}_{}_{}.dat", id, r, c)) + "reset\n";
    }
  std::string script = "# Written by `xgrad explain`; re-run with `gnuplot " + id + ".gp` in this directory.\n";
  for (const auto& [terminal, ext] :
       std::vector<std::pair<std::string, std::string>>{{"pngcairo", "png"}, {"svg", "svg"}})
    script += fmt::format(
        "set terminal {} size {},{} noenhanced font 'Sans,9'{}\nset output '{}.{}'\nset multiplot layout {},{}\n{}"
        "unset multiplot\nset output\n",
        terminal, 300 * cols, 260 * rows, terminal == "svg" ? " background rgb 'white'" : "", id, ext, rows, cols,
        body);
  return script;
}

std::string hist_panel(const fs::path& dir, const ArmMeasurement& a, const std::string& file) {
  const Histogram h = score_histogram(a);
  std::string data;
  for (std::size_t i = 0; i < h.density.size(); ++i)
    data += gnuplot_number(h.x0 + (static_cast<double>(i) + 0.5) * h.width) + " " + gnuplot_number(h.density[i]) + "\n";
  write_plot_file(dir / file, data);
  return fmt::format(
      "set key off\nset xrange [{}:{}]\nplot '{}' using 1:2 with boxes fs solid 0.5 lc rgb '{}', "
      "exp(-(x-({}))**2/(2*({})**2))/(({})*sqrt(2*pi)) with lines dt 2 lw 2 lc rgb 'black'\n",
      gnuplot_number(h.x0), gnuplot_number(h.x0 + h.width * static_cast<double>(h.density.size())), file,
      scaling_colour(a.scale), gnuplot_number(a.score_mean), gnuplot_number(a.theory_std),
      gnuplot_number(a.theory_std));
}

std::string weights_panel(const fs::path& dir, const ArmMeasurement& a, const std::string& file) {
  std::string data;
  for (std::size_t i = 0; i < a.sorted_weights.size(); ++i)
    data += fmt::format("{} {}\n", i + 1, gnuplot_number(a.sorted_weights[i]));
  write_plot_file(dir / file, data);
  return fmt::format(
      "set key off\nset yrange [0:1]\nset xlabel 'rank'\nplot '{}' using 1:2 with linespoints pt 7 "
      "lc rgb '{}'\n",
      file, scaling_colour(a.scale));
}

std::string heatmap_panel(const fs::path& dir, const ArmMeasurement& a, const std::string& file) {
  std::string data;
  for (const auto& row : a.heatmap) {
    for (std::size_t j = 0; j < row.size(); ++j) data += (j ? " " : "") + gnuplot_number(row[j]);
    data += "\n";
  }
  write_plot_file(dir / file, data);
  return fmt::format(
      "set key off\nset cbrange [0:1]\nset yrange [] reverse\nset size ratio -1\n"
      "set palette defined (0 'white', 1 '{}')\nplot '{}' matrix with image\n",
      scaling_colour(a.scale), file);
}

}  // namespace

std::vector<std::string> write_explain_figures(const Explanation& e, const std::string& dir, std::string& note) {
  const fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d / "data", ec);
  if (ec) throw std::runtime_error("cannot create " + (d / "data").string() + ": " + ec.message());
  std::vector<SummaryFigure> lines = line_figures(e);
  if (e.training && !e.training->points.empty())
    for (auto& f : runs_figures(*e.training)) lines.push_back(std::move(f));
  PlotOutcome outcome;
  write_summary_plots(lines, dir, outcome);
  write_plot_file(d / "score_hist.gp",
                  grid_script(e, "score_hist", [&](const auto& a, const auto& f) { return hist_panel(d, a, f); }));
  write_plot_file(d / "sorted_weights.gp", grid_script(e, "sorted_weights", [&](const auto& a, const auto& f) {
                    return weights_panel(d, a, f);
                  }));
  write_plot_file(d / "heatmap.gp",
                  grid_script(e, "heatmap", [&](const auto& a, const auto& f) { return heatmap_panel(d, a, f); }));
  std::vector<std::string> drawn;
  for (const auto& f : outcome.summary_drawn) drawn.push_back(f.name);
  note = outcome.note;
  if (!gnuplot_available()) {
    note = "gnuplot not found on PATH: figures skipped (the data and .gp scripts are in " + dir +
           "; install gnuplot-nox and run `gnuplot <figure>.gp` there)";
    return drawn;
  }
  for (const std::string id : {"score_hist", "sorted_weights", "heatmap"}) {
    if (draw_figure(dir, id))
      drawn.push_back(id);
    else
      note += (note.empty() ? "gnuplot failed for " : ", ") + id + ".gp";
  }
  return drawn;
}

}  // namespace xgrad::report
