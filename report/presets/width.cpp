// The report of preset `width` (its grid and question: cli/presets/width.cpp): the best learning rate against
// width per parametrization (Yang et al. 2022, Tensor Programs V, figure 1).
#include <cctype>
#include <cmath>

#include "common/enum_names.h"
#include "common/file_name.h"
#include "nn/model_config.h"
#include "report/preset_report.h"

namespace xgrad::report::presets::width {
namespace {

constexpr std::size_t kBaseWidth = 64;  // the grid's --base-width (cli/presets/width.cpp)

// The variants the report draws, as it names them, each with the scaling whose colour it takes.
const std::vector<std::pair<std::string, std::string>> kVariants{
    {"SP sqrt_dk", "sqrt_dk"}, {"SP none", "none"}, {"muP (1/d_k)", "dk"}};

// An arm's variant. load_run refused a config.json whose parametrization or scale is not a name.
std::string variant_of(const ArmStats& arm) {
  const bool mup =
      arm.settings.value("parametrization", "sp") == enum_name(nn::kParametrizationNames, nn::Parametrization::mup);
  return mup ? "muP (1/d_k)" : "SP " + arm.scale();
}

std::string lr_text(double lr) { return fmt::format("{:g}", lr); }

// The best lr at one width: per seed the lr of the lowest objective; decided when the seeds agree.
struct Best {
  double lr = kNoValue;                 // the mean objective's argmin
  double lo = kNoValue, hi = kNoValue;  // the seeds' best lrs
  bool decided = false;
  bool at_edge = false;  // the best lr is the smallest or largest of the grid: the optimum may lie beyond it
  double objective = kNoValue;
  std::size_t seeds = 0, diverged = 0, runs = 0;  // seeds with a best lr; the runs, and those that diverged
};

// A variant and the other settings the arms differ in (flags may add some: --grid n_layers=1,2): width -> lr -> arm.
struct Line {
  std::string name, scale, extras;
  std::map<std::size_t, std::map<double, const ArmStats*>> cells;
  std::map<std::size_t, Best> best;  // by width
  double spread = kNoValue;          // max/min of the decided best lrs (NaN: fewer than 2 decided, or holes)
  std::set<std::string> holes;       // "d_model 64 at lr 0.01": cells of its group's grid without a complete run
};

Best best_of(const Comparison& c, const std::map<double, const ArmStats*>& by_lr) {
  Best b;
  std::map<nlohmann::json, std::pair<double, double>> seed_best;  // seed -> (objective, lr)
  double best_mean = INFINITY;
  static const Claim objective{"", "lr_objective", Better::lower, "loss"};
  for (const auto& [lr, arm] : by_lr) {
    if (arm->stat("lr_objective").mean < best_mean) best_mean = arm->stat("lr_objective").mean, b.lr = lr;
    for (const auto& [seed, o] : per_seed(c, *arm, objective, "lr_objective")) {  // a seed run twice: their mean
      const auto it = seed_best.find(seed);
      if (std::isfinite(o) && (it == seed_best.end() || o < it->second.first)) seed_best[seed] = {o, lr};
    }
    b.diverged += arm->diverged_steps.size();
    b.runs += arm->used.size();
  }
  std::set<double> seed_lrs;
  for (const auto& [seed, pair] : seed_best) seed_lrs.insert(pair.second);
  b.decided = seed_best.size() >= 2 && seed_lrs.size() == 1;
  if (!seed_lrs.empty()) b.lo = *seed_lrs.begin(), b.hi = *seed_lrs.rbegin();
  b.objective = best_mean;
  if (b.diverged == b.runs) b.lr = b.lo = b.hi = b.objective = kNoValue, b.decided = false;  // step-0 losses only
  b.at_edge = std::isfinite(b.lr) && (b.lr == by_lr.begin()->first || b.lr == by_lr.rbegin()->first);
  b.seeds = seed_best.size();
  return b;
}

// The lines of the arms with a complete run, in kVariants order, then by name, with their best lrs.
std::vector<Line> lines_of(const Comparison& c) {
  const LineLabels labels(c, {"d_model", "d_k", "lr", "scale", "parametrization"});
  std::vector<Line> lines;
  for (const auto& [variant, scale] : kVariants) {
    std::map<std::string, Line> by_name;
    for (const ArmStats& arm : c.arms) {
      if (variant_of(arm) != variant || arm.only_incomplete() || !arm.settings.contains("d_model")) continue;
      const std::string name = labels(variant, arm.settings);
      Line& line =
          by_name.try_emplace(name, Line{name, scale, labels.extras(arm.settings), {}, {}, kNoValue, {}}).first->second;
      line.cells[arm.settings.at("d_model").get<std::size_t>()][arm.lr()] = &arm;
    }
    for (const auto& entry : by_name) lines.push_back(entry.second);
  }
  const auto seeds_of = [&c](const ArmStats& arm) {  // of its complete runs
    std::set<nlohmann::json> seeds;
    for (std::size_t r : arm.used) seeds.insert(seed_key(c.runs[r].config));
    return seeds;
  };
  for (Line& line : lines) {
    std::set<nlohmann::json> seeds;  // of its group's complete runs
    for (const Line& other : lines)  // a cell of equal extras it lacks: a best lr moved by a missing run is no move
      for (const auto& [width, by_lr] : other.cells)
        for (const auto& cell : by_lr) {
          if (other.extras != line.extras) continue;
          if (!(line.cells.count(width) && line.cells.at(width).count(cell.first)))
            line.holes.insert(fmt::format("d_model {} at lr {}", width, lr_text(cell.first)));
          for (const auto& seed : seeds_of(*cell.second)) seeds.insert(seed);
        }
    for (const auto& [width, by_lr] : line.cells) {
      for (const auto& [lr, arm] : by_lr)  // nor is one seed's missing run: its best lr is another seed's
        for (const auto& seed : seeds)
          if (!seeds_of(*arm).count(seed))
            line.holes.insert(fmt::format("d_model {} at lr {} for seed {}", width, lr_text(lr), seed.at(0).dump()));
      line.best[width] = best_of(c, by_lr);
    }
  }
  return lines;
}

// Loss against lr, one figure per line, one curve per width.
void add_loss_figures(const std::vector<Line>& lines, PresetSection& s) {
  for (const Line& line : lines) {
    std::string suffix;  // the extras (values from config.json), as a file name's part bounded by safe_file_stem
    for (char ch : line.extras) suffix += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    std::vector<LinePoint> points;
    for (const auto& [width, by_lr] : line.cells)
      for (const auto& [lr, arm] : by_lr)
        points.push_back({"d_model=" + std::to_string(width), line.scale,
                          mean_point(lr, arm->stat("final_loss"), arm->diverged_steps.size(), true)});
    s.figures.push_back(
        lines_figure(safe_file_stem("width_loss_vs_lr_" + line.scale + (line.scale == "dk" ? "_mup" : "_sp") +
                                    (suffix.empty() ? "" : "_" + suffix)),
                     "width.loss", Axis::log, Axis::linear, points, {{"line", line.name}}));
  }
}

// The best lr against width, one curve per line, and the table of the best lrs.
void add_best_lrs(const std::vector<Line>& lines, PresetSection& s, Table& t) {
  std::vector<LinePoint> points;
  for (const Line& line : lines)
    for (const auto& [width, b] : line.best) {
      points.push_back({line.name, line.scale, SummaryPoint{static_cast<double>(width), b.lr, b.lo, b.hi, b.seeds, 0}});
      t.rows.push_back({line.name, std::to_string(width),
                        std::isfinite(b.lr)    ? lr_text(b.lr) + (b.decided ? "" : " (not decided)")
                        : b.diverged == b.runs ? "none (every run diverged)"
                                               : "none",
                        !std::isfinite(b.lo) ? "—"
                        : b.lo == b.hi       ? lr_text(b.lo)
                                             : lr_text(b.lo) + " to " + lr_text(b.hi),
                        train::format_number(b.objective, 3), fmt::format("{} of {}", b.diverged, b.runs)});
    }
  s.figures.push_back(lines_figure("width_best_lr_vs_d_k", "width.best", Axis::log, Axis::log, points));
  s.figures.back().error_bar_sd = false;
}

// How far the best lr moves across the widths where the seeds agree, one sentence per line; sets each line's spread.
std::string spread_text(std::vector<Line>& lines) {
  std::string text;
  for (Line& line : lines) {
    std::vector<std::pair<std::size_t, double>> decided;
    std::vector<std::string> undecided;
    bool edge = false;
    for (const auto& [width, b] : line.best) {
      if (b.decided)
        decided.push_back({width, b.lr});
      else
        undecided.push_back(std::to_string(width));
      edge = edge || (b.decided && b.at_edge);
    }
    text += "- **" + markdown_text(line.name) + "**: ";
    if (!line.holes.empty() || decided.size() < 2) {
      const bool one_seed =  // at every width: no seeds to agree
          std::all_of(line.best.begin(), line.best.end(), [](const auto& wb) { return wb.second.seeds < 2; });
      text += (line.holes.empty()
                   ? preset_text(one_seed ? "width.one_seed" : "width.few_decided",
                                 {{"n", decided.size()}, {"s", decided.size() == 1 ? "" : "s"}})
                   : preset_text("width.hole", {{"holes", join_and({line.holes.begin(), line.holes.end()})}})) +
              "\n";
      continue;
    }
    const auto [lo, hi] = std::minmax_element(decided.begin(), decided.end(),
                                              [](const auto& a, const auto& b) { return a.second < b.second; });
    line.spread = hi->second / lo->second;
    text += preset_text("width.moves", {{"lr_first", lr_text(decided.front().second)},
                                        {"first", decided.front().first},
                                        {"lr_last", lr_text(decided.back().second)},
                                        {"last", decided.back().first},
                                        {"factor", line.spread}}) +
            (undecided.empty() ? "" : preset_text("width.undecided_at", {{"list", join_and(undecided)}})) + "." +
            (edge ? preset_text("width.edge") : "") + "\n";
  }
  return text;
}

// The literature's claim: muP's best lr moves less with width than SP's; between lines of equal extras.
std::string claims_text(const std::vector<Line>& lines) {
  std::string claims;
  std::set<std::string> extras_seen;
  for (const Line& line : lines) {
    if (!extras_seen.insert(line.extras).second) continue;
    const auto find = [&](const std::string& variant) {
      const std::string name = line.extras.empty() ? variant : variant + " " + line.extras;
      return std::find_if(lines.begin(), lines.end(), [&](const Line& l) { return l.name == name; });
    };
    const auto mup = find("muP (1/d_k)"), sp = find("SP sqrt_dk");
    const bool both = mup != lines.end() && sp != lines.end();
    const double m = both ? mup->spread : kNoValue, s = both ? sp->spread : kNoValue;
    const auto holed = both && !mup->holes.empty() ? mup : sp;  // SP's, or muP's when it has holes
    const std::string missing = both                ? markdown_text(holed->name)
                                : sp != lines.end() ? "muP"
                                                    : "SP sqrt_dk";  // a line, named
    const char* key = !both                                    ? "width.claim_not_asked"
                      : !holed->holes.empty()                  ? "width.claim_hole"
                      : !std::isfinite(m) || !std::isfinite(s) ? "width.claim_no_spread"
                      : m < s                                  ? "width.claim_reproduced"
                      : m == s                                 ? "width.claim_tie"
                                                               : "width.claim_not_reproduced";
    claims += (line.extras.empty() ? "" : "With " + markdown_text(line.extras) + ": ") +
              preset_text(key, {{"mup", m}, {"sp", s}, {"missing", missing}}) + "\n";
  }
  return claims;
}

std::vector<PresetSection> report(const PresetInput& in) {
  std::vector<Line> lines = lines_of(in.comparison);
  PresetSection s = preset_section("width");
  if (lines.empty()) return {preset_section("width", preset_text("width.no_run") + "\n")};
  add_loss_figures(lines, s);
  Table t = preset_table("width.table_header");
  add_best_lrs(lines, s, t);
  const std::string text = spread_text(lines);
  s.markdown =
      preset_text("width.legend", {{"n_lrs", lines.front().cells.begin()->second.size()}, {"base", kBaseWidth}}) +
      "\n\n" + text + "\n" + claims_text(lines) + "\n" + t.markdown() + "\n";
  return {s};
}

const Registration<PresetReport> width_registration{PresetReport{"width", 20, report}};

}  // namespace
}  // namespace xgrad::report::presets::width
