#include "report/html.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "platform/atomic_file.h"
#include "report/picture.h"
#include "report/standalone_page.h"
#include "report/summary.h"
#include "report/tables.h"
#include "report/web_assets.h"
#include "train/metrics_log.h"
#include "train/run_files.h"

namespace xgrad::report {

namespace fs = std::filesystem;

MinMaxDownsampler::MinMaxDownsampler(std::size_t n, std::size_t max_points) {
  max_points = std::max<std::size_t>(max_points, 4);
  if (n > max_points) {
    const std::size_t buckets = max_points / 2;
    width_ = (n + buckets - 1) / buckets;
    out_.downsampled = width_ > 1;
  }
  out_.x.reserve(std::min(n, max_points));
  out_.y.reserve(std::min(n, max_points));
}

void MinMaxDownsampler::add(double x, double y) {
  if (width_ == 1) {
    out_.x.push_back(x);
    out_.y.push_back(y);
    return;
  }
  if (in_bucket_ == 0) {
    first_x_ = x;
    any_finite_ = false;
  }
  last_x_ = x;
  if (std::isfinite(y)) {
    if (!any_finite_ || y < min_y_) min_y_ = y, min_at_ = in_bucket_;
    if (!any_finite_ || y > max_y_) max_y_ = y, max_at_ = in_bucket_;
    any_finite_ = true;
  }
  if (++in_bucket_ == width_) flush();
}

void MinMaxDownsampler::flush() {
  if (in_bucket_ == 0) return;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double first = !any_finite_ ? nan : (min_at_ <= max_at_ ? min_y_ : max_y_);
  const double second = !any_finite_ ? nan : (min_at_ <= max_at_ ? max_y_ : min_y_);
  out_.x.push_back(first_x_);
  out_.y.push_back(first);
  if (in_bucket_ > 1) {
    out_.x.push_back(last_x_);
    out_.y.push_back(second);
  }
  in_bucket_ = 0;
}

DownsampledSeries MinMaxDownsampler::finish() {
  flush();
  return std::move(out_);
}

DownsampledSeries downsample_min_max(const std::vector<double>& x, const std::vector<double>& y,
                                     std::size_t max_points) {
  if (x.size() != y.size())
    throw std::invalid_argument(fmt::format("downsample_min_max: x has {} points, y {}", x.size(), y.size()));
  MinMaxDownsampler d(x.size(), max_points);
  for (std::size_t i = 0; i < x.size(); ++i) d.add(x[i], y[i]);
  return d.finish();
}

namespace {

// A number as short JSON: null for NaN/Inf, integers exactly, others to `digits` significant digits in the shorter
// of plain and exponent notation, without zero padding ("1.235e-5", not "0.00001235" or "1.235e-05").
std::string json_number(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  // The shortest exponent form: mantissa without trailing zeros, exponent without sign padding or leading zeros.
  std::string e = fmt::format("{:.{}e}", v, digits - 1);
  const auto at = e.find('e');
  std::string mantissa = e.substr(0, at), exponent = e.substr(at + 1);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  const bool negative = exponent[0] == '-';
  exponent = exponent.substr(exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
  while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
  const std::string exp_form = exponent == "0" ? mantissa : mantissa + "e" + (negative ? "-" : "") + exponent;
  // The plain form of the same rounded value ({:g} switches to exponents by its own rule, not by length).
  // strtod, not stod: stod throws out_of_range for a subnormal (1e-310), which is a number like any other here.
  const double rounded = std::strtod(e.c_str(), nullptr);
  const int magnitude = rounded == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(rounded))));
  const int decimals = std::max(0, digits - 1 - magnitude);
  std::string plain = fmt::format("{:.{}f}", rounded, decimals);
  if (plain.find('.') != std::string::npos) {
    while (plain.back() == '0') plain.pop_back();
    if (plain.back() == '.') plain.pop_back();
  }
  return plain.size() <= exp_form.size() ? plain : exp_form;
}

// A value for the final-metrics CSV: 9 significant digits (exact for the float32 the trainer computes in), "" for NaN.
std::string exact(double v) {
  if (std::isnan(v)) return "";
  return std::isfinite(v) ? fmt::format("{:.9g}", v) : fmt::format("{}", v);
}

// A run directory as the page names it: relative to the report's directory when below it.
std::string run_name(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  const fs::path rel = fs::relative(fs::path(dir), fs::path(out_dir), ec);
  const std::string r = ec ? std::string() : rel.generic_string();
  if (r.empty() || r == "." || r.rfind("..", 0) == 0) return fs::path(dir).lexically_normal().generic_string();
  return r;
}

// The settings a page can group by: the arm's settings, the seeds, and nothing else of config.json.
nlohmann::json group_settings(const nlohmann::json& config) {
  nlohmann::json s = arm_settings(config);
  for (const char* key : {"seed", "data_seed"})
    if (config.contains(key)) s[key] = config.at(key);
  return s;
}

// The columns a page shows first (its default panels) and people compare most: kept at the full point limit while
// the page's budget cuts the others.
bool headline_column(const std::string& c) {
  namespace mc = train::metrics_columns;
  const std::string parameter = mc::grad_norm_parameter(c);
  return c == mc::kLoss || c == mc::kAccuracy || c == mc::kGradNorm || c == mc::kEvalLoss ||
         mc::is_query_weight(parameter) || mc::is_key_weight(parameter) ||
         mc::is_attention(c, 0, "score_grad_median") ||
         mc::is_attention(c, 0, mc::attention_stat_name(&nn::AttentionStats::entropy_mean));
}

// One run's metrics.csv, reduced for the page.
struct RunPage {
  std::vector<std::string> columns;                    // as in the file, step excluded
  std::vector<std::vector<double>> grids;              // distinct x arrays, shared by the columns that have them
  std::vector<std::size_t> grid_of;                    // per column
  std::vector<std::vector<double>> ys;                 // per column
  std::vector<double> last_finite;                     // per column: its last finite value (NaN: none)
  std::vector<std::size_t> finite_count;               // per column
  std::vector<bool> downsampled;                       // per column
  std::vector<std::size_t> malformed_per_column;       // per column: cells that are not a number (empty ones are not)
  std::size_t rows = 0, nonfinite = 0, malformed = 0;  // malformed: every column's, summed
};

// Reads `dir`/metrics.csv twice (streaming: a long run is never held whole): once to count each column's finite
// cells, once to downsample. A column finite on at most half the rows (the attention and RMS columns, logged every
// --log-every steps) is drawn through its finite points only; the others on every row, with gaps at non-finite ones.
// Headline columns (headline_column) keep up to `headline_points` points, the others `max_points`.
RunPage read_run_page(const std::string& dir, std::size_t headline_points, std::size_t max_points) {
  const std::string path = (fs::path(dir) / train::kMetricsFile).string();
  RunPage page;
  std::size_t step_col = SIZE_MAX;
  {
    train::MetricsReader reader(path);
    const auto& header = reader.columns();
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == train::metrics_columns::kStep && step_col == SIZE_MAX)
        step_col = i;
      else
        page.columns.push_back(header[i]);
    }
    page.finite_count.assign(page.columns.size(), 0);
    std::vector<std::size_t> malformed(page.columns.size(), 0);
    while (reader.next()) {
      ++page.rows;
      std::size_t k = 0;
      for (std::size_t i = 0; i < reader.cells().size(); ++i) {
        if (i == step_col) continue;
        if (std::isfinite(reader.cells()[i])) ++page.finite_count[k];
        if (reader.malformed(i)) ++malformed[k];
        ++k;
      }
    }
    for (std::size_t k = 0; k < malformed.size(); ++k) page.malformed += malformed[k];
    page.malformed_per_column = std::move(malformed);
  }
  const std::size_t n_cols = page.columns.size();
  std::vector<bool> sparse(n_cols);
  std::vector<MinMaxDownsampler> samplers;
  samplers.reserve(n_cols);
  for (std::size_t k = 0; k < n_cols; ++k) {
    sparse[k] = 2 * page.finite_count[k] <= page.rows;
    samplers.emplace_back(sparse[k] ? page.finite_count[k] : page.rows,
                          headline_column(page.columns[k]) ? headline_points : max_points);
    // Text where a number belongs is counted apart (malformed), not as NaN or Inf.
    page.nonfinite += sparse[k] ? 0 : page.rows - page.finite_count[k] - page.malformed_per_column[k];
  }
  page.last_finite.assign(n_cols, std::numeric_limits<double>::quiet_NaN());
  {
    train::MetricsReader reader(path);
    std::size_t row = 0;
    while (reader.next() && row < page.rows) {
      const auto& cells = reader.cells();
      const double x = step_col == SIZE_MAX ? static_cast<double>(row) : cells[step_col];
      std::size_t k = 0;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        if (i == step_col) continue;
        const double y = cells[i];
        if (std::isfinite(y)) page.last_finite[k] = y;
        if (!sparse[k] || std::isfinite(y)) samplers[k].add(x, y);
        ++k;
      }
      ++row;
    }
  }
  std::map<std::vector<double>, std::size_t> grid_index;
  for (std::size_t k = 0; k < n_cols; ++k) {
    DownsampledSeries d = samplers[k].finish();
    page.downsampled.push_back(d.downsampled);
    auto [it, added] = grid_index.emplace(std::move(d.x), page.grids.size());
    if (added) page.grids.push_back(it->first);
    page.grid_of.push_back(it->second);
    page.ys.push_back(std::move(d.y));
  }
  return page;
}

std::string number_array(const std::vector<double>& v, int digits) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += json_number(v[i], digits);
  }
  return out + "]";
}

// A number for nlohmann, which writes NaN as null: rounded, so that a figure's points stay short.
// strtod, not stod, which throws out_of_range for a subnormal (1e-310).
double rounded(double v) { return std::isfinite(v) ? std::strtod(fmt::format("{:.6g}", v).c_str(), nullptr) : v; }

// "xgrad compare: <the report directory's name>": the page's title and heading.
std::string title_of(const ReportContext& context) {
  fs::path dir = fs::path(context.out_dir.empty() ? std::string(".") : context.out_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/" → "out"
  std::string name = dir.filename().string();
  if (name.empty() || name == ".") name = fs::absolute(dir).lexically_normal().filename().string();
  return "xgrad compare: " + name;
}

// report.md's summary figures (summary_figures) for the page to draw.
nlohmann::json summary_json(const std::vector<SummaryFigure>& figures) {
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::string> warnings;  // the figures report them
  for (const SummaryFigure& f : figures) {
    nlohmann::json lines = nlohmann::json::array();
    const std::vector<LineStyle> styles = summary_styles(f, warnings);
    for (std::size_t l = 0; l < f.lines.size(); ++l) {
      nlohmann::json points = nlohmann::json::array();
      for (const SummaryPoint& p : f.lines[l].points)
        points.push_back({rounded(p.x), rounded(p.y), rounded(p.lo), rounded(p.hi), p.n, p.n_diverged});
      lines.push_back({{"label", f.lines[l].label},
                       {"scale", f.lines[l].scale},
                       {"colour", styles[l].colour},
                       {"dash", styles[l].dash},
                       {"theory", f.lines[l].theory},
                       {"points", points}});
    }
    out.push_back({{"name", f.name},
                   {"title", f.title},
                   {"caption", f.caption},
                   {"x_label", f.x_label},
                   {"y_label", f.y_label},
                   {"log_x", f.log_x},
                   {"log_y", f.log_y},
                   {"lines", lines},
                   {"notes", f.notes}});
  }
  return out;
}

// Settings whose value is not the same in every run (what the page can group by), in the order report.md names an
// arm's settings (in_setting_order: d_k, scale, optimizer and lr early), the seeds last.
std::vector<std::string> varying_keys(const Comparison& c, const std::vector<nlohmann::json>& settings) {
  std::set<std::string> varying;
  if (settings.empty()) return {};
  for (const auto& run : settings)
    for (const nlohmann::json* s : {&run, &settings.front()})
      for (const auto& item : s->items())
        if (run.value(item.key(), nlohmann::json()) != settings.front().value(item.key(), nlohmann::json()))
          varying.insert(item.key());
  std::vector<std::string> keys = in_setting_order(c.arms, varying);
  for (const std::string k : {"seed", "data_seed"})
    if (varying.count(k)) keys.push_back(k);
  return keys;
}

// The runs as the page shows them: names relative to the output directory, settings, and which settings vary.
struct PageRuns {
  std::vector<std::string> names;
  std::vector<nlohmann::json> settings;
  std::vector<std::string> keys;                     // varying_keys
  nlohmann::json common = nlohmann::json::object();  // the settings every run shares, as text

  std::string setting(std::size_t r, const std::string& key, const std::string& absent) const {
    return settings[r].contains(key) ? setting_text(settings[r], key) : absent;
  }
};

PageRuns page_runs(const Comparison& c, const ReportContext& context) {
  PageRuns p;
  const std::size_t n = c.runs.size();
  const std::string out_dir = context.out_dir.empty() ? std::string(".") : context.out_dir;
  p.names.resize(n);
  p.settings.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    p.names[r] = run_name(c.runs[r].dir, out_dir);
    p.settings[r] = group_settings(c.runs[r].config);
  }
  p.keys = varying_keys(c, p.settings);
  if (n > 0)
    for (const auto& [key, value] : p.settings[0].items())
      if (std::find(p.keys.begin(), p.keys.end(), key) == p.keys.end())
        p.common[key] = setting_text(p.settings[0], key);
  return p;
}

// The settings the page groups by at first: those in which arms differ as report.md names them (settings_differing:
// an optimizer's own setting, beta1 or momentum, only where runs of one optimizer disagree on it), but the seeds.
std::vector<std::string> default_group_keys(const PageRuns& runs) {
  std::vector<const nlohmann::json*> settings;
  for (const auto& s : runs.settings) settings.push_back(&s);
  std::vector<std::string> keys = settings_differing(settings);
  const auto seed = [](const std::string& k) { return k == "seed" || k == "data_seed"; };
  keys.erase(std::remove_if(keys.begin(), keys.end(), seed), keys.end());
  return keys;
}

// The sweep's main axis, which the page's default view draws one panel per value of: of the settings it groups by
// but the scaling (the colour), the one with the most values, the first of them in the groups' order (d_k first);
// "" when none has 2 to kMaxFacets values.
constexpr std::size_t kMaxFacets = 12;
std::string main_axis(const PageRuns& runs, const std::vector<std::string>& group_keys) {
  std::string axis;
  std::size_t most = 1;
  for (const auto& k : group_keys) {
    std::set<std::string> values;
    for (std::size_t r = 0; r < runs.settings.size(); ++r) values.insert(runs.setting(r, k, "—"));
    if (k != "scale" && values.size() > most && values.size() <= kMaxFacets) axis = k, most = values.size();
  }
  return axis;
}

// Every run's metrics.csv read at the current point budget, and the union of their columns (first-seen order).
struct PageColumns {
  std::vector<RunPage> pages;
  std::vector<std::string> columns;
  std::vector<std::size_t> finite_anywhere;            // per column: finite values over all runs
  std::vector<std::vector<std::string>> missing_from;  // per column: runs without it
  bool headline_downsampled = false, other_downsampled = false;
  std::vector<std::string> shown, never_finite;  // columns with a finite value somewhere, and the others
};

PageColumns read_pages(const Comparison& c, const PageRuns& runs, std::size_t headline_points, std::size_t max_points) {
  PageColumns p;
  const std::size_t n = c.runs.size();
  std::map<std::string, std::size_t> column_index;
  p.pages.reserve(n);
  for (std::size_t r = 0; r < n; ++r) {
    p.pages.push_back(read_run_page(c.runs[r].dir, headline_points, max_points));
    const RunPage& page = p.pages.back();
    for (std::size_t k = 0; k < page.columns.size(); ++k) {
      if (!page.downsampled[k]) continue;
      (headline_column(page.columns[k]) ? p.headline_downsampled : p.other_downsampled) = true;
    }
    for (std::size_t k = 0; k < page.columns.size(); ++k) {
      auto [it, added] = column_index.emplace(page.columns[k], p.columns.size());
      if (added) {
        p.columns.push_back(page.columns[k]);
        p.finite_anywhere.push_back(0);
      }
      p.finite_anywhere[it->second] += page.finite_count[k];
    }
  }
  p.missing_from.assign(p.columns.size(), {});
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < p.columns.size(); ++j)
      if (std::find(p.pages[r].columns.begin(), p.pages[r].columns.end(), p.columns[j]) == p.pages[r].columns.end())
        p.missing_from[j].push_back(runs.names[r]);
  for (std::size_t j = 0; j < p.columns.size(); ++j)
    (p.finite_anywhere[j] == 0 ? p.never_finite : p.shown).push_back(p.columns[j]);
  return p;
}

// What columns only the runs outside `without` have belong to, when one setting tells those runs from the others:
// "the parameters of attention gated_attention" (a per-parameter column, as grad_norm/<parameter>: a layer's or a
// scaling's own parameters), else "those of ..."; "" when no setting does.
std::string columns_owner(const PageRuns& runs, const std::vector<std::string>& without,
                          const std::vector<std::string>& columns) {
  for (const std::string& key : runs.keys) {
    std::set<std::string> have, lack;
    for (std::size_t r = 0; r < runs.names.size(); ++r)
      (std::count(without.begin(), without.end(), runs.names[r]) ? lack : have).insert(runs.setting(r, key, "-"));
    if (have.size() != 1 || lack.count(*have.begin())) continue;
    const bool parameters = std::all_of(columns.begin(), columns.end(), [](const std::string& c) {  // not attn/...
      return c.find('/') != std::string::npos && c.rfind("attn/", 0) != 0;
    });
    return (parameters ? "the parameters of " : "those of ") + key + " " + *have.begin();
  }
  return "";
}

// The notes about what the data lacks, one line each with its runs or columns listed behind it: the sweeps' notes,
// unreadable runs, columns no run or only some runs have (a note per set of runs without them), empty runs, cells
// drawn as gaps, incomplete runs.
void data_notes(const Comparison& c, const ReportContext& context, const PageRuns& runs, const PageColumns& p,
                std::vector<Note>& notes) {
  const std::size_t n = c.runs.size();
  notes.insert(notes.end(), context.sweep_notes.begin(), context.sweep_notes.end());
  const auto add = [&notes](const std::string& text, const std::vector<std::string>& items) {
    if (!items.empty()) notes.push_back({text, items});
  };
  add(fmt::format("{} run(s) left out (unreadable)", context.skipped.size()), context.skipped);
  add(fmt::format("{} column(s) left out of the column picker (no finite value in any run)", p.never_finite.size()),
      p.never_finite);
  std::map<std::vector<std::string>, std::vector<std::string>> partial;  // runs without them -> columns
  for (std::size_t j = 0; j < p.columns.size(); ++j)
    if (!p.missing_from[j].empty() && p.finite_anywhere[j] > 0) partial[p.missing_from[j]].push_back(p.columns[j]);
  for (auto& [without, columns] : partial) {
    const std::string owner = columns_owner(runs, without, columns), k = std::to_string(columns.size());
    columns.push_back("not in:");
    for (const std::string& run : without) columns.back() += " " + run;
    add(fmt::format("{} column{} only in {} of {} runs{}", k, k == "1" ? " exists" : "s exist", n - without.size(), n,
                    owner.empty() ? "" : ": " + owner),
        columns);
  }
  std::vector<std::string> empty_runs, nonfinite_runs, malformed_runs, incomplete;
  std::size_t nonfinite_total = 0, malformed_total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (p.pages[r].rows == 0) empty_runs.push_back(runs.names[r]);
    if (p.pages[r].nonfinite > 0) nonfinite_runs.push_back(runs.names[r]), nonfinite_total += p.pages[r].nonfinite;
    if (p.pages[r].malformed > 0) malformed_runs.push_back(runs.names[r]), malformed_total += p.pages[r].malformed;
    if (c.runs[r].incomplete) incomplete.push_back(runs.names[r] + " (" + c.runs[r].incomplete_reason + ")");
  }
  add(fmt::format("{} run(s) have no rows in metrics.csv (no curve)", empty_runs.size()), empty_runs);
  add(fmt::format("{} non-finite values (NaN or Inf) in {} run(s) are drawn as gaps", nonfinite_total,
                  nonfinite_runs.size()),
      nonfinite_runs);
  add(fmt::format("{} cells that are not numbers in {} run(s) are drawn as gaps", malformed_total,
                  malformed_runs.size()),
      malformed_runs);
  add(fmt::format("{} run(s) incomplete", incomplete.size()), incomplete);
}

// The notes about how the series were shortened and rounded.
void downsampling_notes(const PageColumns& p, std::size_t headline_points, std::size_t max_points, int digits,
                        std::vector<Note>& notes) {
  const std::string headline =
      "loss, accuracy, grad_norm, the W_q and W_k gradient norms and the first layer's entropy and score-gradient "
      "median";
  std::string budget;  // what the page's size took beyond the point limit
  if (!p.headline_downsampled)
    budget = " to keep the page small; every point of " + headline + " is shown";
  else if (max_points < headline_points)
    budget = fmt::format(", those of every column but {} to at most {} to keep the page small", headline, max_points);
  const std::size_t limit = p.headline_downsampled ? headline_points : max_points;
  if (p.headline_downsampled || p.other_downsampled)
    notes.push_back(
        {fmt::format("Downsampled: series longer than {} points are reduced to at most {} points by "
                     "min-max buckets (each keeps its smallest and largest value, so spikes survive){}; "
                     "shorter series are exact",
                     limit, limit, budget)});
  notes.push_back({fmt::format(
      "Values in the curves are rounded to {} significant digits; the final-metrics CSV holds 9.", digits)});
}

nlohmann::json notes_json(const std::vector<Note>& notes) {
  nlohmann::json out = nlohmann::json::array();
  for (const Note& note : notes) out.push_back({{"text", note.text}, {"items", note.items}});
  return out;
}

// The panels the page opens with: loss, accuracy, the first W_q gradient norm, the first head's score-gradient
// median and entropy, those that have data.
std::vector<std::string> default_panels(const std::vector<std::string>& shown) {
  namespace mc = train::metrics_columns;
  std::vector<std::string> wanted{mc::kLoss, mc::kAccuracy}, panels;
  for (const auto& col : shown)
    if (mc::is_query_weight(mc::grad_norm_parameter(col)) && wanted.size() == 2) wanted.push_back(col);
  wanted.push_back(mc::attention(0, 0, "score_grad_median"));
  wanted.push_back(mc::attention(0, 0, mc::attention_stat_name(&nn::AttentionStats::entropy_mean)));
  for (const auto& col : wanted)
    if (std::find(shown.begin(), shown.end(), col) != shown.end()) panels.push_back(col);
  return panels;
}

// What report.md says first and its figures: the findings, the per-arm sentences and checks, the summary figures'
// data (points [x, y, lo, hi, runs, diverged runs left out]).
void story_json(const Comparison& c, const ReportContext& context, nlohmann::json& meta) {
  nlohmann::json finding_lines = nlohmann::json::array();
  for (const FindingLine& f : findings(c)) finding_lines.push_back({{"text", f.text}, {"anchor", f.anchor}});
  meta["findings"] = finding_lines;
  const StoryChecks checks = story_checks(c);
  meta["checks"] = {{"holds", checks.holds}, {"fails", checks.fails}, {"undecided", checks.undecided}};
  meta["summary"] = summary_json(context.summary);
}

// Each run's name and settings (what the page groups by); the final-metrics CSV has the rest.
nlohmann::json run_entries(const Comparison& c, const PageRuns& runs) {
  nlohmann::json run_meta = nlohmann::json::array();
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& k : runs.keys) s[k] = runs.setting(r, k, "—");
    run_meta.push_back({{"name", runs.names[r]}, {"settings", s}, {"diverged", c.runs[r].diverged}});
  }
  return run_meta;
}

// Every run's final metrics: compare's per-run statistics, then each column's last finite value, exact.
nlohmann::json final_metrics(const Comparison& c, const PageRuns& runs, const PageColumns& p) {
  std::vector<std::string> final_header{"run"};
  final_header.insert(final_header.end(), runs.keys.begin(), runs.keys.end());
  const std::vector<std::string> stat_names{
      "diverged",           "diverged_step",     "incomplete",         "rows",
      "initial_loss",       "final_loss",        "final_accuracy",     "auc_loss",
      "step_to_loss",       "step_to_accuracy",  "mean_grad_norm_w_q", "mean_grad_norm_w_k",
      "frac_zero_grad_w_q", "frac_zero_grad_w_k"};
  final_header.insert(final_header.end(), stat_names.begin(), stat_names.end());
  for (const auto& col : p.shown) final_header.push_back("last " + col);
  nlohmann::json final_rows = nlohmann::json::array();
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    const RunStats& st = c.stats[r];
    std::vector<std::string> row{runs.names[r]};
    for (const auto& k : runs.keys) row.push_back(runs.setting(r, k, ""));
    std::vector<std::string> cells{c.runs[r].diverged ? "true" : "false",
                                   c.runs[r].diverged ? std::to_string(c.runs[r].diverged_step) : "",
                                   c.runs[r].incomplete ? "true" : "false", std::to_string(p.pages[r].rows)};
    for (auto k = cells.size(); k < stat_names.size(); ++k) {
      const double v = st[stat_names[k]];  // a step is written as an integer, none (never reached) as ""
      cells.push_back(stat_names[k].rfind("step_to_", 0) == 0 ? (std::isfinite(v) ? fmt::format("{:.0f}", v) : "")
                                                              : exact(v));
    }
    row.insert(row.end(), cells.begin(), cells.end());
    const RunPage& page = p.pages[r];
    for (const auto& col : p.shown) {
      const auto it = std::find(page.columns.begin(), page.columns.end(), col);
      row.push_back(it == page.columns.end() ? "" : exact(page.last_finite[it - page.columns.begin()]));
    }
    final_rows.push_back(row);
  }
  return {{"header", final_header}, {"rows", final_rows}};
}

// The page's description of its data and runs, everything but the series.
nlohmann::json page_meta(const Comparison& c, const ReportContext& context, const PageRuns& runs, const PageColumns& p,
                         const std::vector<Note>& notes) {
  nlohmann::json meta;
  meta["format"] = 1;
  meta["title"] = title_of(context);
  meta["columns"] = p.shown;
  meta["default_panels"] = default_panels(p.shown);
  meta["group_keys"] = runs.keys;
  const std::vector<std::string> group_by = default_group_keys(runs);
  meta["default_group_by"] = group_by;
  meta["facet_by"] = main_axis(runs, group_by);
  meta["picture"] = picture_json(c);
  meta["common_settings"] = runs.common;
  meta["downsampled"] = p.headline_downsampled || p.other_downsampled;
  meta["notes"] = notes_json(notes);
  if (!context.explain_page.empty()) meta["explain"] = context.explain_page;
  story_json(c, context, meta);
  meta["runs"] = run_entries(c, runs);
  const Table arms = arm_table(c);
  nlohmann::json arm_runs = nlohmann::json::array();
  for (const auto& arm : c.arms) arm_runs.push_back(arm.runs);
  meta["arms"] = {{"header", arms.header}, {"rows", arms.rows}, {"runs", arm_runs}};
  meta["final"] = final_metrics(c, runs, p);
  return meta;
}

// The series, written by hand: numbers rounded (nlohmann would print 17 digits). `other_bytes` gets the size of the
// non-headline columns' values: what shortening them saves.
std::string series_json(const PageColumns& p, int digits, std::size_t& other_bytes) {
  std::string series = "[";
  other_bytes = 0;
  for (std::size_t r = 0; r < p.pages.size(); ++r) {
    const RunPage& page = p.pages[r];
    series += r ? ",{\"x\":[" : "{\"x\":[";
    for (std::size_t g = 0; g < page.grids.size(); ++g) series += (g ? "," : "") + number_array(page.grids[g], 17);
    // One entry per column of the picker (meta "columns"), null where the run has nothing to draw.
    series += "],\"cols\":[";
    for (std::size_t j = 0; j < p.shown.size(); ++j) {
      const auto it = std::find(page.columns.begin(), page.columns.end(), p.shown[j]);
      const std::size_t k = static_cast<std::size_t>(it - page.columns.begin());
      series += j ? "," : "";
      if (it == page.columns.end() || page.finite_count[k] == 0) {
        series += "null";
        continue;
      }
      const std::string values = number_array(page.ys[k], digits);
      if (!headline_column(p.shown[j])) other_bytes += values.size();
      series += "[" + std::to_string(page.grid_of[k]) + "," + values + "]";
    }
    series += "]}";
  }
  return series + "]";
}

std::string assemble_json(const nlohmann::json& meta, const std::string& series) {
  std::string meta_text = meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  meta_text.pop_back();  // the closing brace: the series join the same object
  return script_safe(meta_text + ",\"series\":" + series + "}");
}

constexpr std::size_t kFewestPoints = 16;  // the budget shortens no series below this

// Over budget: fewer points for the other columns first, then for the headline ones too, in proportion to the
// bytes they take, until it fits or every series is down to kFewestPoints.
void shrink_points(const PageColumns& p, std::size_t json_bytes, std::size_t other_bytes, std::size_t budget,
                   std::size_t& headline_points, std::size_t& max_points) {
  const double excess = static_cast<double>(json_bytes - budget);
  const bool cut_others = max_points > kFewestPoints && other_bytes > 0;
  std::size_t longest = 0;  // series shorter than the limit do not shrink with it: start below the longest one
  for (const auto& page : p.pages)
    for (std::size_t k = 0; k < page.ys.size(); ++k)
      if (headline_column(page.columns[k]) != cut_others) longest = std::max(longest, page.ys[k].size());
  const double bytes = cut_others ? static_cast<double>(other_bytes) : static_cast<double>(json_bytes - other_bytes);
  const double ratio = bytes > excess ? (bytes - excess) / bytes * 0.95 : 0.0;
  std::size_t& points = cut_others ? max_points : headline_points;
  points = std::max(kFewestPoints, static_cast<std::size_t>(static_cast<double>(std::min(points, longest)) * ratio));
  if (!cut_others) max_points = std::min(max_points, headline_points);
}

}  // namespace

std::string report_json(const Comparison& c, const ReportContext& context, const HtmlOptions& options,
                        HtmlOutcome& outcome) {
  const PageRuns runs = page_runs(c, context);
  std::size_t headline_points = std::max<std::size_t>(options.max_points, 4), max_points = headline_points;
  for (int attempt = 0;; ++attempt) {
    const PageColumns p = read_pages(c, runs, headline_points, max_points);
    std::vector<Note> notes;
    data_notes(c, context, runs, p, notes);
    downsampling_notes(p, headline_points, max_points, options.significant_digits, notes);
    nlohmann::json meta = page_meta(c, context, runs, p, notes);
    std::size_t other_bytes = 0;
    const std::string series = series_json(p, options.significant_digits, other_bytes);
    std::string json = assemble_json(meta, series);
    outcome.max_points = max_points;
    outcome.downsampled = p.headline_downsampled || p.other_downsampled;
    if (json.size() <= options.max_data_bytes || headline_points <= kFewestPoints || attempt >= 8) {
      if (json.size() > options.max_data_bytes) {
        notes.push_back({fmt::format(
            "The page holds {:.1f} MB of data, over its {:.1f} MB budget: its series are as short as they go.",
            static_cast<double>(json.size()) / 1e6, static_cast<double>(options.max_data_bytes) / 1e6)});
        meta["notes"] = notes_json(notes);
        json = assemble_json(meta, series);
      }
      outcome.notes = notes;
      return json;
    }
    shrink_points(p, json.size(), other_bytes, options.max_data_bytes, headline_points, max_points);
  }
}

HtmlOutcome write_report_html(const Comparison& c, const ReportContext& context, platform::StagedFile& file,
                              const HtmlOptions& options) {
  HtmlOutcome outcome;
  StandalonePage page;
  page.file = "report.html";
  page.title = title_of(context);
  page.data_id = "xgrad-data";
  page.data = report_json(c, context, options, outcome);
  page.noscript = "This page draws its figures with JavaScript; report.md beside it has the tables.";
  page.css = web_assets::kPageCss;
  page.js = web_assets::kPageJs;
  const std::string html = standalone_page_html(page);
  file.write(html);
  file.finish();
  outcome.bytes = html.size();
  return outcome;
}

}  // namespace xgrad::report
