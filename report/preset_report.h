// The report half of an experiment preset (`xgrad experiment --preset NAME`): the sections and figures a preset adds
// to report.md. It lives in the report library, so that `xgrad compare DIR` on a preset's sweep directory (whose
// sweep.json records the preset) writes the same sections again. A preset's report is its own file,
// report/presets/NAME.cpp (CMake picks up every .cpp there), registering a PresetReport under the preset's name; its
// grid is cli/presets/NAME.cpp (cli/presets/preset.h). The report half of a preset:
//
//   #include "common/registry.h"
//   #include "report/preset_report.h"
//   namespace xgrad::report::presets::my_preset {  // a namespace of its own: the library is a unity build
//   namespace {
//   std::vector<PresetSection> report(const PresetInput& in) {
//     PresetSection s;
//     s.anchor = "my-preset";
//     s.title = "My question";
//     SummaryFigure f;                                // drawn with gnuplot into plots/my_figure.{png,svg,gp}
//     f.name = "my_figure"; f.title = "..."; f.caption = "..."; f.x_label = "..."; f.y_label = "...";
//     f.lines = ...;                                  // computed from in.comparison (arms, runs, stats), each
//                                                     // labelled with LineLabels (flags add settings)
//     s.figures.push_back(f);
//     s.markdown = "...";                             // sentences computed from the numbers; "not decided" where
//     return {s};                                     // the seeds disagree
//   }
//   const Registration<PresetReport> my_preset_registration{PresetReport{"my_preset", 50, report}};
//   }  // namespace
//   }  // namespace xgrad::report::presets::my_preset
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "report/stats.h"
#include "report/summary.h"
#include "report/text.h"

namespace xgrad::report {

/// One section of report.md written by a preset: a level-2 heading with an anchor, its figures (each drawn with
/// gnuplot like the summary figures — PNG, SVG and an editable .gp in plots/ — and tabulated under its image unless
/// tabulate is false), then its markdown body. Every sentence of the body is computed from the numbers, and says
/// "not decided" where the seeds disagree (see report_markdown's rule in markdown.h).
struct PresetSection {
  std::string anchor;                  // id for links, e.g. "lr-final-loss"; unique within the report
  std::string title;                   // the heading's text
  std::string markdown;                // the body: sentences, tables (Table::markdown()), lists
  std::vector<SummaryFigure> figures;  // drawn before the body; names unique within the report, and a name made
                                       // from the runs' data (an optimizer, a setting's value) through
                                       // safe_file_stem (common/file_name.h): compare numbers apart any that collide
};

/// What a preset's sections are computed from.
struct PresetInput {
  const Comparison& comparison;  // every run read (runs, per-run stats, arms over seeds, lr groups)
  bool quick = false;            // the sweep ran the preset's --quick grid
  std::string out_dir;           // the report's directory
};

/// A preset's report: its name (as recorded in sweep.json) and the function computing its sections. Never throws
/// for missing or bad data: what cannot be computed is said in the section.
struct PresetReport {
  static constexpr const char* kind = "preset";
  std::string name;
  int order = 0;
  std::function<std::vector<PresetSection>(const PresetInput&)> sections;
};

/// How a preset names its lines (figure lines, table rows, the subjects of its sentences): the name it gives a line
/// (its scaling, say), then "key=value" for each setting in which the comparison's arms differ beyond the ones the
/// preset shows otherwise (`shown`: the settings its panels, x axes and names stand for, e.g. {"d_k", "scale", "lr"}).
/// Flags add settings to a preset's grid (--grid n_layers=1,2, --arms with two lrs): without these extras, the runs
/// of each value would be drawn as lines of one name, and a sentence could set one against the other as if they were
/// the same line.
class LineLabels {
 public:
  /// `c`'s arms decide which settings differ (settings_differing, in its order).
  LineLabels(const Comparison& c, const std::vector<std::string>& shown);
  /// "lr=0.003 n_layers=1": the values, in `settings` (arm_settings of a run's config.json, or ArmStats::settings), of
  /// the differing settings beyond `shown`; "" when the arms differ in nothing else. Lines with equal extras differ
  /// only in shown settings: the ones a preset may set against each other.
  std::string extras(const nlohmann::json& settings) const;
  /// `name`, then extras(settings) after a space when there are any: "sqrt_dk lr=0.003 n_layers=1".
  std::string operator()(const std::string& name, const nlohmann::json& settings) const;
  /// The differing settings beyond `shown`, in settings_differing's order.
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
};

/// `items` in groups of equal `key(item)`: (key, its items), the groups in order of first appearance, each in `items`'
/// order. How a preset gathers arms (by pointer) into its panels and lines.
template <class T, class Key>
auto group_by(const std::vector<T>& items, Key key) {
  std::vector<std::pair<std::decay_t<decltype(key(items.front()))>, std::vector<T>>> groups;
  for (const T& item : items) {
    auto k = key(item);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == k; });
    if (g == groups.end()) g = groups.insert(groups.end(), {std::move(k), {}});
    g->second.push_back(item);
  }
  return groups;
}

/// Pointers to `c`'s arms, in their order: what group_by gathers.
std::vector<const ArmStats*> arm_pointers(const Comparison& c);

/// "a", "a and b", "a, b and c"; "" for none.
std::string join_and(const std::vector<std::string>& items);

/// text("presets", key, fields): the template `key` of report/text/presets.md, its `{name}` fields (fmt syntax:
/// "{m:g}") filled from `fields`. Throws std::out_of_range naming `key` when the file has no such line.
std::string preset_text(const std::string& key, const Fields& fields = {});

/// The preset a sweep directory ran: sweep.json's "preset" {"name", "quick"}; name "" when the directory has no
/// sweep.json or it records no preset (a plain `xgrad sweep`). A record of another form ({"name": 123}, "quick":
/// "yes", null) names no preset and says what is wrong in `problem`.
struct PresetRecord {
  std::string name;
  bool quick = false;
  std::string problem;  // "" when the record is absent or well formed
  /// "length --quick", "dk"; "" for no preset.
  std::string text() const { return name.empty() ? "" : name + (quick ? " --quick" : ""); }
};
PresetRecord read_preset_record(const std::string& sweep_dir);

}  // namespace xgrad::report
