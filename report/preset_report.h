// The report half of an experiment preset (`xgrad experiment --preset NAME`): the sections and figures it adds to
// report.md, in the report library so that `xgrad compare DIR` on its sweep directory (sweep.json records the preset)
// writes them again. Each preset is one file, report/presets/NAME.cpp (CMake picks up every .cpp there), that
// registers a PresetReport in a namespace of its own (the library is a unity build):
//
//   const Registration<PresetReport> reg{PresetReport{"my_preset", 50, [](const PresetInput& in) {
//     PresetSection s{"my-preset", "My question", "", {}};  // figures from in.comparison, lines named by LineLabels;
//     return std::vector<PresetSection>{s};                  // sentences say "not decided" where the seeds disagree
//   }}};
//
// Its grid is cli/presets/NAME.cpp (cli/presets/preset.h).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/registry.h"
#include "report/claims.h"
#include "report/stats.h"
#include "report/summary.h"
#include "report/tables.h"
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

/// safe_file_stem(name), numbered "-2", "-3", ... apart from the stems in `taken`, to which it is added.
std::string unique_stem(std::set<std::string>& taken, const std::string& name);

/// The mean largest attention logit of `runs` at each logged step that exactly `n` of them measured.
std::vector<SummaryPoint> logit_points(const Comparison& c, const std::vector<std::size_t>& runs, std::size_t n);

/// `o` as part of a template's key: "better", "not_decided".
std::string outcome_key(Outcome o);

/// Outcomes counted: of the cells a question is asked in (add), or of one verdict's seeds (Tally(v)).
struct Tally {
  std::size_t better = 0, worse = 0, same = 0, not_decided = 0;
  Tally() = default;
  explicit Tally(const Verdict& v) : better(v.seeds_better), worse(v.seeds_worse), same(v.seeds_same) {}
  void add(Outcome o);
  std::size_t n() const { return better + worse + same + not_decided; }
  /// "better", "worse" or "same" when all are, "none" when there are none, else "mixed": the part of a template's key.
  std::string agreement() const;
  /// `more` and the fields better, worse, same, not_decided and n.
  Fields fields(Fields more = {}) const;
};

/// One point of a preset's figure, on the line `label` drawn in `scale`'s colour; a point whose x is NaN only names
/// its line (drawn empty: nothing measured there).
struct LinePoint {
  std::string label, scale;
  SummaryPoint point;
};

/// The figure `name` titled, captioned and labelled by presets.md's "KEY.title", ".caption", ".x", ".y" (filled in
/// with `fields`), a line per label of `points` (in order of first appearance), each line's points ordered by x:
/// every preset figure is "a statistic against an axis, a line per scaling".
SummaryFigure lines_figure(const std::string& name, const std::string& key, Axis x, Axis y,
                           const std::vector<LinePoint>& points, const Fields& fields = {});

/// `points` appended to `out` as the line `label` in `scale`'s colour (named alone when there are none).
void add_line(std::vector<LinePoint>& out, const std::string& label, const std::string& scale,
              const std::vector<SummaryPoint>& points);

/// A table headed by text_cells("presets", key), its cells and header shown as text (plain_cells).
Table preset_table(const std::string& key);

/// The section `anchor` titled by presets.md's "ANCHOR.title", its body `markdown`.
PresetSection preset_section(const std::string& anchor, std::string markdown = "");

/// `v` through fmt's `spec` ("{:.3g}"), "—" when it is not finite.
std::string number_or_dash(double v, const char* spec);

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
