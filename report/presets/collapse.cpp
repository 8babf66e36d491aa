// The report of preset `collapse` (its grid and question: cli/presets/collapse.cpp): per-head attention entropy
// against step, and entropy against c · ||W_q,h W_k,h^T||_2 with Zhai et al. 2023's lower bound drawn.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/registry.h"
#include "nn/entropy_bound.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "train/metrics_log.h"
#include "train/run_files.h"

namespace xgrad::report::presets::collapse {
namespace {

constexpr double kCollapseEntropy = 0.1;  // nats: below it a head's attention is all but one-hot
constexpr double kLearnedAccuracy = 0.5;  // a run that ends below this accuracy has not learned the task

// What one run logged: per measured step, the lowest entropy over the heads, the largest scaled spectral norm, and
// every head's (norm, entropy) pair.
struct RunCurves {
  std::vector<double> step, entropy_min, norm_max;
  std::vector<std::pair<double, double>> head_points;
  double lowest_entropy = INFINITY;
  bool read = false;
};

RunCurves read_curves(const report::RunRecord& run) {
  RunCurves out;
  try {
    const train::MetricsTable t = train::read_metrics(run.dir + "/" + train::kMetricsFile);
    std::vector<std::pair<std::size_t, std::size_t>> heads;  // (entropy column, norm column), the last layer's
    for (std::size_t layer = 0;; ++layer) {
      std::vector<std::pair<std::size_t, std::size_t>> found;
      for (std::size_t h = 0;; ++h) {
        const auto e =
            std::find(t.columns.begin(), t.columns.end(), train::metrics_columns::attention(layer, h, "entropy_mean"));
        const auto n = std::find(t.columns.begin(), t.columns.end(),
                                 train::metrics_columns::attention(layer, h, "qk_spectral_norm"));
        if (e == t.columns.end() || n == t.columns.end()) break;
        found.push_back(
            {static_cast<std::size_t>(e - t.columns.begin()), static_cast<std::size_t>(n - t.columns.begin())});
      }
      if (found.empty()) break;
      heads = found;
    }
    if (heads.empty()) return out;
    const std::size_t step = t.column(train::metrics_columns::kStep);
    for (const auto& row : t.rows) {
      double e_min = INFINITY, n_max = 0;
      bool any = false;
      for (const auto& [e, n] : heads)
        if (std::isfinite(row[e]) && std::isfinite(row[n])) {
          any = true;
          e_min = std::min(e_min, row[e]);
          n_max = std::max(n_max, row[n]);
          out.head_points.push_back({row[n], row[e]});
        }
      if (!any) continue;
      out.step.push_back(row[step]);
      out.entropy_min.push_back(e_min);
      out.norm_max.push_back(n_max);
      out.lowest_entropy = std::min(out.lowest_entropy, e_min);
    }
    out.read = !out.step.empty();
  } catch (const std::exception&) {
  }
  return out;
}

std::string lr_text(double lr) { return fmt::format("{:g}", lr); }

struct Cell {  // one (scaling, lr, warmup): its runs
  std::vector<std::size_t> runs;
  std::size_t collapsed = 0, read = 0, diverged = 0;
  std::vector<double> lowest_entropy, final_accuracy;
};

// The collapse grid's runs: what each logged, and the cells per line, lr and warmup.
struct Grid {
  std::vector<RunCurves> curves;                                        // per run of the comparison
  std::map<std::string, std::map<double, std::map<long, Cell>>> cells;  // line -> lr -> warmup -> cell
  std::vector<std::string> order;  // lines (a scaling and the other settings the arms differ in), in the order the
                                   // comparison lists them
  std::map<std::string, std::string> scale_of;  // line -> its scaling
  double T = 0;                                 // keys the answer's query attends to
};

Grid read_grid(const report::Comparison& c) {
  Grid g;
  g.curves.resize(c.runs.size());
  const report::LineLabels labels(c, {"scale", "lr", "warmup_steps"});
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const nlohmann::json& cfg = c.runs[i].config;
    if (!cfg.contains("scale") || !cfg.contains("lr")) continue;
    const std::string scale = labels(cfg.at("scale").get<std::string>(), report::arm_settings(cfg));
    g.scale_of[scale] = cfg.at("scale").get<std::string>();
    if (std::find(g.order.begin(), g.order.end(), scale) == g.order.end()) g.order.push_back(scale);
    const long warmup = cfg.value("warmup_steps", 0L);
    Cell& cell = g.cells[scale][cfg.at("lr").get<double>()][warmup];
    cell.runs.push_back(i);
    g.curves[i] = read_curves(c.runs[i]);
    if (cfg.contains("derived") && cfg.at("derived").contains("seq_len"))
      g.T = cfg.at("derived").at("seq_len").get<double>();
    if (c.runs[i].diverged) ++cell.diverged;
    if (!g.curves[i].read) continue;
    ++cell.read;
    const bool learned = !c.runs[i].diverged && c.stats[i]["final_accuracy"] >= kLearnedAccuracy;
    const bool collapsed = g.curves[i].lowest_entropy < kCollapseEntropy && !learned;
    cell.collapsed += collapsed ? 1 : 0;
    cell.lowest_entropy.push_back(g.curves[i].lowest_entropy);
    if (!c.runs[i].diverged) cell.final_accuracy.push_back(c.stats[i]["final_accuracy"]);
  }
  return g;
}

// Entropy against step at the highest lr, without and with warmup: mean over seeds of the lowest head entropy.
void add_step_figures(Grid& g, double top_lr, const std::set<long>& warmups, report::PresetSection& s) {
  for (long warmup : warmups) {
    report::SummaryFigure f = report::summary_figure(
        warmup == 0 ? "collapse_entropy_vs_step" : "collapse_entropy_vs_step_warmup",
        "Lowest head attention entropy against step, AdamW lr " + lr_text(top_lr) +
            (warmup == 0 ? ", no warmup" : fmt::format(", {} warmup steps", warmup)),
        "per logged step the minimum over the heads of attn/l<last>h<h>/entropy_mean (nats, over the query "
        "positions), mean over the seeds that logged it; bars: min and max over seeds",
        "step", report::Axis::linear, "lowest head entropy (nats)", report::Axis::linear);
    f.error_bar_sd = false;
    f.tabulate = false;
    for (const std::string& scale : g.order) {
      const auto lr_it = g.cells[scale].find(top_lr);
      if (lr_it == g.cells[scale].end() || !lr_it->second.count(warmup)) continue;
      std::map<double, std::vector<double>> by_step;
      for (std::size_t i : lr_it->second.at(warmup).runs)
        for (std::size_t k = 0; k < g.curves[i].step.size(); ++k)
          by_step[g.curves[i].step[k]].push_back(g.curves[i].entropy_min[k]);
      report::SummaryLine line = report::summary_line(scale, g.scale_of[scale]);
      for (const auto& [step, values] : by_step) {
        report::SummaryPoint p;
        p.x = step;
        p.y = report::mean_sd(values).mean;
        p.lo = *std::min_element(values.begin(), values.end());
        p.hi = *std::max_element(values.begin(), values.end());
        p.n = values.size();
        line.points.push_back(p);
      }
      f.lines.push_back(line);
    }
    s.figures.push_back(f);
  }
}

// Entropy against the spectral norm, every logged head of every run at the highest lr without warmup, with the
// bound. `below` and `points` get the number of logged head measurements below the bound and in all.
void add_norm_figure(Grid& g, double top_lr, report::PresetSection& s, std::size_t* below, std::size_t* points) {
  double norm_lo = INFINITY, norm_hi = 0;
  report::SummaryFigure f = report::summary_figure(
      "collapse_entropy_vs_spectral_norm",
      fmt::format("Head entropy against c·||W_q,h W_k,hᵀ||₂, AdamW lr {}, no warmup; dashed: Zhai et al.'s "
                  "bound for T = {:g}",
                  lr_text(top_lr), g.T),
      "per scaling, each logged step's mean over seeds of the lowest head entropy against the mean of the "
      "largest head norm (c the scaling's constant multiplier), ordered by the norm; the dashed line is "
      "Zhai et al. 2023's lower bound for T keys (nn/entropy_bound.h)",
      "c·||W_q,h W_k,hᵀ||₂", report::Axis::log, "attention entropy (nats)", report::Axis::linear);
  f.tabulate = false;
  f.error_bar_sd = false;
  for (const std::string& scale : g.order) {
    const auto lr_it = g.cells[scale].find(top_lr);
    if (lr_it == g.cells[scale].end() || !lr_it->second.count(0)) continue;
    std::map<double, std::pair<std::vector<double>, std::vector<double>>> by_step;  // step -> (norms, entropies)
    for (std::size_t i : lr_it->second.at(0).runs)
      for (std::size_t k = 0; k < g.curves[i].step.size(); ++k) {
        by_step[g.curves[i].step[k]].first.push_back(g.curves[i].norm_max[k]);
        by_step[g.curves[i].step[k]].second.push_back(g.curves[i].entropy_min[k]);
      }
    report::SummaryLine line = report::summary_line(scale, g.scale_of[scale]);
    for (const auto& [step, pair] : by_step) {
      report::SummaryPoint p;
      p.x = report::mean_sd(pair.first).mean;
      p.y = report::mean_sd(pair.second).mean;
      p.n = pair.first.size();
      if (std::isfinite(p.x) && p.x > 0) line.points.push_back(p);
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const report::SummaryPoint& a, const report::SummaryPoint& b) { return a.x < b.x; });
    f.lines.push_back(line);
  }
  for (std::size_t i = 0; i < g.curves.size(); ++i)
    for (const auto& [norm, entropy] : g.curves[i].head_points) {
      ++*points;
      *below += entropy < nn::entropy_lower_bound(norm, g.T) - 1e-9 ? 1 : 0;
      if (norm > 0) {
        norm_lo = std::min(norm_lo, norm);
        norm_hi = std::max(norm_hi, norm);
      }
    }
  if (g.T >= 2 && norm_hi > 0) {
    report::SummaryLine bound = report::summary_line(fmt::format("bound, T = {:g}", g.T),
                                                     g.order.empty() ? "none" : g.scale_of[g.order.front()]);
    bound.theory = true;
    for (int k = 0; k <= 40; ++k) {
      report::SummaryPoint p;
      p.x = norm_lo * std::pow(norm_hi / norm_lo, k / 40.0);
      p.y = nn::entropy_lower_bound(p.x, g.T);
      bound.points.push_back(p);
    }
    f.lines.push_back(bound);
  }
  s.figures.push_back(f);
}

// 1 every seed collapsed, 0 none, -1 not decided (or nothing read), -2 every run diverged and none logged an
// entropy, -3 fewer than two seeds: nothing for them to agree on.
int status(const Cell& cell) {
  if (cell.read == 0 && !cell.runs.empty() && cell.diverged == cell.runs.size()) return -2;
  if (cell.read < 2) return -3;
  return cell.collapsed == cell.read ? 1 : cell.collapsed == 0 ? 0 : -1;
}

// One line's sentence (where it collapses, where not, where warmup helped); its rows go into `t`.
std::string line_text(const std::string& scale, const std::map<double, std::map<long, Cell>>& by_lr, report::Table& t) {
  std::vector<std::string> collapsed, safe, undecided, warmup_helped, diverged, few;
  for (const auto& [lr, by_warmup] : by_lr) {
    for (const auto& [w, cell] : by_warmup) {
      t.rows.push_back({scale, lr_text(lr), std::to_string(w), fmt::format("{} of {}", cell.collapsed, cell.read),
                        train::format_number(report::mean_sd(cell.lowest_entropy).mean, 3),
                        train::format_number(report::mean_sd(cell.final_accuracy).mean, 2),
                        fmt::format("{} of {}", cell.diverged, cell.runs.size())});
      const std::string where =
          "lr " + lr_text(lr) + (w == 0 ? " without warmup" : fmt::format(" with {} warmup steps", w));
      const int st = status(cell);
      (st == 1 ? collapsed : st == 0 ? safe : st == -2 ? diverged : st == -3 ? few : undecided).push_back(where);
    }
    if (by_warmup.count(0))
      for (const auto& [w, cell] : by_warmup)
        if (w > 0 && status(by_warmup.at(0)) == 1 && status(cell) == 0) warmup_helped.push_back("lr " + lr_text(lr));
  }
  std::string line = "- **" + scale + "**: ";
  if (collapsed.empty() && undecided.empty() && diverged.empty() && few.empty())
    line += "no collapse in any seed at any learning rate tried";
  else if (collapsed.empty() && undecided.empty() && safe.empty() && few.empty())
    line += "every run diverged before logging an entropy";
  else {
    std::vector<std::string> parts;
    if (!collapsed.empty()) parts.push_back("collapses in every seed at " + join_and(collapsed));
    if (!safe.empty()) parts.push_back("in none at " + join_and(safe));
    if (!undecided.empty()) parts.push_back("not decided at " + join_and(undecided) + " (the seeds disagree)");
    if (!few.empty()) parts.push_back("not decided at " + join_and(few) + " (fewer than two seeds logged an entropy)");
    if (!diverged.empty()) parts.push_back("every run diverged before logging an entropy at " + join_and(diverged));
    for (std::size_t k = 0; k < parts.size(); ++k) line += (k ? "; " : "") + parts[k];
  }
  if (!warmup_helped.empty()) line += "; warmup prevented the collapse at " + join_and(warmup_helped);
  return line + ".\n";
}

std::string bound_text(double T, std::size_t below, std::size_t points) {
  return T >= 2 ? fmt::format(
                      "The dashed curve is Zhai et al. 2023's lower bound (Theorem 3.1): the least entropy of a "
                      "softmax over T keys whose logit vector has norm at most σ, log(1 + (T−1)β) + "
                      "σ·sqrt(T(T−1))·β / (1 + (T−1)β), β = exp(−σ·sqrt(T/(T−1))), drawn with T = {:g} and σ = "
                      "c·||W_q,h W_k,hᵀ||₂. That σ leaves out the inputs: a query's logit vector has norm up to "
                      "σ·|x_i|·||X||₂, and xgrad's attention inputs are LayerNorm'd (|x| about sqrt(d_model)), "
                      "so the curve is the bound for inputs of unit scale, not a bound these runs must obey: {} "
                      "of {} logged head measurements lie below it.",
                      T, below, points)
                : std::string("The sequence length was not found in config.json: the bound is not drawn.");
}

std::vector<report::PresetSection> report(const report::PresetInput& in) {
  const report::Comparison& c = in.comparison;
  Grid g = read_grid(c);
  report::PresetSection s;
  s.anchor = "collapse";
  s.title = "Attention entropy collapse (Zhai et al. 2023)";
  if (g.cells.empty()) {
    s.markdown = "No run of the collapse grid was found.\n";
    return {s};
  }
  const double top_lr = [&] {
    double top = 0;
    for (const auto& [scale, by_lr] : g.cells) top = std::max(top, by_lr.rbegin()->first);
    return top;
  }();
  std::set<long> warmups;
  for (const auto& [scale, by_lr] : g.cells)
    for (const auto& [lr, by_warmup] : by_lr)
      for (const auto& [w, cell] : by_warmup) warmups.insert(w);
  add_step_figures(g, top_lr, warmups, s);
  std::size_t below = 0, points = 0;
  add_norm_figure(g, top_lr, s, &below, &points);

  // The table and the sentences: per (scaling, lr, warmup), how many seeds collapsed.
  report::Table t;
  t.header = {"scaling", "lr", "warmup steps", "collapsed seeds", "lowest entropy (mean)", "final accuracy (mean)",
              "diverged"};
  std::string text;
  for (const std::string& scale : g.order) text += line_text(scale, g.cells[scale], t);
  s.markdown = fmt::format(
                   "A run **collapses** when some head's attention entropy (mean over the answer's query "
                   "positions) falls below {:g} nats at a logged step and the run does not learn: it diverges "
                   "or ends below {:g} accuracy (on key-value recall a run that learns also ends with nearly "
                   "one-hot attention, on the right key). A scaling collapses at a learning rate when every "
                   "seed does; \"not decided\" where the seeds disagree.\n\n",
                   kCollapseEntropy, kLearnedAccuracy) +
               text + "\n" + bound_text(g.T, below, points) + "\n\n" + t.markdown() + "\n";
  return {s};
}

const Registration<PresetReport> collapse_registration{PresetReport{"collapse", 30, report}};

}  // namespace
}  // namespace xgrad::report::presets::collapse
