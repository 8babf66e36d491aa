// The report of preset `collapse` (its grid and question: cli/presets/collapse.cpp): per-head attention entropy
// against step, and entropy against c · ||W_q,h W_k,h^T||_2 with Zhai et al. 2023's lower bound drawn.
#include <cmath>
#include <cstdint>
#include <optional>

#include "nn/entropy_bound.h"
#include "report/preset_report.h"
#include "train/metrics_log.h"
#include "train/run_files.h"

namespace xgrad::report::presets::collapse {
namespace {

constexpr double kCollapseEntropy = 0.1;  // nats: below it a head's attention is all but one-hot
constexpr double kLearnedAccuracy = 0.5;  // a run that ends below this accuracy has not learned the task

// What one run logged per measured step: the lowest head entropy, the largest scaled spectral norm, each head's pair.
struct RunCurves {
  std::vector<double> step, entropy_min, norm_max;
  std::vector<std::pair<double, double>> head_points;
  double lowest_entropy = INFINITY;
  bool read = false;
};

RunCurves read_curves(const RunRecord& run) {
  RunCurves out;
  try {
    const train::MetricsTable t = train::read_metrics(run.dir + "/" + train::kMetricsFile);
    const auto column = [&](std::size_t layer, std::size_t h, const char* what) {
      const auto it = std::find(t.columns.begin(), t.columns.end(), train::metrics_columns::attention(layer, h, what));
      return it == t.columns.end() ? SIZE_MAX : static_cast<std::size_t>(it - t.columns.begin());
    };
    // A head's (entropy column, norm column); SIZE_MAX where either is missing.
    const auto head = [&](std::size_t layer, std::size_t h) {
      const std::size_t e = column(layer, h, "entropy_mean"), n = column(layer, h, "qk_spectral_norm");
      return e == SIZE_MAX || n == SIZE_MAX ? std::pair{SIZE_MAX, SIZE_MAX} : std::pair{e, n};
    };
    std::vector<std::pair<std::size_t, std::size_t>> heads;  // the last layer's
    for (std::size_t layer = 0; head(layer, 0).first != SIZE_MAX; ++layer) {
      heads.clear();
      for (std::size_t h = 0; head(layer, h).first != SIZE_MAX; ++h) heads.push_back(head(layer, h));
    }
    const std::size_t step = t.column(train::metrics_columns::kStep);
    for (const auto& row : t.rows) {
      double e_min = INFINITY, n_max = 0;
      for (const auto& [e, n] : heads)
        if (std::isfinite(row[e]) && std::isfinite(row[n])) {
          e_min = std::min(e_min, row[e]);
          n_max = std::max(n_max, row[n]);
          out.head_points.push_back({row[n], row[e]});
        }
      if (e_min == INFINITY) continue;
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

struct Cell {  // one arm: a line at one lr and warmup
  std::vector<std::size_t> runs;
  std::size_t collapsed = 0, read = 0, diverged = 0;
  std::vector<double> lowest_entropy, final_accuracy;
};

// A scaling and the other settings the arms differ in: lr -> warmup -> cell.
struct Line {
  std::string name, scale;
  std::map<double, std::map<long, Cell>> cells;
  std::size_t first_run = SIZE_MAX;  // the lowest index of its runs
};

// The collapse grid's runs: what each logged, and the lines in the order the comparison lists their runs.
struct Grid {
  std::vector<RunCurves> curves;  // per run of the comparison
  std::vector<Line> lines;
  double T = 0;  // keys the answer's query attends to
};

Grid read_grid(const Comparison& c) {
  Grid g;
  g.curves.resize(c.runs.size());
  const LineLabels labels(c, {"scale", "lr", "warmup_steps"});
  for (const auto& [name, arms] :
       group_by(arm_pointers(c), [&](const ArmStats* a) { return labels(a->scale(), a->settings); })) {
    Line& line = g.lines.emplace_back(Line{name, arms.front()->scale(), {}, SIZE_MAX});
    for (const ArmStats* arm : arms) {
      Cell& cell = line.cells[arm->lr()][arm->settings.value("warmup_steps", 0L)];
      for (std::size_t i : arm->runs) {
        cell.runs.push_back(i);
        line.first_run = std::min(line.first_run, i);
        const nlohmann::json& cfg = c.runs[i].config;
        g.curves[i] = read_curves(c.runs[i]);
        if (cfg.contains("derived") && cfg.at("derived").contains("seq_len"))
          g.T = cfg.at("derived").at("seq_len").get<double>();
        cell.diverged += c.runs[i].diverged ? 1 : 0;
        if (!g.curves[i].read) continue;
        ++cell.read;
        const bool learned = !c.runs[i].diverged && c.stats[i]["final_accuracy"] >= kLearnedAccuracy;
        cell.collapsed += g.curves[i].lowest_entropy < kCollapseEntropy && !learned ? 1 : 0;
        cell.lowest_entropy.push_back(g.curves[i].lowest_entropy);
        if (!c.runs[i].diverged) cell.final_accuracy.push_back(c.stats[i]["final_accuracy"]);
      }
    }
  }
  std::sort(g.lines.begin(), g.lines.end(), [](const Line& a, const Line& b) { return a.first_run < b.first_run; });
  return g;
}

// Per logged step of the runs of `line` at (lr, warmup): their lowest head entropies and largest head norms; none
// when the line has no such cell.
using Steps = std::map<double, std::pair<std::vector<double>, std::vector<double>>>;
std::optional<Steps> by_step(const Grid& g, const Line& line, double lr, long warmup) {
  const auto by_lr = line.cells.find(lr);
  if (by_lr == line.cells.end() || !by_lr->second.count(warmup)) return std::nullopt;
  Steps out;
  for (std::size_t i : by_lr->second.at(warmup).runs)
    for (std::size_t k = 0; k < g.curves[i].step.size(); ++k) {
      out[g.curves[i].step[k]].first.push_back(g.curves[i].entropy_min[k]);
      out[g.curves[i].step[k]].second.push_back(g.curves[i].norm_max[k]);
    }
  return out;
}

// Entropy against step at the highest lr, without and with warmup: mean over seeds of the lowest head entropy.
void add_step_figures(const Grid& g, double top_lr, const std::set<long>& warmups, PresetSection& s) {
  for (long warmup : warmups) {
    const std::string name = warmup == 0 ? "collapse_entropy_vs_step" : "collapse_entropy_vs_step_warmup";
    std::vector<LinePoint> points;
    for (const Line& line : g.lines)
      if (const std::optional<Steps> steps = by_step(g, line, top_lr, warmup)) {
        std::vector<SummaryPoint> curve;
        for (const auto& [step, values] : *steps) {
          const MeanSd m = mean_sd(values.first);
          curve.push_back(SummaryPoint{step, m.mean, m.min, m.max, values.first.size(), 0});
        }
        add_line(points, line.name, line.scale, curve);
      }
    s.figures.push_back(lines_figure(name, "collapse." + name, Axis::linear, Axis::linear, points,
                                     {{"lr", lr_text(top_lr)}, {"warmup", warmup}}));
    s.figures.back().error_bar_sd = s.figures.back().tabulate = false;
  }
}

// Entropy against the spectral norm at the highest lr without warmup, with the bound. `below` and `points` get the
// number of logged head measurements below the bound and in all.
void add_norm_figure(const Grid& g, double top_lr, PresetSection& s, std::size_t* below, std::size_t* points) {
  std::vector<LinePoint> curves;
  for (const Line& line : g.lines)
    if (const std::optional<Steps> steps = by_step(g, line, top_lr, 0)) {
      std::vector<SummaryPoint> curve;
      for (const auto& [step, values] : *steps) {
        const SummaryPoint p{
            mean_sd(values.second).mean, mean_sd(values.first).mean, kNoValue, kNoValue, values.first.size(), 0};
        if (std::isfinite(p.x) && p.x > 0) curve.push_back(p);
      }
      add_line(curves, line.name, line.scale, curve);
    }
  SummaryFigure f = lines_figure("collapse_entropy_vs_spectral_norm", "collapse.norm", Axis::log, Axis::linear, curves,
                                 {{"lr", lr_text(top_lr)}, {"T", g.T}});
  f.error_bar_sd = f.tabulate = false;
  double norm_lo = INFINITY, norm_hi = 0;
  for (const RunCurves& curves : g.curves)
    for (const auto& [norm, entropy] : curves.head_points) {
      ++*points;
      *below += entropy < nn::entropy_lower_bound(norm, g.T) - 1e-9 ? 1 : 0;
      if (norm > 0) norm_lo = std::min(norm_lo, norm), norm_hi = std::max(norm_hi, norm);
    }
  if (g.T >= 2 && norm_hi > 0) {
    SummaryLine& bound = f.lines.emplace_back(
        summary_line(fmt::format("bound, T = {:g}", g.T), g.lines.empty() ? "none" : g.lines.front().scale));
    bound.theory = true;
    for (int k = 0; k <= 40; ++k) {
      const double x = norm_lo * std::pow(norm_hi / norm_lo, k / 40.0);
      bound.points.push_back(SummaryPoint{x, nn::entropy_lower_bound(x, g.T), kNoValue, kNoValue, 0, 0});
    }
  }
  s.figures.push_back(f);
}

// The template key of `cell`'s state: every seed collapsed, none did, the seeds disagree (or nothing was read), every
// run diverged and none logged an entropy, fewer than two seeds (nothing for them to agree on).
std::string status(const Cell& cell) {
  if (cell.read == 0 && !cell.runs.empty() && cell.diverged == cell.runs.size()) return "collapse.diverged_at";
  if (cell.read < 2) return "collapse.few_at";
  return cell.collapsed == cell.read ? "collapse.collapses"
         : cell.collapsed == 0       ? "collapse.none_at"
                                     : "collapse.undecided_at";
}

// One line's rows of `t`, each with its cell's verdict; where warmup prevented a collapse goes into `helped`.
void add_rows(const Line& line, Table& t, std::vector<std::string>& helped) {
  for (const auto& [lr, by_warmup] : line.cells)
    for (const auto& [w, cell] : by_warmup) {
      t.rows.push_back({line.name, lr_text(lr), std::to_string(w), fmt::format("{} of {}", cell.collapsed, cell.read),
                        preset_text(status(cell)), train::format_number(mean_sd(cell.lowest_entropy).mean, 3),
                        train::format_number(mean_sd(cell.final_accuracy).mean, 2),
                        fmt::format("{} of {}", cell.diverged, cell.runs.size())});
      if (w > 0 && by_warmup.count(0) && status(by_warmup.at(0)) == "collapse.collapses" &&
          status(cell) == "collapse.none_at")
        helped.push_back(line.name + " at lr " + lr_text(lr));
    }
}

std::vector<PresetSection> report(const PresetInput& in) {
  const Grid g = read_grid(in.comparison);
  PresetSection s = preset_section("collapse");
  if (g.lines.empty()) return {preset_section("collapse", preset_text("collapse.no_run") + "\n")};
  double top_lr = 0;
  std::set<long> warmups;
  for (const Line& line : g.lines)
    for (const auto& [lr, by_warmup] : line.cells)
      for (const auto& [w, cell] : by_warmup) top_lr = std::max(top_lr, lr), warmups.insert(w);
  add_step_figures(g, top_lr, warmups, s);
  std::size_t below = 0, points = 0;
  add_norm_figure(g, top_lr, s, &below, &points);

  Table t = preset_table("collapse.table_header");  // per (scaling, lr, warmup), how many seeds collapsed
  std::vector<std::string> helped;
  for (const Line& line : g.lines) add_rows(line, t, helped);
  s.markdown = preset_text("collapse.legend", {{"entropy", kCollapseEntropy}, {"accuracy", kLearnedAccuracy}}) +
               "\n\n" + t.markdown() + "\n" +
               (helped.empty() ? "" : preset_text("collapse.warmup_helped", {{"list", join_and(helped)}}) + "\n\n") +
               (g.T >= 2 ? preset_text("collapse.bound", {{"T", g.T}, {"below", below}, {"points", points}})
                         : preset_text("collapse.no_bound")) +
               "\n";
  return {s};
}

const Registration<PresetReport> collapse_registration{PresetReport{"collapse", 30, report}};

}  // namespace
}  // namespace xgrad::report::presets::collapse
