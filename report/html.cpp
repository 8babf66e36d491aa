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
#include "report/text.h"
#include "report/web_assets.h"
#include "train/metrics_log.h"
#include "train/run_files.h"

namespace xgrad::report {

namespace fs = std::filesystem;

namespace {

// downsample_min_max fed point by point: a long run's column is never held whole.
class MinMaxDownsampler {
 public:
  MinMaxDownsampler(std::size_t n, std::size_t max_points) {
    max_points = std::max<std::size_t>(max_points, 4);
    width_ = n > max_points ? (n + max_points / 2 - 1) / (max_points / 2) : 1;
    out_.downsampled = width_ > 1;
  }
  void add(double x, double y) {
    bucket_.push_back({x, y});
    if (bucket_.size() == width_) flush();
  }
  DownsampledSeries finish() {
    flush();
    return std::move(out_);
  }

 private:
  // Min and max in the order they occur, so the line keeps the spike's shape; see downsample_min_max.
  void flush() {
    if (bucket_.empty()) return;
    auto lo = bucket_.end(), hi = bucket_.end();
    for (auto p = bucket_.begin(); p != bucket_.end(); ++p) {
      if (!std::isfinite(p->second)) continue;
      if (lo == bucket_.end() || p->second < lo->second) lo = p;
      if (hi == bucket_.end() || p->second > hi->second) hi = p;
    }
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double first = width_ == 1 ? bucket_[0].second : lo == bucket_.end() ? nan : std::min(lo, hi)->second;
    out_.x.push_back(bucket_.front().first);
    out_.y.push_back(first);
    if (bucket_.size() > 1) {
      out_.x.push_back(bucket_.back().first);
      out_.y.push_back(lo == bucket_.end() ? nan : std::max(lo, hi)->second);
    }
    bucket_.clear();
  }
  std::size_t width_ = 1;
  std::vector<std::pair<double, double>> bucket_;
  DownsampledSeries out_;
};

// A number as short JSON ("1.235e-5", not "1.235e-05"; null for NaN/Inf): the page's size is mostly these.
std::string json_number(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  const std::string g = fmt::format("{:.{}g}", v, digits);
  const auto e = g.find('e');
  if (e == std::string::npos) return g;
  const std::string exponent = g.substr(e + 1);  // "-05", "+06"
  return g.substr(0, e + 1) + (exponent[0] == '-' ? "-" : "") + exponent.substr(exponent.find_first_not_of("+-0"));
}

std::string number_array(const std::vector<double>& v, int digits) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_number(v[i], digits);
  return out + "]";
}

// A value for the final-metrics CSV: 9 significant digits (exact for the float32 the trainer computes in), "" for NaN.
std::string exact(double v) {
  if (std::isnan(v)) return "";
  return std::isfinite(v) ? fmt::format("{:.9g}", v) : fmt::format("{}", v);
}

// Rounded so that a figure's points stay short; strtod, as stod throws out_of_range for a subnormal (1e-310).
double rounded(double v) { return std::isfinite(v) ? std::strtod(fmt::format("{:.6g}", v).c_str(), nullptr) : v; }

// A run directory as the page names it: relative to the report's directory when below it.
std::string run_name(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  const fs::path rel = fs::relative(fs::path(dir), fs::path(out_dir), ec);
  const std::string r = ec ? std::string() : rel.generic_string();
  if (r.empty() || r == "." || r.rfind("..", 0) == 0) return fs::path(dir).lexically_normal().generic_string();
  return r;
}

// "xgrad compare: <the report directory's name>": the page's title and heading.
std::string title_of(const ReportContext& context) {
  fs::path dir = fs::path(context.out_dir.empty() ? std::string(".") : context.out_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/" → "out"
  std::string name = dir.filename().string();
  if (name.empty() || name == ".") name = fs::absolute(dir).lexically_normal().filename().string();
  return "xgrad compare: " + name;
}

// The default panels' columns, most compared: kept at the full point limit while the page's budget cuts the others.
bool headline_column(const std::string& c) {
  namespace mc = train::metrics_columns;
  const std::string parameter = mc::grad_norm_parameter(c);
  return c == mc::kLoss || c == mc::kAccuracy || c == mc::kGradNorm || c == mc::kEvalLoss ||
         mc::is_query_weight(parameter) || mc::is_key_weight(parameter) ||
         mc::is_attention(c, 0, "score_grad_median") ||
         mc::is_attention(c, 0, mc::attention_stat_name(&nn::AttentionStats::entropy_mean));
}

// One column of a run's metrics.csv, reduced for the page.
struct PageColumn {
  std::string name;
  std::size_t grid = 0;  // its x: RunPage::grids[grid], shared by the columns that have the same
  std::vector<double> y = {};
  double last_finite = kNoValue;                // NaN: none
  std::size_t finite_count = 0, malformed = 0;  // malformed: cells that are not a number (empty ones are not)
  bool downsampled = false;
};

// One run's metrics.csv, reduced for the page.
struct RunPage {
  std::vector<PageColumn> columns;  // as in the file, step excluded
  std::vector<std::vector<double>> grids;
  std::size_t rows = 0, nonfinite = 0, malformed = 0;
  bool from_comparison = false;  // metrics.csv could no longer be read: the columns compare had read before

  void set(PageColumn& col, DownsampledSeries d, std::map<std::vector<double>, std::size_t>& grid_index) {
    col.downsampled = d.downsampled;
    const auto [it, added] = grid_index.emplace(std::move(d.x), grids.size());
    if (added) grids.push_back(it->first);
    col.grid = it->second;
    col.y = std::move(d.y);
  }
  const PageColumn* find(const std::string& name) const {
    const auto it = std::find_if(columns.begin(), columns.end(), [&](const PageColumn& c) { return c.name == name; });
    return it == columns.end() ? nullptr : &*it;
  }
};

// Fills `page`'s series in one pass, each_row(f) calling f(x, cells) per row. A column finite on at most half the
// rows (logged every --log-every steps) is drawn through its finite points only, the others with gaps.
template <class EachRow>
void reduce_rows(RunPage& page, std::size_t step_col, std::size_t max_points, EachRow each_row) {
  std::vector<bool> sparse;
  std::vector<MinMaxDownsampler> samplers;
  for (const PageColumn& col : page.columns) {
    sparse.push_back(2 * col.finite_count <= page.rows);
    samplers.emplace_back(sparse.back() ? col.finite_count : page.rows, max_points);
    page.nonfinite += sparse.back() ? 0 : page.rows - col.finite_count - col.malformed;
    page.malformed += col.malformed;
  }
  each_row([&](double x, const std::vector<double>& cells) {
    for (std::size_t i = 0, k = 0; i < cells.size(); ++i) {
      if (i == step_col) continue;
      if (std::isfinite(cells[i])) page.columns[k].last_finite = cells[i];
      if (!sparse[k] || std::isfinite(cells[i])) samplers[k].add(x, cells[i]);
      ++k;
    }
  });
  std::map<std::vector<double>, std::size_t> grid_index;
  for (std::size_t k = 0; k < samplers.size(); ++k) page.set(page.columns[k], samplers[k].finish(), grid_index);
}

// `dir`/metrics.csv's first `rows` rows (compare's), streamed twice (never held whole): count finite cells, downsample.
RunPage read_run_page(const std::string& dir, std::size_t rows, std::size_t max_points) {
  const std::string path = (fs::path(dir) / train::kMetricsFile).string();
  RunPage page;
  train::MetricsReader reader(path);
  const auto& header = reader.columns();
  const auto step_col =
      static_cast<std::size_t>(std::find(header.begin(), header.end(), train::metrics_columns::kStep) - header.begin());
  for (std::size_t i = 0; i < header.size(); ++i)
    if (i != step_col) page.columns.push_back({header[i]});
  for (; page.rows < rows && reader.next(); ++page.rows)
    for (std::size_t i = 0, k = 0; i < reader.cells().size(); ++i) {
      if (i == step_col) continue;
      page.columns[k].finite_count += std::isfinite(reader.cells()[i]) ? 1 : 0;
      page.columns[k++].malformed += reader.malformed(i) ? 1 : 0;
    }
  reduce_rows(page, step_col, max_points, [&](const auto& row) {
    train::MetricsReader again(path);
    for (std::size_t r = 0; r < page.rows && again.next(); ++r)
      row(step_col < header.size() ? again.cells()[step_col] : static_cast<double>(r), again.cells());
  });
  return page;
}

// For a run whose metrics.csv went away since compare read it: the columns compare holds (loss, accuracy, eval_loss).
RunPage comparison_page(const RunSeries& s, std::size_t max_points) {
  RunPage page;
  page.from_comparison = true;
  page.rows = s.size();
  std::vector<const std::vector<double>*> values;
  for (const auto& [name, v] :
       std::map<std::string, const std::vector<double>*>{{train::metrics_columns::kLoss, &s.loss},
                                                         {train::metrics_columns::kAccuracy, &s.accuracy},
                                                         {train::metrics_columns::kEvalLoss, &s.eval_loss}}) {
    const auto finite =
        static_cast<std::size_t>(std::count_if(v->begin(), v->end(), [](double y) { return std::isfinite(y); }));
    if (finite == 0) continue;  // not a column of this run
    page.columns.push_back({name});
    page.columns.back().finite_count = finite;
    values.push_back(v);
  }
  reduce_rows(page, SIZE_MAX, max_points, [&](const auto& row) {
    std::vector<double> cells(values.size());
    for (std::size_t r = 0; r < s.size(); ++r) {
      for (std::size_t k = 0; k < values.size(); ++k) cells[k] = (*values[k])[r];
      row(s.step[r], cells);
    }
  });
  return page;
}

// report.md's summary figures (summary_figures) for the page to draw, each line in its summary_styles style.
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

// The runs as the page names and groups them.
struct PageRuns {
  std::vector<std::string> names;
  std::vector<nlohmann::json> settings;
  std::vector<std::string> keys;                     // settings not the same in every run, in setting order
  nlohmann::json common = nlohmann::json::object();  // the settings every run shares, as text

  std::string setting(std::size_t r, const std::string& key, const std::string& absent) const {
    return settings[r].contains(key) ? setting_text(settings[r], key) : absent;
  }
};

PageRuns page_runs(const Comparison& c, const ReportContext& context) {
  PageRuns p;
  for (const RunRecord& run : c.runs) {
    p.names.push_back(run_name(run.dir, context.out_dir.empty() ? std::string(".") : context.out_dir));
    p.settings.push_back(arm_settings(run.config));  // what a page can group by: those and the seeds
    for (const char* key : {"seed", "data_seed"})
      if (run.config.contains(key)) p.settings.back()[key] = run.config.at(key);
  }
  // In the order report.md names an arm's settings (in_setting_order: d_k, scale, optimizer and lr early), seeds last.
  std::set<std::string> varying;
  for (const nlohmann::json& run : p.settings) {
    const nlohmann::json& first = p.settings.front();
    for (const nlohmann::json* s : {&run, &first})
      for (const auto& item : s->items())
        if (run.value(item.key(), nlohmann::json()) != first.value(item.key(), nlohmann::json()))
          varying.insert(item.key());
  }
  p.keys = in_setting_order(c.arms, varying);
  for (const std::string k : {"seed", "data_seed"})
    if (varying.count(k)) p.keys.push_back(k);
  if (!p.settings.empty())
    for (const auto& item : p.settings[0].items())
      if (!varying.count(item.key())) p.common[item.key()] = setting_text(p.settings[0], item.key());
  return p;
}

// Every run's metrics.csv read (each once), and the union of their columns (first-seen order).
struct PageColumns {
  std::vector<RunPage> pages;
  bool headline_downsampled = false, other_downsampled = false;
  std::vector<std::string> shown, never_finite;  // columns with a finite value somewhere, and the others
  std::map<std::vector<std::string>, std::vector<std::string>> partial;  // runs without them -> shown columns
};

PageColumns read_pages(const Comparison& c, const PageRuns& runs, std::size_t max_points) {
  PageColumns p;
  std::vector<std::pair<std::string, std::size_t>> columns;  // first-seen, with their finite values over all runs
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    try {
      p.pages.push_back(read_run_page(c.runs[r].dir, c.runs[r].series.size(), max_points));
    } catch (const std::runtime_error&) {  // the run went away since compare read it
      p.pages.push_back(comparison_page(c.runs[r].series, max_points));
    }
    const RunPage& page = p.pages.back();
    for (const PageColumn& col : page.columns) {
      (headline_column(col.name) ? p.headline_downsampled : p.other_downsampled) |= col.downsampled;
      auto it = std::find_if(columns.begin(), columns.end(), [&](const auto& n) { return n.first == col.name; });
      if (it == columns.end()) it = columns.insert(columns.end(), {col.name, 0});
      it->second += col.finite_count;
    }
  }
  for (const auto& [name, finite] : columns) {
    std::vector<std::string> missing_from;
    for (std::size_t r = 0; r < p.pages.size(); ++r)  // a run drawn from what compare read lacks columns: its note says
      if (!p.pages[r].from_comparison && !p.pages[r].find(name)) missing_from.push_back(runs.names[r]);
    (finite == 0 ? p.never_finite : p.shown).push_back(name);
    if (finite > 0 && !missing_from.empty()) p.partial[missing_from].push_back(name);
  }
  return p;
}

// `p` with its series downsampled to `headline_points` (headline columns) or `max_points` (the others).
PageColumns shortened(PageColumns p, std::size_t headline_points, std::size_t max_points) {
  for (RunPage& page : p.pages) {
    const std::vector<std::vector<double>> grids = std::move(page.grids);
    page.grids.clear();
    std::map<std::vector<double>, std::size_t> grid_index;
    for (PageColumn& col : page.columns) {
      const bool headline = headline_column(col.name);
      DownsampledSeries d = downsample_min_max(grids[col.grid], col.y, headline ? headline_points : max_points);
      d.downsampled = d.downsampled || col.downsampled;
      (headline ? p.headline_downsampled : p.other_downsampled) |= d.downsampled;
      page.set(col, std::move(d), grid_index);
    }
  }
  return p;
}

// A note of the page: what it says (Note), and as data its kind and the count it states first (0: none).
struct PageNote {
  std::string kind;
  std::size_t count = 0;
  Note note;
};

// "the parameters of attention gated_attention": the one setting that tells apart the runs with `columns`, or "".
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

// The notes about what the data lacks, one line each with its runs or columns listed behind it (report/text/notes.md).
std::vector<PageNote> data_notes(const Comparison& c, const ReportContext& context, const PageRuns& runs,
                                 const PageColumns& p) {
  std::vector<PageNote> notes;
  for (const Note& note : context.sweep_notes) notes.push_back({"sweep", 0, note});
  const auto add = [&](const std::string& kind, const std::vector<std::string>& items, std::size_t count,
                       std::size_t have = 0, const std::string& owner = "") {
    if (items.empty()) return;
    const Fields f{{"count", count},
                   {"runs", counted(kind == "nonfinite" || kind == "malformed" ? items.size() : count, "run")},
                   {"columns", counted(count, "column")},
                   {"n", c.runs.size()},
                   {"have", have},
                   {"owner", owner.empty() ? "" : text("notes", "partial_columns_owner", {{"owner", owner}})}};
    notes.push_back({kind, count, {text("notes", kind, f), items}});
  };
  add("unreadable", context.skipped, context.skipped.size());
  add("never_finite", p.never_finite, p.never_finite.size());
  for (const auto& [without, columns] : p.partial) {
    std::vector<std::string> items = columns;
    items.push_back(fmt::format("not in: {}", fmt::join(without, " ")));
    add("partial_columns", items, columns.size(), c.runs.size() - without.size(),
        columns_owner(runs, without, columns));
  }
  std::map<std::string, std::vector<std::string>> runs_of;                       // kind -> the runs it lists
  std::map<std::string, std::size_t> cells{{"nonfinite", 0}, {"malformed", 0}};  // kinds that count cells
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    const RunPage& page = p.pages[r];
    if (page.from_comparison) runs_of["from_comparison"].push_back(runs.names[r]);
    if (page.rows == 0) runs_of["no_rows"].push_back(runs.names[r]);
    if (page.nonfinite > 0) runs_of["nonfinite"].push_back(runs.names[r]);
    if (page.malformed > 0) runs_of["malformed"].push_back(runs.names[r]);
    if (c.runs[r].max_logit_from_score_max_abs) runs_of["score_max_abs"].push_back(runs.names[r]);
    if (c.runs[r].incomplete) runs_of["incomplete"].push_back(runs.names[r] + " (" + c.runs[r].incomplete_reason + ")");
    cells["nonfinite"] += page.nonfinite;
    cells["malformed"] += page.malformed;
  }
  for (const char* kind : {"from_comparison", "no_rows", "nonfinite", "malformed", "score_max_abs", "incomplete"})
    add(kind, runs_of[kind], cells.count(kind) ? cells[kind] : runs_of[kind].size());
  return notes;
}

// The notes about how the series were shortened and rounded.
void downsampling_notes(const PageColumns& p, std::size_t headline_points, std::size_t max_points, int digits,
                        std::vector<PageNote>& notes) {
  const std::size_t limit = p.headline_downsampled ? headline_points : max_points;
  Fields f{{"headline", text("notes", "downsampled_headline")}, {"max_points", max_points}, {"limit", limit}};
  // What the page's size took beyond the point limit.
  f["budget"] = !p.headline_downsampled        ? text("notes", "downsampled_kept", f)
                : max_points < headline_points ? text("notes", "downsampled_others", f)
                                               : std::string();
  f["digits"] = digits;
  if (p.headline_downsampled || p.other_downsampled)
    notes.push_back({"downsampled", limit, {text("notes", "downsampled", f)}});
  notes.push_back({"rounded", static_cast<std::size_t>(digits), {text("notes", "rounded", f)}});
}

nlohmann::json notes_json(const std::vector<PageNote>& notes) {
  nlohmann::json out = nlohmann::json::array();
  for (const PageNote& n : notes)
    out.push_back({{"kind", n.kind}, {"count", n.count}, {"text", n.note.text}, {"items", n.note.items}});
  return out;
}

// The panels the page opens with, those that have data.
std::vector<std::string> default_panels(const std::vector<std::string>& shown) {
  namespace mc = train::metrics_columns;
  std::vector<std::string> wanted{mc::kLoss, mc::kAccuracy}, panels;
  const auto w_q = std::find_if(shown.begin(), shown.end(), [](const std::string& col) {
    return mc::is_query_weight(mc::grad_norm_parameter(col));
  });
  if (w_q != shown.end()) wanted.push_back(*w_q);
  wanted.push_back(mc::attention(0, 0, "score_grad_median"));
  wanted.push_back(mc::attention(0, 0, mc::attention_stat_name(&nn::AttentionStats::entropy_mean)));
  for (const auto& col : wanted)
    if (std::find(shown.begin(), shown.end(), col) != shown.end()) panels.push_back(col);
  return panels;
}

// Every run's final metrics: compare's per-run statistics, then each column's last finite value, exact.
nlohmann::json final_metrics(const Comparison& c, const PageRuns& runs, const PageColumns& p) {
  const std::vector<std::string> stat_names{
      "initial_loss",     "final_loss",         "final_accuracy",     "auc_loss",           "step_to_loss",
      "step_to_accuracy", "mean_grad_norm_w_q", "mean_grad_norm_w_k", "frac_zero_grad_w_q", "frac_zero_grad_w_k"};
  std::vector<std::string> header{"run"};
  header.insert(header.end(), runs.keys.begin(), runs.keys.end());
  for (const char* name : {"diverged", "diverged_step", "incomplete", "rows"}) header.push_back(name);
  header.insert(header.end(), stat_names.begin(), stat_names.end());
  for (const auto& col : p.shown) header.push_back("last " + col);
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    const RunRecord& run = c.runs[r];
    std::vector<std::string> row{runs.names[r]};
    for (const auto& k : runs.keys) row.push_back(runs.setting(r, k, ""));
    row.insert(row.end(), {run.diverged ? "true" : "false", run.diverged ? std::to_string(run.diverged_step) : "",
                           run.incomplete ? "true" : "false", std::to_string(p.pages[r].rows)});
    for (const std::string& name : stat_names) {
      const double v = c.stats[r][name];  // a step is written as an integer, none (never reached) as ""
      row.push_back(name.rfind("step_to_", 0) == 0 ? (std::isfinite(v) ? fmt::format("{:.0f}", v) : "") : exact(v));
    }
    const RunPage& page = p.pages[r];
    for (const auto& col : p.shown) {
      const PageColumn* column = page.find(col);
      row.push_back(column ? exact(column->last_finite) : "");
    }
    rows.push_back(row);
  }
  return {{"header", header}, {"rows", rows}};
}

// The page's description of its data and runs: everything but the series (report_json in html.h).
nlohmann::json page_meta(const Comparison& c, const ReportContext& context, const PageRuns& runs, const PageColumns& p,
                         const std::vector<PageNote>& notes) {
  nlohmann::json meta{{"format", 1},
                      {"title", title_of(context)},
                      {"columns", p.shown},
                      {"default_panels", default_panels(p.shown)},
                      {"group_keys", runs.keys},
                      {"picture", picture_json(c)},
                      {"common_settings", runs.common},
                      {"downsampled", p.headline_downsampled || p.other_downsampled},
                      {"notes", notes_json(notes)},
                      {"summary", summary_json(context.summary)}};
  if (!context.explain_page.empty()) meta["explain"] = context.explain_page;
  meta["findings"] = nlohmann::json::array();
  const std::vector<Verdict> verdicts = report_verdicts(c, context);
  for (const FindingLine& f : findings(c, verdicts))
    meta["findings"].push_back({{"text", f.text}, {"anchor", f.anchor}});
  const StoryChecks checks = story_checks(c, verdicts);
  meta["checks"] = {{"holds", checks.holds}, {"fails", checks.fails}, {"undecided", checks.undecided}};
  meta["runs"] = nlohmann::json::array();
  for (std::size_t r = 0; r < c.runs.size(); ++r) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& k : runs.keys) s[k] = runs.setting(r, k, "—");
    meta["runs"].push_back({{"name", runs.names[r]}, {"settings", s}, {"diverged", c.runs[r].diverged}});
  }
  const Table arms = arm_table(c);
  nlohmann::json arm_runs = nlohmann::json::array();
  for (const auto& arm : c.arms) arm_runs.push_back(arm.runs);
  meta["arms"] = {{"header", arms.header}, {"rows", arms.rows}, {"runs", arm_runs}};
  meta["final"] = final_metrics(c, runs, p);
  return meta;
}

// The series by hand, as nlohmann would print 17 digits. `other_bytes`: what shortening the non-headline ones saves.
std::string series_json(const PageColumns& p, int digits, std::size_t& other_bytes) {
  std::vector<std::string> runs;
  other_bytes = 0;
  for (const RunPage& page : p.pages) {
    std::vector<std::string> grids, cols;
    for (const auto& grid : page.grids) grids.push_back(number_array(grid, 17));
    // One entry per column of the picker (meta "columns"), null where the run has nothing to draw.
    for (const std::string& col : p.shown) {
      const PageColumn* column = page.find(col);
      if (!column || column->finite_count == 0) {
        cols.push_back("null");
        continue;
      }
      const std::string values = number_array(column->y, digits);
      if (!headline_column(col)) other_bytes += values.size();
      cols.push_back(fmt::format("[{},{}]", column->grid, values));
    }
    runs.push_back(fmt::format("{{\"x\":[{}],\"cols\":[{}]}}", fmt::join(grids, ","), fmt::join(cols, ",")));
  }
  return fmt::format("[{}]", fmt::join(runs, ","));
}

std::string assemble_json(const nlohmann::json& meta, const std::string& series) {
  std::string meta_text = meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  meta_text.pop_back();  // the closing brace: the series join the same object
  return script_safe(meta_text + ",\"series\":" + series + "}");
}

constexpr std::size_t kFewestPoints = 16;  // the budget shortens no series below this

// Over budget: fewer points for the other columns first, then for the headline ones, in proportion to their bytes.
void shrink_points(const PageColumns& p, std::size_t json_bytes, std::size_t other_bytes, std::size_t budget,
                   std::size_t& headline_points, std::size_t& max_points) {
  const double excess = static_cast<double>(json_bytes - budget);
  const bool cut_others = max_points > kFewestPoints && other_bytes > 0;
  std::size_t longest = 0;  // series shorter than the limit do not shrink with it: start below the longest one
  for (const auto& page : p.pages)
    for (const PageColumn& col : page.columns)
      if (headline_column(col.name) != cut_others) longest = std::max(longest, col.y.size());
  const double bytes = cut_others ? static_cast<double>(other_bytes) : static_cast<double>(json_bytes - other_bytes);
  const double ratio = bytes > excess ? (bytes - excess) / bytes * 0.95 : 0.0;
  std::size_t& points = cut_others ? max_points : headline_points;
  points = std::max(kFewestPoints, static_cast<std::size_t>(static_cast<double>(std::min(points, longest)) * ratio));
  if (!cut_others) max_points = std::min(max_points, headline_points);
}

}  // namespace

DownsampledSeries downsample_min_max(const std::vector<double>& x, const std::vector<double>& y,
                                     std::size_t max_points) {
  if (x.size() != y.size())
    throw std::invalid_argument(fmt::format("downsample_min_max: x has {} points, y {}", x.size(), y.size()));
  MinMaxDownsampler d(x.size(), max_points);
  for (std::size_t i = 0; i < x.size(); ++i) d.add(x[i], y[i]);
  return d.finish();
}

std::string report_json(const Comparison& c, const ReportContext& context, const HtmlOptions& options,
                        HtmlOutcome& outcome) {
  const PageRuns runs = page_runs(c, context);
  std::size_t headline_points = std::max<std::size_t>(options.max_points, 4), max_points = headline_points;
  const PageColumns full = read_pages(c, runs, max_points);
  for (int attempt = 0;; ++attempt) {
    const PageColumns p = attempt == 0 ? full : shortened(full, headline_points, max_points);
    std::vector<PageNote> notes = data_notes(c, context, runs, p);
    downsampling_notes(p, headline_points, max_points, options.significant_digits, notes);
    nlohmann::json meta = page_meta(c, context, runs, p, notes);
    std::size_t other_bytes = 0;
    const std::string series = series_json(p, options.significant_digits, other_bytes);
    std::string json = assemble_json(meta, series);
    outcome.max_points = max_points;
    outcome.downsampled = p.headline_downsampled || p.other_downsampled;
    if (json.size() <= options.max_data_bytes || headline_points <= kFewestPoints || attempt >= 8) {
      if (json.size() > options.max_data_bytes) {
        const Fields f{{"mb", static_cast<double>(json.size()) / 1e6},
                       {"budget", static_cast<double>(options.max_data_bytes) / 1e6}};
        notes.push_back({"over_budget", json.size(), {text("notes", "over_budget", f)}});
        meta["notes"] = notes_json(notes);
        json = assemble_json(meta, series);
      }
      for (const PageNote& note : notes) outcome.notes.push_back(note.note);
      return json;
    }
    shrink_points(p, json.size(), other_bytes, options.max_data_bytes, headline_points, max_points);
  }
}

HtmlOutcome write_report_html(const Comparison& c, const ReportContext& context, platform::StagedFile& file,
                              const HtmlOptions& options) {
  HtmlOutcome outcome;
  const std::string html =
      standalone_page_html({"report.html", title_of(context), "xgrad-data", report_json(c, context, options, outcome),
                            "This page draws its figures with JavaScript; report.md beside it has the tables.",
                            web_assets::kPageCss, web_assets::kPageJs});
  file.write(html);
  file.finish();
  outcome.bytes = html.size();
  return outcome;
}

}  // namespace xgrad::report
