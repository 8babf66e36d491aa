#include "report/runs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/escape.h"
#include "common/registry.h"
#include "common/whole_number.h"
#include "report/stats.h"
#include "train/config.h"
#include "train/json_file.h"
#include "train/metrics_log.h"
#include "train/run_directory.h"
#include "train/run_files.h"
#include "train/settings.h"
#include "train/sweep_manifest.h"

namespace xgrad::report {
using train::kConfigFile;

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

namespace columns = train::metrics_columns;

bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kConfigFile, ec) && fs::is_regular_file(dir / train::kMetricsFile, ec);
}

// One input's search by find_run_dirs.
struct Search {
  const RunSearch& bounds;
  std::string command, input;
  std::size_t entries = 0, allowance = 0;
  bool sweep_given = false, cut = false;  // the input is a sweep; the search below it stopped at the bound
  std::set<fs::path> listed = {};         // the run directories of the sweeps met: neither listed nor counted
  std::vector<std::string> found = {}, unlisted = {}, refused = {};
};

// The runs `dir`'s sweep.json lists (none when no entry reads: searched as any directory's); a FIFO is refused.
std::optional<std::vector<fs::path>> listed_runs(Search& s, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "sweep.json", ec)) return std::nullopt;
  if (!fs::is_regular_file(dir / "sweep.json", ec))
    throw std::invalid_argument(s.command + ": " + (dir / "sweep.json").string() +
                                " is not a regular file (a FIFO, device or directory); it is read as the sweep's "
                                "index: remove it, or give the run directories below it");
  try {
    const train::ManifestEntries entries = train::read_manifest_entries(dir.string());
    if (entries.points.empty()) return std::nullopt;
    std::vector<fs::path> runs;
    for (const train::ManifestPoint& p : entries.points) runs.push_back(fs::path(p.dir).lexically_normal());
    s.refused.insert(s.refused.end(), entries.refused.begin(), entries.refused.end());
    return runs;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Adds the runs at and below `dir`: not below a run, a sweep's listed runs as they are, a link followed to a run only.
void search_below(Search& s, const fs::path& dir, std::size_t depth, bool in_sweep, bool descend) {
  if (is_run_dir(dir)) return (in_sweep ? s.unlisted : s.found).push_back(dir.string());
  if (!descend) return;
  if (const auto listed = listed_runs(s, dir)) {
    for (const fs::path& run : *listed)
      // A sweep inside a sweep (copied in) lists runs that are not the outer sweep's.
      if (s.listed.insert(run).second && is_run_dir(run)) (in_sweep ? s.unlisted : s.found).push_back(run.string());
    s.allowance += 2 * listed->size();  // the points' run directories and configs/ files
    s.sweep_given = s.sweep_given || depth == 0;
    in_sweep = true;
  }
  if (depth >= s.bounds.max_depth) return;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && !s.cut && it != end; it.increment(ec)) {
    // Below a sweep given, whose runs are known, only the search for others stops at the bound.
    s.cut = ++s.entries > s.bounds.max_entries + s.allowance && s.sweep_given;
    if (!s.cut && s.entries > s.bounds.max_entries + s.allowance)
      throw std::invalid_argument(fmt::format(
          "{}: {} holds more than {} files and directories within {} levels below it, where runs are looked for; "
          "give the run or sweep directories themselves",
          s.command, s.input, s.bounds.max_entries, s.bounds.max_depth));
    std::error_code type_ec;
    const fs::path path = it->path().lexically_normal();
    if (!s.cut && it->is_directory(type_ec) && !s.listed.count(path))
      search_below(s, path, depth + 1, in_sweep, !it->is_symlink(type_ec));
  }
}

// sqrt(sum of squares) of the selected cells; NaN if any is NaN (an unmeasured step is not a zero gradient).
double combined_norm(const std::vector<double>& cells, const std::vector<std::size_t>& idx) {
  if (idx.empty()) return kNaN;
  double s = 0;
  for (auto i : idx) s += cells[i] * cells[i];
  if (!std::isinf(s)) return std::sqrt(s);
  s = 0;  // the squares of norms above 1e154 overflow, where hypot does not
  for (auto i : idx) s = std::hypot(s, cells[i]);
  return s;
}

// The finite selected cells' mean and largest (heads without a selected query hold nan); NaN when none is finite.
MeanSd finite_cells(const std::vector<double>& cells, const std::vector<std::size_t>& idx) {
  std::vector<double> selected;
  for (auto i : idx) selected.push_back(cells[i]);
  return mean_sd(selected);
}

nlohmann::json read_json(const fs::path& path) {
  try {
    return train::read_json_file(path, train::kMaxRunJsonBytes);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON: " + e.what());
  }
}

// -1 (unknown) for a step cell a cast to long would make undefined behaviour (a damaged metrics.csv).
long step_number(double cell) {
  return std::isfinite(cell) && cell >= 0 && cell < 9.0e18 ? static_cast<long>(cell) : -1;
}

void add_reason(RunRecord& run, const std::string& reason) {
  run.incomplete = true;
  if (!run.incomplete_reason.empty()) run.incomplete_reason += "; ";
  run.incomplete_reason += reason;
}

constexpr std::size_t kAbsent = std::numeric_limits<std::size_t>::max();

// What a trainer can write in a column compare reads ('*': any text), checked where a row is read: a value outside
// is a damaged row. A NaN is an unmeasured cell (attention statistics between logged steps; a loss not finite is
// dropped_from's to judge); a gradient norm not finite only where a loss may be NaN (a skipped or diverged step).
enum class NanCell { always, where_loss_may_be };
struct CellRange {
  const char* pattern;
  double lo, hi;
  NanCell nan;
};
// -1e-6: a float softmax can leave a probability an ulp (1.2e-7) above 1, whose -p log p term is below 0. 45: the
// entropy over T keys is at most log T, and log 2^64 = 44.4 bounds any T an index counts. 9e18: step_number's bound.
constexpr CellRange kCellRanges[] = {
    {"step", 0, 9.0e18, NanCell::always},
    {"loss", 0, std::numeric_limits<double>::infinity(), NanCell::always},  // a cross-entropy: >= 0
    {"accuracy", 0, 1, NanCell::always},
    {"grad_norm*", 0, std::numeric_limits<double>::max(), NanCell::where_loss_may_be},
    {"attn/l*/entropy_mean", -1e-6, 45, NanCell::always},
    {"attn/l*/frac_max_prob_gt_0.99", 0, 1, NanCell::always},
};

bool matches(const std::string& column, const std::string& pattern) {
  const std::size_t star = pattern.find('*');
  if (star == std::string::npos) return column == pattern;
  const std::size_t tail = pattern.size() - star - 1;
  return column.size() >= pattern.size() - 1 && column.compare(0, star, pattern, 0, star) == 0 &&
         column.compare(column.size() - tail, tail, pattern, star + 1, tail) == 0;
}

// Where the columns compare reads are in a metrics.csv header (kAbsent: not there).
struct SeriesColumns {
  std::size_t step = kAbsent, loss = kAbsent, accuracy = kAbsent, grad_norm = kAbsent, eval_loss = kAbsent;
  std::vector<std::size_t> wq, wk, entropy, score_std, score_grad_median, saturated, max_logit;
  std::vector<std::pair<std::size_t, const CellRange*>> ranged;  // the columns read that kCellRanges declares
  bool max_logit_from_score_max_abs = false;
};

// attn/l<any layer>h<any head>/<the field's column>
bool any_head(const std::string& c, double nn::AttentionStats::*field) {
  const std::string suffix = "/" + columns::attention_stat_name(field);
  return c.rfind("attn/l", 0) == 0 && c.size() > suffix.size() &&
         c.compare(c.size() - suffix.size(), suffix.size(), suffix) == 0;
}

SeriesColumns series_columns(const std::vector<std::string>& header, const fs::path& path) {
  // A column named twice would be read from its last copy, silently: the trainer wrote no such file.
  std::set<std::string> seen;
  for (const auto& c : header)
    if (!seen.insert(c).second)
      throw std::runtime_error(path.string() + " names column '" + escape_control(c) + "' twice");
  using S = nn::AttentionStats;
  const auto first_layer = [](const std::string& c, double S::*field) {
    return columns::is_attention(c, 0, columns::attention_stat_name(field));
  };
  SeriesColumns k;
  std::vector<std::size_t> max_abs;
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string& c = header[i];
    const std::string grad_norm_of = columns::grad_norm_parameter(c);
    if (c == columns::kStep) k.step = i;
    if (c == columns::kLoss) k.loss = i;
    if (c == columns::kAccuracy) k.accuracy = i;
    if (c == columns::kGradNorm) k.grad_norm = i;
    if (c == columns::kEvalLoss) k.eval_loss = i;
    if (columns::is_query_weight(grad_norm_of)) k.wq.push_back(i);
    if (columns::is_key_weight(grad_norm_of)) k.wk.push_back(i);
    if (first_layer(c, &S::entropy_mean)) k.entropy.push_back(i);
    if (first_layer(c, &S::score_std)) k.score_std.push_back(i);
    if (first_layer(c, &S::score_grad_median)) k.score_grad_median.push_back(i);
    if (first_layer(c, &S::frac_max_prob_above_099)) k.saturated.push_back(i);
    if (any_head(c, &S::max_logit)) k.max_logit.push_back(i);
    if (any_head(c, &S::score_max_abs)) max_abs.push_back(i);
  }
  // A run of an earlier release has no max_logit: its largest |score| stands in (report.html's notes count them).
  k.max_logit_from_score_max_abs = k.max_logit.empty() && !max_abs.empty();
  if (k.max_logit_from_score_max_abs) k.max_logit = max_abs;
  std::vector<std::size_t> read{k.step, k.loss, k.accuracy, k.grad_norm};
  for (const auto* v : {&k.wq, &k.wk, &k.entropy, &k.saturated}) read.insert(read.end(), v->begin(), v->end());
  for (std::size_t i : read)
    for (const CellRange& range : kCellRanges)
      if (i != kAbsent && matches(header[i], range.pattern)) k.ranged.emplace_back(i, &range);
  if (k.loss == kAbsent) throw std::runtime_error(path.string() + " has no 'loss' column");
  return k;
}

// The first cell of the row outside its column's kCellRanges, named; "" when none (a cell of text is a gap).
std::string out_of_range(const train::MetricsReader& reader, const SeriesColumns& k, bool nan_allowed) {
  for (const auto& [i, range] : k.ranged) {
    const double v = reader.cells()[i];
    const bool unmeasured = (std::isnan(v) && range->nan == NanCell::always) ||
                            (!std::isfinite(v) && range->nan == NanCell::where_loss_may_be && nan_allowed);
    if (!(v >= range->lo && v <= range->hi) && !unmeasured && !reader.malformed(i))
      return fmt::format("'{}' is {}, outside [{:g}, {:g}]", escape_control(reader.columns()[i]), v, range->lo,
                         range->hi);
  }
  return "";
}

// A row the trainer does not write drops the rest, with a reason: a step that does not increase, a cell outside its
// column's range (`range`), or a loss not finite where none may be (nan_allowed: summary.json's divergence, --on-nan
// skip).
bool dropped_from(RunRecord& run, std::size_t row, double step, double loss, bool nan_allowed, std::string range) {
  const double previous = run.series.size() > 0 ? run.series.step.back() : kNaN;
  const std::string why = step <= previous ? fmt::format("step {} after step {}", step, previous)
                          : !range.empty() ? range
                          : std::isfinite(loss) || nan_allowed
                              ? ""
                              : fmt::format("loss {}, but summary.json says the run did not diverge", loss);
  if (!why.empty())
    add_reason(run, fmt::format("metrics.csv row {}: {} (this row and any after it dropped)", row, why));
  return !why.empty();
}

// Streams metrics.csv and keeps only the series compare uses.
void read_series(const fs::path& path, RunRecord& run, bool skipped_steps) {
  train::MetricsReader reader(path.string());
  const SeriesColumns k = series_columns(reader.columns(), path);
  run.has_w_q = !k.wq.empty();
  run.has_w_k = !k.wk.empty();
  run.max_logit_from_score_max_abs = k.max_logit_from_score_max_abs;

  RunSeries& s = run.series;
  const auto on_nan = run.config.find("on_nan");
  const bool skips = on_nan != run.config.end() && on_nan->is_string() &&
                     on_nan->get<std::string>() == enum_name(train::kOnNanNames, train::OnNan::skip);
  // Else summary.json says none happened; skipped steps count too, for a run resumed under another --on-nan.
  const bool nan_allowed = skips || skipped_steps || !run.has_summary || run.diverged;
  bool last_row_nonfinite = false;  // its loss or gradient norm written nan or inf (text or an empty cell is damage)
  std::string first_bad_cell;       // where text stands in place of a number, the first time
  std::size_t bad_cells = 0;
  while (reader.next()) {
    const std::vector<double>& cells = reader.cells();
    const double step = k.step == kAbsent ? static_cast<double>(s.step.size()) : cells[k.step];
    if (dropped_from(run, reader.rows(), step, cells[k.loss], nan_allowed || reader.malformed(k.loss),
                     out_of_range(reader, k, nan_allowed)))
      break;
    if (first_bad_cell.empty()) first_bad_cell = reader.row_error();
    if (!reader.row_error().empty()) bad_cells += reader.malformed_cells();
    s.step.push_back(step);
    s.loss.push_back(cells[k.loss]);
    s.accuracy.push_back(k.accuracy == kAbsent ? kNaN : cells[k.accuracy]);
    s.grad_norm.push_back(k.grad_norm == kAbsent ? 0.0 : cells[k.grad_norm]);
    s.grad_norm_w_q.push_back(combined_norm(cells, k.wq));
    s.grad_norm_w_k.push_back(combined_norm(cells, k.wk));
    s.entropy.push_back(finite_cells(cells, k.entropy).mean);
    s.score_std.push_back(finite_cells(cells, k.score_std).mean);
    s.score_grad_median.push_back(finite_cells(cells, k.score_grad_median).mean);
    s.saturated.push_back(finite_cells(cells, k.saturated).mean);
    s.max_logit.push_back(finite_cells(cells, k.max_logit).max);
    s.eval_loss.push_back(k.eval_loss == kAbsent ? kNaN : cells[k.eval_loss]);
    run.gradients.add(cells[k.loss], s.grad_norm.back(), s.grad_norm_w_q.back(), s.grad_norm_w_k.back());
    last_row_nonfinite = false;
    for (const std::size_t i : {k.loss, k.grad_norm})
      if (i != kAbsent && !std::isfinite(cells[i]) && !reader.malformed(i) && !reader.empty(i))
        last_row_nonfinite = true;
  }
  // Text where a number belongs is drawn as a gap (report.html counts such cells); the terminal says where it is.
  if (!first_bad_cell.empty())
    spdlog::warn("compare: {}{}; drawn as a gap", first_bad_cell,
                 bad_cells > 1 ? " (the first of " + std::to_string(bad_cells) + " such cells)" : std::string());
  if (reader.cut())
    add_reason(run, reader.row_error().empty()
                        ? "metrics.csv row " + std::to_string(reader.rows()) + " cut short (dropped)"
                        : reader.row_error() + " (this row and any after it dropped)");
  // Without summary.json, a non-finite last row is where --on-nan stop ended the run: under stop no row follows a
  // non-finite step, so one with rows after it was skipped (under skip, perhaps before a resume under stop).
  if (!run.has_summary && !skips && s.size() > 0 && last_row_nonfinite) {
    run.diverged = true;
    run.diverged_step = step_number(s.step.back());
  }
}

// A refused value ("on_nan": "bogus") would stand for a setting nobody trained; a component's name: only its form.
void check_declared_values(const nlohmann::json& config, const fs::path& file) {
  for (const auto& [key, value] : config.items()) {
    if (train::find_component(key) && !(value.is_string() && is_entry_name(value.get<std::string>())))
      throw std::runtime_error(file.string() + ": '" + key +
                               "' must be an entry name (a-z, 0-9 and '_', starting with a letter), got " +
                               shortened_name(value.dump()));
    const Setting* declared = train::find_setting(key);
    if (!declared || train::find_component(key) || train::is_record_key(key)) continue;
    const std::string error = check_setting_value(*declared, whole_setting_value(*declared, value));
    if (!error.empty()) throw std::runtime_error(file.string() + ": '" + key + "' " + error);
  }
}

// A core setting of a later release at its default, as the run trained, so that two releases' runs form one arm.
void fill_missing_settings(nlohmann::json& config) {
  static const nlohmann::json written = train::TrainConfig().to_json();  // as config.json holds the defaults
  for (const train::CoreSetting& core : train::core_settings()) {
    const Setting& s = core.setting;
    const auto at_default = written.find(s.key);
    if (config.contains(s.key) || at_default == written.end() || *at_default != s.default_value ||
        train::is_record_key(s.key) || train::find_component(s.key))
      continue;
    config[s.key] = s.default_value;
  }
}

}  // namespace

FoundRuns find_run_dirs(const std::vector<std::string>& inputs, const RunSearch& search, const std::string& command) {
  FoundRuns runs;
  std::set<std::string> seen;  // canonical paths: a run given twice (itself and in its sweep) is read once
  const auto add = [&seen](std::vector<std::string>& to, const std::string& dir) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(dir, ec);
    if (seen.insert(ec ? dir : canonical.string()).second) to.push_back(dir);
  };
  for (const auto& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) throw std::invalid_argument(command + ": " + input + " is not a directory");
    Search s{search, command, input};
    search_below(s, fs::path(input).lexically_normal(), 0, false, true);
    if (s.found.empty() && (s.unlisted.empty() || !search.include_unlisted))
      throw std::invalid_argument(fmt::format(
          "{}: {} holds no run{} within {} levels below it (no directory with config.json and metrics.csv); give "
          "the run or sweep directories themselves",
          command, input, s.unlisted.empty() ? "" : " its sweep.json lists (--include-unlisted reads the others)",
          search.max_depth));
    for (const std::string& dir : s.found) add(runs.dirs, dir);
    for (const std::string& dir : s.unlisted) add(runs.unlisted, dir);
    runs.refused.insert(runs.refused.end(), s.refused.begin(), s.refused.end());
    runs.search_cut = runs.search_cut || s.cut;
  }
  if (search.include_unlisted) runs.dirs.insert(runs.dirs.end(), runs.unlisted.begin(), runs.unlisted.end());
  std::sort(runs.dirs.begin(), runs.dirs.end());
  std::sort(runs.unlisted.begin(), runs.unlisted.end());
  return runs;
}

RunRecord load_run(const std::string& dir) {
  const fs::path path(dir);
  RunRecord run;
  run.dir = dir;
  run.config = read_json(path / kConfigFile);
  if (!run.config.is_object()) throw std::runtime_error((path / kConfigFile).string() + " is not a JSON object");
  // Through the same definitions the trainer writes with: a run of an older release is read in today's form.
  run.config = train::canonical_config_json(run.config, (path / kConfigFile).string());
  check_declared_values(run.config, path / kConfigFile);
  fill_missing_settings(run.config);
  const auto steps = run.config.find("steps");
  if (steps != run.config.end() && steps->is_number_unsigned()) run.steps_planned = steps->get<std::size_t>();

  std::size_t steps_done = 0, skipped_steps = 0;
  std::error_code ec;
  if (fs::is_regular_file(path / train::kSummaryFile, ec)) {
    try {
      const train::RunSummary summary = train::RunSummary::read(path);
      run.has_summary = true;
      run.diverged = summary.diverged;
      run.diverged_step = summary.diverged_step;
      steps_done = summary.steps_done;
      skipped_steps = summary.skipped_steps;
      run.length_eval = summary.length_eval;
    } catch (const std::exception& e) {
      add_reason(run, e.what());
    }
  } else {
    // A run another process is training (its lock is held) is not a run that stopped: the report says which.
    const std::string holder = train::run_lock_holder(path);
    add_reason(run, holder.empty() ? std::string("no summary.json") : "still running (pid " + holder + ")");
  }
  read_series(path / train::kMetricsFile, run, skipped_steps > 0);

  const std::size_t rows = run.series.size();
  const std::size_t expected = run.has_summary ? steps_done : run.steps_planned;
  if (!run.diverged && rows < expected)
    add_reason(run, std::to_string(rows) + " of " + std::to_string(expected) + " steps in metrics.csv");
  // A finite loss that blew up (loss_blew_up) diverged at the first step past the factor, as a NaN would.
  const RunSeries& s = run.series;
  if (!run.diverged && rows > 0) {
    std::vector<double> tail;  // the last 20 finite losses (all, when fewer)
    for (std::size_t i = rows; i-- > 0 && tail.size() < 20;)
      if (std::isfinite(s.loss[i])) tail.push_back(s.loss[i]);
    const double final_loss = mean_sd(tail).mean;
    if (train::loss_blew_up(s.loss.front(), final_loss)) {
      run.diverged = true;
      run.diverged_step = step_number(s.step.back());
      for (std::size_t i = 0; i < rows; ++i)
        if (train::loss_blew_up(s.loss.front(), s.loss[i])) {
          run.diverged_step = step_number(s.step[i]);
          break;
        }
    }
  }
  return run;
}

}  // namespace xgrad::report
