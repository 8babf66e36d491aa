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

/// One section of report.md written by a preset: a level-2 heading with an anchor, its figures (drawn and tabulated
/// like the summary figures), then its markdown body, every sentence computed from the numbers.
struct PresetSection {
  std::string anchor;                  // id for links, e.g. "lr-final-loss"; unique within the report
  std::string title;                   // the heading's text
  std::string markdown;                // the body: sentences, tables (Table::markdown()), lists
  std::vector<SummaryFigure> figures;  // a name made from the runs' data through safe_file_stem (common/file_name.h)
};

/// What a preset's sections are computed from.
struct PresetInput {
  const Comparison& comparison;  // every run read (runs, per-run stats, arms over seeds, lr groups)
  bool quick = false;            // the sweep ran the preset's --quick grid
  std::string out_dir;           // the report's directory
};

/// A preset's report: its name (as sweep.json records it) and the function computing its sections, which says in
/// them what cannot be computed rather than throwing.
struct PresetReport {
  static constexpr const char* kind = "preset";
  std::string name;
  int order = 0;
  std::function<std::vector<PresetSection>(const PresetInput&)> sections;
};

/// How a preset names its lines (figure lines, table rows, its sentences' subjects): its name for a line, then
/// "key=value" for each setting the arms differ in beyond `shown` (those its panels, axes and names stand for): a flag
/// that adds a setting to the grid (--grid n_layers=1,2) must not draw the runs of two values as one line.
class LineLabels {
 public:
  /// `c`'s arms decide which settings differ (settings_differing, in its order).
  LineLabels(const Comparison& c, const std::vector<std::string>& shown);
  /// "lr=0.003 n_layers=1": the values in `settings` (arm_settings) of the differing settings beyond `shown`; "" for
  /// none. Lines with equal extras differ only in shown settings: the ones a preset may set against each other.
  std::string extras(const nlohmann::json& settings) const;
  /// `name`, then extras(settings) after a space when there are any: "sqrt_dk lr=0.003 n_layers=1".
  std::string operator()(const std::string& name, const nlohmann::json& settings) const;
  /// The differing settings beyond `shown`, in settings_differing's order.
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
};

/// `items` in groups of equal `key(item)`: (key, its items), in order of first appearance (group_indices' order).
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

/// text("presets", key, fields): the template `key` of report/text/presets.md filled in.
std::string preset_text(const std::string& key, const Fields& fields = {});

/// The preset a sweep directory ran: sweep.json's "preset" {"name", "quick"}; name "" for none (a plain `xgrad
/// sweep`). A record of another form names no preset and says what is wrong in `problem`.
struct PresetRecord {
  std::string name;
  bool quick = false;
  std::string problem;  // "" when the record is absent or well formed
  /// "length --quick", "dk"; "" for no preset.
  std::string text() const { return name.empty() ? "" : name + (quick ? " --quick" : ""); }
};
PresetRecord read_preset_record(const std::string& sweep_dir);

}  // namespace xgrad::report
