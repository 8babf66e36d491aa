// The report of preset `width` (its grid and question: cli/presets/width.cpp): the best learning rate against
// width per parametrization (Yang et al. 2022, Tensor Programs V, figure 1).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/enum_names.h"
#include "common/file_name.h"
#include "common/registry.h"
#include "nn/model_config.h"
#include "report/preset_report.h"
#include "report/tables.h"

namespace xgrad::report::presets::width {
namespace {

constexpr std::size_t kBaseWidth = 64;  // the grid's --base-width (cli/presets/width.cpp)

// A run's variant, as the report names it. load_run refused a config.json whose parametrization or scale is not a
// name, so both are strings here.
std::string variant_of(const nlohmann::json& config) {
  const std::string p = config.value("parametrization", "sp"), s = config.value("scale", "");
  return p == enum_name(nn::kParametrizationNames, nn::Parametrization::mup) ? "muP (1/d_k)" : "SP " + s;
}
const std::vector<std::string> kVariants{"SP sqrt_dk", "SP none", "muP (1/d_k)"};
std::string variant_scale(const std::string& v) {
  return v == "SP sqrt_dk" ? "sqrt_dk" : v == "SP none" ? "none" : "dk";
}

struct Cell {                      // one (variant, width, lr): its runs
  std::vector<double> objective;   // lr objective per seed: min(final, initial) loss, the initial loss if diverged
  std::vector<double> final_loss;  // of the runs that did not diverge
  std::map<std::uint64_t, double> by_seed;
  std::size_t diverged = 0;
};

std::string lr_text(double lr) { return fmt::format("{:g}", lr); }

// The width grid's runs: line -> width -> lr -> cell, and what each line is.
// A line is a variant and the other settings the arms differ in (flags may add some: --grid n_layers=1,2).
struct Grid {
  std::map<std::string, std::map<std::size_t, std::map<double, Cell>>> cells;
  std::map<std::string, std::string> variant_base, line_extras;  // line -> its variant (kVariants), its extras
  std::vector<std::string> lines;                                // in kVariants order
};

Grid read_grid(const report::Comparison& c) {
  Grid g;
  const report::LineLabels labels(c, {"d_model", "d_k", "lr", "scale", "parametrization"});
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const nlohmann::json& cfg = c.runs[i].config;
    if (!cfg.contains("d_model") || !cfg.contains("lr") || c.runs[i].incomplete) continue;
    const std::string line = labels(variant_of(cfg), report::arm_settings(cfg));
    g.variant_base[line] = variant_of(cfg);
    g.line_extras[line] = labels.extras(report::arm_settings(cfg));
    Cell& cell = g.cells[line][cfg.at("d_model").get<std::size_t>()][cfg.at("lr").get<double>()];
    const double objective = c.stats[i]["lr_objective"];
    cell.objective.push_back(objective);
    cell.by_seed[cfg.value("seed", std::uint64_t{0})] = objective;
    if (c.runs[i].diverged)
      ++cell.diverged;
    else
      cell.final_loss.push_back(c.stats[i]["final_loss"]);
  }
  for (const std::string& v : kVariants)
    for (const auto& [line, base] : g.variant_base)
      if (base == v) g.lines.push_back(line);
  return g;
}

// Loss against lr, one figure per variant, one line per width.
void add_loss_figures(Grid& g, report::PresetSection& s) {
  for (const std::string& variant : g.lines) {
    std::string suffix;  // the extras, as a file name's part
    for (char ch : g.line_extras[variant]) suffix += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    // The extras are values from the runs' config.json: bounded in length like any name made from data.
    report::SummaryFigure f = report::summary_figure(
        safe_file_stem("width_loss_vs_lr_" + variant_scale(g.variant_base[variant]) +
                       (variant.rfind("muP", 0) == 0 ? "_mup" : "_sp") + (suffix.empty() ? "" : "_" + suffix)),
        "Final loss against learning rate per width, " + variant,
        "AdamW; per width (d_model = d_k) the mean over seeds of the final loss (runs that diverged left out), "
        "error bars ± sd",
        "learning rate", report::Axis::log, "final loss (nats)", report::Axis::linear);
    for (const auto& [width, by_lr] : g.cells.at(variant)) {
      report::SummaryLine line =
          report::summary_line("d_model=" + std::to_string(width), variant_scale(g.variant_base[variant]));
      for (const auto& [lr, cell] : by_lr) {
        line.points.push_back(report::mean_point(lr, report::mean_sd(cell.final_loss), cell.diverged, true));
      }
      f.lines.push_back(line);
    }
    s.figures.push_back(f);
  }
}

// The best lr per (variant, width): per seed the lr of the lowest objective; decided when the seeds agree.
struct Best {
  double lr = report::kNoValue;                         // the mean objective's argmin
  double lo = report::kNoValue, hi = report::kNoValue;  // the seeds' best lrs
  bool decided = false;
  bool at_edge = false;  // the best lr is the smallest or largest of the grid: the optimum may lie beyond it
  double objective = report::kNoValue;
};
using BestLrs = std::map<std::string, std::map<std::size_t, Best>>;

// The best lr at one width (its runs by lr); `seeds` gets the number of seeds that have one.
Best best_of(const std::map<double, Cell>& by_lr, std::size_t* seeds) {
  Best b;
  std::map<std::uint64_t, std::pair<double, double>> seed_best;  // seed -> (objective, lr)
  double best_mean = INFINITY;
  for (const auto& [lr, cell] : by_lr) {
    const double mean = report::mean_sd(cell.objective).mean;
    if (std::isfinite(mean) && mean < best_mean) {
      best_mean = mean;
      b.lr = lr;
    }
    for (const auto& [seed, objective] : cell.by_seed) {
      auto it = seed_best.find(seed);
      if (std::isfinite(objective) && (it == seed_best.end() || objective < it->second.first))
        seed_best[seed] = {objective, lr};
    }
  }
  std::set<double> seed_lrs;
  for (const auto& [seed, pair] : seed_best) seed_lrs.insert(pair.second);
  b.decided = seed_best.size() >= 2 && seed_lrs.size() == 1;
  if (!seed_lrs.empty()) {
    b.lo = *seed_lrs.begin();
    b.hi = *seed_lrs.rbegin();
  }
  b.objective = best_mean;
  bool all_diverged = true;  // every run at this width diverged: each objective is a step-0 loss, no best lr
  for (const auto& [lr, cell] : by_lr) all_diverged = all_diverged && cell.diverged == cell.objective.size();
  if (all_diverged) b = Best{};
  b.at_edge = std::isfinite(b.lr) && (b.lr == by_lr.begin()->first || b.lr == by_lr.rbegin()->first);
  *seeds = seed_best.size();
  return b;
}

BestLrs add_best_lr_figure(Grid& g, report::PresetSection& s) {
  BestLrs best;
  report::SummaryFigure fb = report::summary_figure(
      "width_best_lr_vs_d_k", "Best learning rate against width (d_model = d_k)",
      "AdamW; the point is the learning rate of the lowest mean lr objective min(final loss, step-0 loss) "
      "over seeds (a diverged run counts its step-0 loss); the bar spans the seeds' own best learning rates",
      "d_model = d_k", report::Axis::log, "best learning rate", report::Axis::log);
  fb.error_bar_sd = false;
  for (const std::string& variant : g.lines) {
    report::SummaryLine line = report::summary_line(variant, variant_scale(g.variant_base[variant]));
    for (const auto& [width, by_lr] : g.cells.at(variant)) {
      std::size_t seeds = 0;
      const Best b = best_of(by_lr, &seeds);
      best[variant][width] = b;
      report::SummaryPoint p;
      p.x = static_cast<double>(width);
      p.y = b.lr;
      p.lo = b.lo;
      p.hi = b.hi;
      p.n = seeds;
      line.points.push_back(p);
    }
    fb.lines.push_back(line);
  }
  s.figures.push_back(fb);
  return best;
}

report::Table best_table(Grid& g, const BestLrs& best) {
  report::Table t;
  t.header = {"variant", "d_model = d_k", "best lr", "seeds' best lrs", "lr objective at it", "diverged runs"};
  for (const std::string& variant : g.lines) {
    if (!best.count(variant)) continue;
    for (const auto& [width, b] : best.at(variant)) {
      std::size_t diverged = 0, runs = 0;
      for (const auto& [lr, cell] : g.cells.at(variant).at(width)) {
        diverged += cell.diverged;
        runs += cell.objective.size();
      }
      t.rows.push_back({variant, std::to_string(width),
                        std::isfinite(b.lr) ? lr_text(b.lr) + (b.decided ? "" : " (not decided)")
                        : diverged == runs  ? "none (every run diverged)"
                                            : "none",
                        !std::isfinite(b.lo) ? "—"
                        : b.lo == b.hi       ? lr_text(b.lo)
                                             : lr_text(b.lo) + " to " + lr_text(b.hi),
                        train::format_number(b.objective, 3), fmt::format("{} of {}", diverged, runs)});
    }
  }
  return t;
}

// Sentences, each from the numbers: how far the best lr moves across the widths, per variant, over the widths
// where the seeds agree. `spread` gets, per variant, max/min of the decided best lrs (NaN: fewer than 2 decided).
std::string spread_text(const Grid& g, const BestLrs& best, std::map<std::string, double>& spread) {
  std::string text;
  for (const std::string& variant : g.lines) {
    if (!best.count(variant)) continue;
    std::vector<std::pair<std::size_t, double>> decided;
    std::vector<std::size_t> undecided;
    bool edge = false;
    for (const auto& [width, b] : best.at(variant)) {
      if (b.decided)
        decided.push_back({width, b.lr});
      else
        undecided.push_back(width);
      edge = edge || (b.decided && b.at_edge);
    }
    std::string line = "- **" + variant + "**: ";
    if (decided.size() < 2) {
      line += "not decided: the seeds agree on the best learning rate at " + std::to_string(decided.size()) + " width" +
              (decided.size() == 1 ? "" : "s") + " only.";
      spread[variant] = report::kNoValue;
    } else {
      double lo = INFINITY, hi = 0;
      for (const auto& [w, lr] : decided) {
        lo = std::min(lo, lr);
        hi = std::max(hi, lr);
      }
      spread[variant] = hi / lo;
      line += fmt::format("the best learning rate is {} at d_model {} and {} at d_model {}",
                          lr_text(decided.front().second), decided.front().first, lr_text(decided.back().second),
                          decided.back().first);
      line += hi == lo ? "; it is the same at every width where the seeds agree"
                       : fmt::format("; over the widths where the seeds agree it spans a factor of {:.3g}", hi / lo);
      if (!undecided.empty()) {
        line += " (not decided at d_model";
        for (std::size_t k = 0; k < undecided.size(); ++k) line += (k ? ", " : " ") + std::to_string(undecided[k]);
        line += ": the seeds' best learning rates differ)";
      }
      line += ".";
      if (edge) line += " At some width the best learning rate is the edge of the grid: the optimum may lie beyond it.";
    }
    text += line + "\n";
  }
  return text;
}

// The literature's claim: muP's best lr moves less with width than SP's; between lines of equal extras.
std::string claims_text(Grid& g, const std::map<std::string, double>& spread) {
  std::string claims;
  std::vector<std::string> extras_seen;
  for (const std::string& variant : g.lines) {
    const std::string extras = g.line_extras[variant];
    if (std::find(extras_seen.begin(), extras_seen.end(), extras) != extras_seen.end()) continue;
    extras_seen.push_back(extras);
    auto with = [&](const std::string& name) { return extras.empty() ? name : name + " " + extras; };
    std::string claim;
    const double mup = spread.count(with("muP (1/d_k)")) ? spread.at(with("muP (1/d_k)")) : report::kNoValue;
    const double sp = spread.count(with("SP sqrt_dk")) ? spread.at(with("SP sqrt_dk")) : report::kNoValue;
    if (!spread.count(with("muP (1/d_k)")) || !spread.count(with("SP sqrt_dk")))
      claim =
          "Whether muP holds the best learning rate in place better than SP with sqrt_dk is not asked here: the runs "
          "hold no " +
          std::string(spread.count(with("SP sqrt_dk")) ? "muP" : "SP sqrt_dk") + " line.";
    else if (!std::isfinite(mup) || !std::isfinite(sp))
      claim =
          "Whether muP holds the best learning rate in place better than SP with sqrt_dk is not decided here: one "
          "of them has fewer than two widths where the seeds agree.";
    else if (mup < sp)
      claim = fmt::format(
          "Yang et al.'s claim reproduced at this scale: across widths the best learning rate moves by "
          "a factor of {:.3g} under muP and {:.3g} under SP with sqrt_dk.",
          mup, sp);
    else if (mup == sp)
      claim = fmt::format(
          "Whether muP holds the best learning rate in place better than SP with sqrt_dk is not decided "
          "on this grid: across widths it moves by the same factor ({:.3g}) under both.",
          mup);
    else
      claim = fmt::format(
          "Yang et al.'s claim did not reproduce at this scale: across widths the best learning rate "
          "moves by a factor of {:.3g} under muP, more than the {:.3g} under SP with sqrt_dk.",
          mup, sp);
    claims += (extras.empty() ? "" : "With " + extras + ": ") + claim + "\n";
  }
  return claims;
}

std::vector<report::PresetSection> report(const report::PresetInput& in) {
  const report::Comparison& c = in.comparison;
  Grid g = read_grid(c);
  report::PresetSection s;
  s.anchor = "width";
  s.title = "Best learning rate against width (Yang et al. 2022, figure 1 at toy scale)";
  if (g.cells.empty()) {
    s.markdown = "No complete run of the width grid was found.\n";
    return {s};
  }
  add_loss_figures(g, s);
  const BestLrs best = add_best_lr_figure(g, s);
  const report::Table t = best_table(g, best);
  std::map<std::string, double> spread;
  const std::string text = spread_text(g, best, spread);
  const std::string claims = claims_text(g, spread);
  s.markdown = "AdamW at " + std::to_string(g.cells.begin()->second.begin()->second.size()) +
               " learning rates; one head, attention only, d_model = d_k; muP relative to d_model " +
               std::to_string(kBaseWidth) +
               " (`--base-width`). The lr objective is min(final loss, step-0 loss), a "
               "diverged run counting its step-0 loss (Wortsman et al. 2023). A best learning rate is decided where "
               "every seed has its lowest objective at it.\n\n" +
               text + "\n" + claims + "\n" + t.markdown() + "\n";
  return {s};
}

const Registration<PresetReport> width_registration{PresetReport{"width", 20, report}};

}  // namespace
}  // namespace xgrad::report::presets::width
