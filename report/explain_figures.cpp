#include "report/explain_figures.h"

#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <fmt/args.h>
#include <fmt/format.h>

#include "report/plots.h"
#include "report/stats.h"
#include "report/summary.h"

namespace xgrad::report {

namespace fs = std::filesystem;

const std::vector<ExplainFigure>& explain_figures() {
  static const std::vector<ExplainFigure> figures = [] {
    std::vector<ExplainFigure> out;
    for (const TextLine& line : text_lines("explain"))
      if (line.section == "Figures: title | caption")
        out.push_back({line.key, text_cells("explain", line.key).at(0), text_cells("explain", line.key).at(1)});
    return out;
  }();
  return figures;
}

const std::vector<ArmNumber>& arm_numbers() {
  using A = ArmMeasurement;
  static const std::vector<ArmNumber> numbers{
      {"q_std", &A::q_std, "std(q)", "{:.3f}", true},
      {"k_std", &A::k_std, "std(k)", "{:.3f}", true},
      {"score_std", &A::score_std, "score std", "{:.3f}", true},
      {"theory_std", &A::theory_std, "theory std", "{:.3f}", true},
      {"entropy_mean", &A::entropy_mean, "entropy (nats)", "{:.3f}", true},
      {"max_prob_mean", &A::max_prob_mean, "max weight", "{:.3f}", true},
      {"saturated_share", &A::saturated_share, "saturated", "%", true},
      {"jacobian_norm_mean", &A::jacobian_norm_mean, "Jacobian norm", "{:.4f}"},
      {"score_grad_median", &A::score_grad_median, "score grad (median)", "{:.3g}"},
      {"grad_norm_w_q", &A::grad_norm_w_q, "W_q grad", "{:.3g}"},
      {"grad_norm_w_k", &A::grad_norm_w_k, "W_k grad", "{:.3g}"},
      {"earned_share", &A::earned_share, "peak on answer", "%"},
      {"chance_share", &A::chance_share, "chance", "%"},
      {"score_grad_p10", &A::score_grad_p10, nullptr, "{:.3g}"},
      {"score_grad_p90", &A::score_grad_p90, nullptr, "{:.3g}"},
      {"loss", &A::loss, nullptr, "{:.4f}"}};
  return numbers;
}

std::string percent_text(double share) { return std::isnan(share) ? "n/a" : fmt::format("{:.1f}%", 100 * share); }

void add_arm_fields(Fields& fields, const std::string& prefix, const ArmMeasurement& a) {
  for (const ArmNumber& n : arm_numbers())
    fields[prefix + n.name] = n.format == std::string("%") ? Field(percent_text(a.*n.field)) : a.*n.field;
  fields[prefix + "d_k"] = a.d_k;
  fields[prefix + "n_answerable_saturated"] = a.n_answerable_saturated;
  fields[prefix + "n_earned_clusters"] = a.n_earned_clusters;
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

// One number of the arms against d_k, a line per scaling: `suffix` ends its label; a theory line is a reference,
// not a measurement; lo and hi, when given, are the error bar's ends.
struct DkField {
  double ArmMeasurement::*y;
  const char* suffix = "";
  bool theory = false;
  double ArmMeasurement::*lo = nullptr;
  double ArmMeasurement::*hi = nullptr;
};

SummaryFigure d_k_figure(const Explanation& e, const std::string& id, const std::string& y_label, Axis y,
                         const std::vector<DkField>& fields) {
  SummaryFigure f = figure(id, "d_k", Axis::log, y_label, y);
  for (const DkField& field : fields)
    for (const auto& scale : e.scales) {
      SummaryLine line = summary_line(scale_label_of(scale) + field.suffix, scale);
      line.theory = field.theory;
      for (const auto d_k : e.d_ks) {
        const auto& a = *e.arm(d_k, scale);
        line.points.push_back({static_cast<double>(d_k), a.*field.y, field.lo ? a.*field.lo : kNoValue,
                               field.hi ? a.*field.hi : kNoValue, 1, 0});
      }
      f.lines.push_back(std::move(line));
    }
  return f;
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
  using A = ArmMeasurement;
  std::vector<SummaryFigure> out{
      d_k_figure(e, "score_std_vs_dk", "score std", Axis::log, {{&A::score_std}, {&A::theory_std, ": theory", true}}),
      curve_figure(e, "entropy_vs_std", e.curves.entropy, &A::entropy_mean, "entropy (nats)"),
      curve_figure(e, "max_prob_vs_std", e.curves.max_prob, &A::max_prob_mean, "max weight"),
      curve_figure(e, "jacobian_vs_std", e.curves.jacobian_norm, &A::jacobian_norm_mean, "‖diag(p) − ppᵀ‖_F"),
      d_k_figure(e, "score_grad_vs_dk", "‖dLoss/ds‖ per query", Axis::log,
                 {{&A::score_grad_median, "", false, &A::score_grad_p10, &A::score_grad_p90}}),
      d_k_figure(e, "w_grad_vs_dk", "gradient norm", Axis::log,
                 {{&A::grad_norm_w_q, ": W_q"}, {&A::grad_norm_w_k, ": W_k"}}),
      d_k_figure(e, "earned_vs_dk", "share of saturated queries", Axis::linear,
                 {{&A::earned_share, ": peak on the answer"}, {&A::chance_share, ": chance", true}}),
      d_k_figure(e, "saturated_vs_dk", "share saturated (max weight > 0.99)", Axis::linear, {{&A::saturated_share}})};
  out[4].error_bar_sd = false;  // the bars are the 10th and 90th percentiles
  return out;
}

// The training quantities against d_k, one figure each (runs_vs_dk, runs_vs_dk_steps, ...), one line per arm.
std::vector<SummaryFigure> runs_figures(const TrainingEvidence& t) {
  const ExplainFigure& f = *find_explain_figure("runs_vs_dk");
  using P = TrainingPoint;
  const std::vector<std::tuple<std::string, std::string, Axis, double P::*>> quantities{
      {"", "final loss (nats)", Axis::linear, &P::final_loss},
      {"_steps", "steps to the loss threshold", Axis::linear, &P::steps_to_loss},
      {"_saturated", "saturated share (median over steps)", Axis::linear, &P::saturated_share},
      {"_score_grad", "score gradient / loss (before the threshold)", Axis::log, &P::score_grad_relative}};
  std::vector<SummaryFigure> out;
  for (const auto& [suffix, y_label, y, field] : quantities) {
    out.push_back(summary_figure(f.id + suffix, f.title + ": " + y_label, f.caption, "d_k", Axis::log, y_label, y));
    for (const auto& p : t.points) {
      if (out.back().lines.empty() || out.back().lines.back().label != p.label)
        out.back().lines.push_back(summary_line(p.label, p.scale));
      out.back().lines.back().points.push_back({static_cast<double>(p.d_k), p.*field, kNoValue, kNoValue, p.n_runs, 0});
    }
  }
  return out;
}

// A panel of one arm: writes its data into `data` and returns its commands, which plot the file `file`.
using ArmPanel = std::string (*)(const ArmMeasurement& a, const std::string& file, std::string& data);

// A multiplot in dir, one row per scaling and one column per d_k, each a panel with its data file.
std::string grid_script(const Explanation& e, const fs::path& dir, const std::string& id, ArmPanel panel) {
  const std::size_t rows = e.scales.size(), cols = e.d_ks.size();
  std::string body;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const auto& a = *e.arm(e.d_ks[c], e.scales[r]);
      const std::string file = fmt::format("data/{}_{}_{}.dat", id, r, c);
      std::string data;
      body += "set title " + gnuplot_string(fmt::format("{}, d_k {}", scale_label_of(a.scale), a.d_k)) + "\n";
      body += panel(a, file, data) + "reset\n";
      write_plot_file(dir / file, data);
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

std::string hist_panel(const ArmMeasurement& a, const std::string& file, std::string& data) {
  const Histogram h = score_histogram(a);
  for (std::size_t i = 0; i < h.density.size(); ++i)
    data += gnuplot_number(h.x0 + (static_cast<double>(i) + 0.5) * h.width) + " " + gnuplot_number(h.density[i]) + "\n";
  return fmt::format(
      "set key off\nset xrange [{}:{}]\nplot '{}' using 1:2 with boxes fs solid 0.5 lc rgb '{}', "
      "exp(-(x-({}))**2/(2*({})**2))/(({})*sqrt(2*pi)) with lines dt 2 lw 2 lc rgb 'black'\n",
      gnuplot_number(h.x0), gnuplot_number(h.x0 + h.width * static_cast<double>(h.density.size())), file,
      scaling_colour(a.scale), gnuplot_number(a.score_mean), gnuplot_number(a.theory_std),
      gnuplot_number(a.theory_std));
}

std::string weights_panel(const ArmMeasurement& a, const std::string& file, std::string& data) {
  for (std::size_t i = 0; i < a.sorted_weights.size(); ++i)
    data += fmt::format("{} {}\n", i + 1, gnuplot_number(a.sorted_weights[i]));
  return fmt::format(
      "set key off\nset yrange [0:1]\nset xlabel 'rank'\nplot '{}' using 1:2 with linespoints pt 7 "
      "lc rgb '{}'\n",
      file, scaling_colour(a.scale));
}

std::string heatmap_panel(const ArmMeasurement& a, const std::string& file, std::string& data) {
  for (const auto& row : a.heatmap) {
    for (std::size_t j = 0; j < row.size(); ++j) data += (j ? " " : "") + gnuplot_number(row[j]);
    data += "\n";
  }
  return fmt::format(
      "set key off\nset cbrange [0:1]\nset yrange [] reverse\nset size ratio -1\n"
      "set palette defined (0 'white', 1 '{}')\nplot '{}' matrix with image\n",
      scaling_colour(a.scale), file);
}

}  // namespace

std::vector<std::string> write_explain_figures(const Explanation& e, const std::string& dir, std::string& note) {
  const fs::path d(dir);
  std::vector<SummaryFigure> lines = line_figures(e);
  if (e.training && !e.training->points.empty())
    for (auto& f : runs_figures(*e.training)) lines.push_back(std::move(f));
  PlotOutcome outcome;
  write_summary_plots(lines, dir, outcome);
  const std::vector<std::pair<std::string, ArmPanel>> grids{
      {"score_hist", hist_panel}, {"sorted_weights", weights_panel}, {"heatmap", heatmap_panel}};
  for (const auto& grid : grids) write_plot_file(d / (grid.first + ".gp"), grid_script(e, d, grid.first, grid.second));
  std::vector<std::string> drawn;
  for (const auto& f : outcome.summary_drawn) drawn.push_back(f.name);
  note = outcome.note;
  if (!gnuplot_available()) {
    note = "gnuplot not found on PATH: figures skipped (the data and .gp scripts are in " + dir +
           "; install gnuplot-nox and run `gnuplot <figure>.gp` there)";
    return drawn;
  }
  for (const auto& grid : grids) {
    if (draw_figure(dir, grid.first))
      drawn.push_back(grid.first);
    else
      note += (note.empty() ? "gnuplot failed for " : ", ") + grid.first + ".gp";
  }
  return drawn;
}

}  // namespace xgrad::report
