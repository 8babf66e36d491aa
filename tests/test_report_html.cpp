// report.html of `xgrad compare`: min-max downsampling, the page's embedded JSON, and bad input — runs
// with mismatched columns, an empty metrics.csv, NaN/Inf rows, a single run, 500 runs, series longer than the page's
// budget — still give a valid page that says what it left out. What the page does in a browser is
// tests/browser/report_page_test.js.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nn/scaling.h"
#include "report/compare.h"
#include "report/html.h"
#include "report/markdown.h"
#include "report/picture.h"
#include "report/plots.h"
#include "report/runs.h"
#include "report/stats.h"
#include "tests/support/compare_findings.h"
#include "tests/support/compare_quietly.h"
#include "tests/support/fake_sweep.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/run_files.h"
#include "train/trainer.h"

using namespace xgrad::train;
using namespace xgrad::report;
namespace fs = std::filesystem;
using xgrad::testing::compare_quietly;
using xgrad::testing::nan_value;
using xgrad::testing::read_text;
using xgrad::testing::TempDir;

namespace {

// The JSON block of a report.html, parsed (fails the test when it is missing or not JSON).
nlohmann::json page_data(const fs::path& html_path) {
  const std::string html = read_text(html_path);
  const std::string open = "<script type=\"application/json\" id=\"xgrad-data\">";
  const auto begin = html.find(open);
  REQUIRE(begin != std::string::npos);
  const auto end = html.find("</script>", begin);
  REQUIRE(end != std::string::npos);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

// A note of the page as one line: its text, then what it lists, as the terminal shows it.
std::string note_line(const nlohmann::json& note) {
  std::string line = note.at("text");
  for (std::size_t i = 0; i < note.at("items").size(); ++i)
    line += (i ? ", " : ": ") + note.at("items")[i].get<std::string>();
  return line + ".";
}

// The page's note of `kind`, as {count, items} (null when it has none).
nlohmann::json note_of(const nlohmann::json& data, const std::string& kind) {
  for (const auto& n : data.at("notes"))
    if (n.at("kind") == kind) return {n.at("count"), n.at("items")};
  return nullptr;
}

using Items = std::vector<std::string>;

std::string notes_text(const nlohmann::json& data) {
  std::string out;
  for (const auto& n : data.at("notes")) out += note_line(n) + "\n";
  return out;
}

// One tiny trained run in `dir` (12 steps).
void tiny_trained_run(const fs::path& dir, std::size_t seed = 0) {
  TrainConfig c = xgrad::testing::tiny_run(dir.string());
  c.seed = seed;
  xgrad::train::train(c);
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> lines;
  std::ifstream in(p);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p);
  for (const auto& l : lines) out << l << "\n";
}

// A copy of run `src` as `dst` with config.json's seed set to `seed` (a replicate, without training one).
void copy_run(const fs::path& src, const fs::path& dst, std::size_t seed) {
  fs::create_directories(dst);
  for (const char* f : {kMetricsFile, kSummaryFile}) fs::copy_file(src / f, dst / f);
  nlohmann::json config = nlohmann::json::parse(read_text(src / kConfigFile));
  config["seed"] = seed;
  config["data_seed"] = seed;
  std::ofstream(dst / kConfigFile) << config.dump(2);
}

}  // namespace

TEST_CASE("downsample_min_max keeps a short series exactly") {
  const std::vector<double> x{1, 2, 3, 4, 5}, y{0.5, nan_value, 3, -1, 2};
  const DownsampledSeries d = downsample_min_max(x, y, 5);
  CHECK_FALSE(d.downsampled);
  CHECK(d.x == x);
  REQUIRE(d.y.size() == 5);
  CHECK(std::isnan(d.y[1]));
  CHECK(d.y[3] == -1);
}

TEST_CASE("downsample_min_max: about max_points points, spikes survive, equal lengths share x") {
  const std::size_t n = 100000;
  std::vector<double> x(n), y(n, 1.0), z(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i + 1);
    z[i] = std::sin(0.001 * static_cast<double>(i));
  }
  y[31337] = 1e6;   // a one-step spike up
  y[77777] = -1e6;  // and down
  const DownsampledSeries d = downsample_min_max(x, y, 2000);
  CHECK(d.downsampled);
  CHECK(d.x.size() <= 2000);
  CHECK(d.x.size() >= 1990);
  CHECK(*std::max_element(d.y.begin(), d.y.end()) == 1e6);
  CHECK(*std::min_element(d.y.begin(), d.y.end()) == -1e6);
  CHECK(d.x.front() == 1);
  CHECK(d.x.back() == static_cast<double>(n));
  CHECK(std::is_sorted(d.x.begin(), d.x.end()));
  // Another series of the same length is drawn at the same steps: a mean over runs needs no interpolation.
  CHECK(downsample_min_max(x, z, 2000).x == d.x);
}

TEST_CASE("downsample_min_max: each bucket's extremes in the order they occur; a bucket of NaN is a gap") {
  // 12 points into buckets of 3 (max_points 8: 4 buckets).
  const std::vector<double> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const std::vector<double> y{5, 9, 1, 2, 0, 7, nan_value, nan_value, nan_value, 4, nan_value, 3};
  const DownsampledSeries d = downsample_min_max(x, y, 8);
  CHECK(d.downsampled);
  CHECK(d.x == std::vector<double>{0, 2, 3, 5, 6, 8, 9, 11});
  REQUIRE(d.y.size() == 8);
  CHECK(d.y[0] == 9);  // the max (step 1) comes before the min (step 2)
  CHECK(d.y[1] == 1);
  CHECK(d.y[2] == 0);  // min at step 4, then max at step 5
  CHECK(d.y[3] == 7);
  CHECK(std::isnan(d.y[4]));
  CHECK(std::isnan(d.y[5]));
  CHECK(d.y[6] == 4);  // max at step 9, min at step 11
  CHECK(d.y[7] == 3);
  CHECK_THROWS_AS(downsample_min_max({1, 2}, {1}, 10), std::invalid_argument);
}

TEST_CASE("report.html: the sweep's runs, every column, the arms table and final metrics as JSON; no http(s)") {
  TempDir dir("html_basic");
  tiny_trained_run(dir / "runs" / "a", 0);
  tiny_trained_run(dir / "runs" / "b", 1);
  CHECK(compare_quietly({dir.string()}, dir.path()) == 2);
  const std::string html = read_text(dir / "report.html");
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("uPlot") != std::string::npos);
  CHECK(html.find("MIT License") != std::string::npos);  // uPlot's licence travels with it

  const nlohmann::json data = page_data(dir / "report.html");
  REQUIRE(data.at("runs").size() == 2);
  CHECK(data.at("runs")[0].at("name") == "runs/a");
  CHECK(data.at("series").size() == 2);
  const auto& columns = data.at("columns");
  CHECK(std::find(columns.begin(), columns.end(), "loss") != columns.end());
  CHECK(std::find(columns.begin(), columns.end(), "grad_norm/blocks.0.attn.w_q.weight") != columns.end());
  CHECK(std::find(columns.begin(), columns.end(), "step") == columns.end());
  // Grouping: seed varies, and the default groups by everything else.
  const auto& keys = data.at("group_keys");
  CHECK(std::find(keys.begin(), keys.end(), "seed") != keys.end());
  CHECK(data.at("picture").at("group_by").empty());
  CHECK(data.at("arms").at("rows").size() == 1);
  CHECK(data.at("arms").at("runs")[0] == nlohmann::json::array({0, 1}));
  CHECK(data.at("final").at("rows").size() == 2);
  // A run's loss series: one point per step, exact steps, shared x.
  const auto loss_index = static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "loss") - columns.begin());
  const auto& loss = data.at("series")[0].at("cols").at(loss_index);
  const auto& x = data.at("series")[0].at("x")[loss[0].get<std::size_t>()];
  CHECK(x.size() == 12);
  CHECK(loss[1].size() == 12);
  CHECK_FALSE(data.at("downsampled").get<bool>());
}

TEST_CASE("report.html on bad input: mismatched columns, NaN/Inf rows, no rows, an empty metrics.csv") {
  TempDir dir("html_bad");
  const fs::path good = dir / "src";
  tiny_trained_run(good);
  // No accuracy column.
  copy_run(good, dir / "runs" / "no_accuracy", 1);
  {
    std::vector<std::string> lines = lines_of(dir / "runs" / "no_accuracy" / kMetricsFile);
    for (auto& l : lines) {  // step,loss,accuracy,...: the third cell goes
      const auto a = l.find(',', l.find(',') + 1);
      const auto b = l.find(',', a + 1);
      l.erase(a, b - a);
    }
    write_lines(dir / "runs" / "no_accuracy" / kMetricsFile, lines);
  }
  // Sets the loss cell (the second) of metrics rows first..last of run `name`, row i to loss(i).
  const auto set_losses = [&](const std::string& name, std::size_t first, std::size_t last, auto loss) {
    std::vector<std::string> lines = lines_of(dir / "runs" / name / kMetricsFile);
    for (std::size_t i = first; i <= last; ++i) {
      const auto a = lines[i].find(',');
      const auto b = lines[i].find(',', a + 1);
      lines[i].replace(a + 1, b - a - 1, loss(i));
    }
    write_lines(dir / "runs" / name / kMetricsFile, lines);
  };
  // nan and inf losses (JSON has neither: they must become null), in steps --on-nan skip skipped.
  copy_run(good, dir / "runs" / "nonfinite", 2);
  set_losses("nonfinite", 3, 5, [](std::size_t i) { return i == 4 ? "inf" : "nan"; });
  {
    nlohmann::json config = nlohmann::json::parse(read_text(dir / "runs" / "nonfinite" / kConfigFile));
    config["on_nan"] = "skip";
    std::ofstream(dir / "runs" / "nonfinite" / kConfigFile) << config.dump(2);
  }
  // Text where a number belongs, in two rows: "not a number", not counted with NaN/Inf.
  copy_run(good, dir / "runs" / "text_cells", 5);
  set_losses("text_cells", 2, 3, [](std::size_t) { return "oops"; });
  // A header and no rows; and a file with nothing at all (compare cannot read that run).
  copy_run(good, dir / "runs" / "header_only", 3);
  write_lines(dir / "runs" / "header_only" / kMetricsFile, {lines_of(good / kMetricsFile)[0]});
  copy_run(good, dir / "runs" / "empty_file", 4);
  write_lines(dir / "runs" / "empty_file" / kMetricsFile, {});
  fs::remove_all(good);

  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 4);
  const nlohmann::json data = page_data(dir / "report.html");
  CAPTURE(notes_text(data));
  REQUIRE(data.at("runs").size() == 4);
  // Text where a number belongs is counted apart from NaN and Inf.
  CHECK(note_of(data, "malformed") == nlohmann::json{2, Items{"runs/text_cells"}});
  CHECK(note_of(data, "nonfinite") == nlohmann::json{3, Items{"runs/nonfinite"}});
  const nlohmann::json unreadable = note_of(data, "unreadable");
  REQUIRE(unreadable.is_array());
  CHECK(unreadable[0] == 1);
  CHECK(unreadable[1][0].get<std::string>().find("empty_file") != std::string::npos);
  CHECK(note_of(data, "partial_columns") == nlohmann::json{1, Items{"accuracy", "not in: runs/no_accuracy"}});
  CHECK(note_of(data, "no_rows") == nlohmann::json{1, Items{"runs/header_only"}});
  for (std::size_t r = 0; r < 4; ++r) {
    const std::string name = data.at("runs")[r].at("name");
    const auto& cols = data.at("series")[r].at("cols");
    const auto column = [&](const std::string& c) -> const nlohmann::json& {
      const auto& all = data.at("columns");
      return cols.at(static_cast<std::size_t>(std::find(all.begin(), all.end(), c) - all.begin()));
    };
    if (name == "runs/nonfinite") {
      const auto& loss = column("loss")[1];
      CHECK(loss[2].is_null());
      CHECK(loss[3].is_null());
      CHECK(loss[4].is_null());
      CHECK(loss[5].is_number());
    }
    if (name == "runs/no_accuracy") CHECK(column("accuracy").is_null());
    if (name == "runs/header_only")
      for (const auto& col : cols) CHECK(col.is_null());
  }
}

TEST_CASE("report.html draws a run's rows as compare keeps them: none from a repeated step on") {
  TempDir dir("html_repeated_step");
  const fs::path run = dir / "runs" / "a";
  tiny_trained_run(run);
  std::vector<std::string> lines = lines_of(run / kMetricsFile);
  REQUIRE(lines.size() == 13);
  lines[4].replace(0, lines[4].find(','), "2");  // data row 4 repeats the step of row 3
  write_lines(run / kMetricsFile, lines);
  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 1);
  const nlohmann::json data = page_data(dir / "report.html");
  const auto& columns = data.at("columns");
  const auto loss = static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "loss") - columns.begin());
  const auto& cols = data.at("series")[0].at("cols");
  CHECK(data.at("series")[0].at("x")[cols.at(loss)[0].get<std::size_t>()].size() == 3);  // steps 0, 1, 2
  CHECK(cols.at(loss)[1].size() == 3);
}

TEST_CASE("report.html: columns only some runs have are one note, saying what they belong to") {
  TempDir dir("html_partial_columns");
  tiny_trained_run(dir / "src");
  const std::vector<std::string> gate{"grad_norm/blocks.0.attn.gate.weight", "update_rms/blocks.0.attn.gate.weight"};
  for (std::size_t r = 0; r < 4; ++r) {
    const fs::path run = dir / "runs" / ("r" + std::to_string(r));
    copy_run(dir / "src", run, r);
    if (r < 2) continue;
    nlohmann::json config = nlohmann::json::parse(read_text(run / kConfigFile));
    config["attention"] = "gated_attention";  // its own parameters: the gate
    std::ofstream(run / kConfigFile) << config.dump(2);
    std::vector<std::string> lines = lines_of(run / kMetricsFile);
    for (std::size_t i = 0; i < lines.size(); ++i) lines[i] += i == 0 ? "," + gate[0] + "," + gate[1] : ",0.5,0.25";
    write_lines(run / kMetricsFile, lines);
  }
  fs::remove_all(dir / "src");
  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 4);
  const nlohmann::json data = page_data(dir / "report.html");
  CAPTURE(notes_text(data));
  std::size_t partial = 0;
  for (const auto& note : data.at("notes"))
    if (note.at("text").get<std::string>().find("only in") != std::string::npos) {
      ++partial;
      CHECK(note.at("text").get<std::string>().rfind("2 columns", 0) == 0);
      CHECK(note.at("text").get<std::string>().find("attention gated_attention") != std::string::npos);
      CHECK(note.at("items") == nlohmann::json{gate[0], gate[1], "not in: runs/r0 runs/r1"});
    }
  CHECK(partial == 1);
}

TEST_CASE("report.html counts the runs whose max logit is their score_max_abs (metrics.csv without max_logit)") {
  TempDir dir("html_max_logit");
  tiny_trained_run(dir / "src");
  copy_run(dir / "src", dir / "runs" / "new", 0);
  copy_run(dir / "src", dir / "runs" / "old", 1);  // as an earlier release wrote it: no max_logit columns
  std::vector<std::string> lines = lines_of(dir / "runs" / "old" / kMetricsFile);
  std::vector<bool> dropped;
  for (std::string& line : lines) {
    std::stringstream cells(line);
    std::string kept, cell;
    for (std::size_t i = 0; std::getline(cells, cell, ','); ++i) {
      if (dropped.size() == i) dropped.push_back(cell.size() > 10 && cell.rfind("/max_logit") == cell.size() - 10);
      if (!dropped[i]) kept += (kept.empty() ? "" : ",") + cell;
    }
    line = kept;
  }
  REQUIRE(std::count(dropped.begin(), dropped.end(), true) > 0);
  write_lines(dir / "runs" / "old" / kMetricsFile, lines);
  CHECK(compare_quietly({(dir / "runs" / "new").string()}, dir / "new") == 1);
  CHECK(note_of(page_data(dir / "new" / "report.html"), "score_max_abs").is_null());
  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 2);
  CHECK(note_of(page_data(dir / "report.html"), "score_max_abs") == nlohmann::json{1, Items{"runs/old"}});
}

TEST_CASE("report.html of a single run") {
  TempDir dir("html_single");
  tiny_trained_run(dir / "run");
  CHECK(compare_quietly({(dir / "run").string()}, dir / "out") == 1);
  const nlohmann::json data = page_data(dir / "out" / "report.html");
  CHECK(data.at("runs").size() == 1);
  CHECK(data.at("group_keys").empty());
  CHECK(data.at("arms").at("rows").size() == 1);
}

TEST_CASE("report.html of 500 runs is a valid page, and says when it is over its data budget") {
  TempDir dir("html_500");
  tiny_trained_run(dir / "src");
  for (std::size_t i = 0; i < 500; ++i) copy_run(dir / "src", dir / "runs" / ("r" + std::to_string(1000 + i)), i);
  fs::remove_all(dir / "src");
  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 500);
  const nlohmann::json data = page_data(dir / "report.html");
  CHECK(data.at("runs").size() == 500);
  CHECK(data.at("series").size() == 500);
  // 500 runs x 68 columns x 12 steps do not fit in 2.85 MB at 4 digits, and 12 points are not downsampled.
  CHECK(note_of(data, "over_budget").is_array());
  CHECK(fs::file_size(dir / "report.html") < 6000000);
}

TEST_CASE("report.html: series over the page budget are downsampled further, and the page says so") {
  TempDir dir("html_budget");
  tiny_trained_run(dir / "src");
  const std::vector<std::string> src_lines = lines_of(dir / "src" / kMetricsFile);
  // 6 runs of 3000 steps with 3 columns, the loss with a spike at step 1234.
  for (std::size_t r = 0; r < 6; ++r) {
    const fs::path run = dir / "runs" / ("r" + std::to_string(r));
    copy_run(dir / "src", run, r);
    std::vector<std::string> lines{"step,loss,accuracy"};
    for (std::size_t s = 1; s <= 3000; ++s)
      lines.push_back(std::to_string(s) + "," + (s == 1234 ? "99.5" : std::to_string(2.0 / std::sqrt(s + r))) + ",0.5");
    write_lines(run / kMetricsFile, lines);
  }
  fs::remove_all(dir / "src");
  std::vector<RunRecord> records;
  for (const auto& d : find_run_dirs({(dir / "runs").string()}).dirs) records.push_back(load_run(d));
  const Comparison c = analyse_runs(std::move(records), -1, 0.9, 10);
  ReportContext context;
  context.out_dir = dir.string();

  HtmlOutcome outcome;
  HtmlOptions options;
  const std::string unlimited = report_json(c, context, options, outcome);
  CHECK(outcome.max_points == 2000);
  CHECK(outcome.downsampled);
  CHECK(nlohmann::json::parse(unlimited).at("series")[0].at("cols").at(0)[1].size() <= 2000);  // columns: loss, ...

  options.max_data_bytes = 40000;
  const std::string small = report_json(c, context, options, outcome);
  CHECK(small.size() <= 40000);
  CHECK(outcome.max_points < 2000);  // loss and accuracy: headline columns, shortened when nothing else is left
  const nlohmann::json data = nlohmann::json::parse(small);
  CHECK(note_of(data, "downsampled") == nlohmann::json{outcome.max_points, Items{}});
  double highest = 0;
  REQUIRE(data.at("columns")[0] == "loss");
  for (const auto& v : data.at("series")[0].at("cols").at(0)[1])
    if (v.is_number()) highest = std::max(highest, v.get<double>());
  CHECK(highest == 99.5);  // the spike survives
}

TEST_CASE("report.html of a run whose metrics.csv went away since compare read it: the series compare holds") {
  TempDir dir("html_gone");
  tiny_trained_run(dir / "runs" / "a", 0);
  tiny_trained_run(dir / "runs" / "b", 1);
  std::vector<RunRecord> records;
  for (const auto& d : find_run_dirs({(dir / "runs").string()}).dirs) records.push_back(load_run(d));
  const Comparison c = analyse_runs(std::move(records), -1, 0.9, 10);
  fs::remove(dir / "runs" / "b" / kMetricsFile);
  ReportContext context;
  context.out_dir = dir.string();
  HtmlOutcome outcome;
  const nlohmann::json data = nlohmann::json::parse(report_json(c, context, {}, outcome));
  CHECK(note_of(data, "from_comparison") == nlohmann::json{1, Items{"runs/b"}});
  const auto& columns = data.at("columns");
  const auto loss = static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "loss") - columns.begin());
  REQUIRE(loss < columns.size());
  CHECK(data.at("series")[1].at("cols").at(loss)[1].size() == 12);
  // The columns compare does not hold are missing from it: its own note says so, not one of missing columns.
  CHECK(note_of(data, "partial_columns").is_null());
  for (const auto& note : data.at("notes")) {  // counted nouns ("1 run"), never "run(s)"
    const std::string text = note.at("text");
    CHECK_MESSAGE(text.find("(s)") == std::string::npos, text);
  }
}

TEST_CASE("report.html's findings and checks come from the verdicts compare computed once, as report.md's") {
  TempDir dir("html_verdicts_once");
  for (const std::string scale : {"none", "sqrt_dk"}) {
    xgrad::testing::FakeRun r;
    r.scale = scale;
    r.loss = {4.6, scale == "none" ? 1.5 : 0.5};
    xgrad::testing::write_run(dir / "runs" / scale, r);
  }
  const Comparison c = xgrad::testing::analyse_dirs({(dir / "runs").string()});
  std::vector<Verdict> verdicts = judge(c, c.axis, baseline_of(c));
  for (Verdict& v : verdicts)                                    // handed values, unlike what judging again gives
    if (v.claim == "trains_better") v.outcome = Outcome::worse;  // judged better
  ReportContext context;
  context.out_dir = dir.string();
  context.verdicts = verdicts;
  HtmlOutcome outcome;
  const nlohmann::json data = nlohmann::json::parse(report_json(c, context, {}, outcome));
  const StoryChecks handed = story_checks(c, verdicts);
  CHECK(data.at("checks").at("holds") == handed.holds);
  CHECK(data.at("checks").at("fails") == handed.fails);
  CHECK(handed.fails != story_checks(c).fails);
  std::vector<std::string> texts;
  for (const FindingLine& f : findings(c, verdicts)) texts.push_back(f.text);
  std::vector<std::string> page;
  for (const auto& f : data.at("findings")) page.push_back(f.at("text"));
  CHECK(page == texts);
}

TEST_CASE(
    "report.html: summary lines carry their scaling's registered colour (theory lines a lighter shade of it, as the "
    "PNGs); findings link to their details; the title names the report") {
  TempDir dir("html_summary_colours");
  for (const std::size_t d_k : {4, 8})
    for (const std::string scale : {"none", "sqrt_dk"}) {
      TrainConfig c = xgrad::testing::tiny_run((dir / "sweep" / (scale + std::to_string(d_k))).string(), 4);
      c.model.d_k = d_k;
      c.model.scale = scale;
      xgrad::train::train(c);
    }
  CHECK(compare_quietly({(dir / "sweep").string()}, dir / "my-report") == 4);
  const nlohmann::json data = page_data(dir / "my-report" / "report.html");
  std::size_t theory = 0;
  for (const auto& fig : data.at("summary"))
    for (const auto& line : fig.at("lines")) {
      INFO(line.dump());
      const auto* entry = xgrad::Registry<xgrad::nn::ScalingEntry>::instance().find(line.at("scale"));
      REQUIRE(entry);
      const bool is_theory = line.at("theory").get<bool>();
      CHECK(line.at("colour") == (is_theory ? lighter(entry->colour, 0.3) : entry->colour));
      theory += is_theory;
    }
  CHECK(theory == 2);  // score std at step 0: one theory line per scaling, in a shade of that scaling's colour
  REQUIRE_FALSE(data.at("findings").empty());
  for (const auto& f : data.at("findings")) {
    INFO(f.dump());
    CHECK(f.at("text").is_string());
    CHECK(xgrad::testing::word_count(f.at("text").get<std::string>()) <= 40);
    CHECK_FALSE(f.at("anchor").get<std::string>().empty());
  }
  const std::string html = read_text(dir / "my-report" / "report.html");
  CHECK(html.find("<title>xgrad compare: my-report</title>") != std::string::npos);
}

TEST_CASE("report.html: final metrics leave a setting a run does not have empty, never '—'") {
  TempDir dir("html_final_empty");
  for (const std::string optimizer : {"sgd", "adamw"}) {
    TrainConfig c = xgrad::testing::tiny_run((dir / "runs" / optimizer).string(), 3);
    c.optimizer = optimizer;
    xgrad::train::train(c);
  }
  CHECK(compare_quietly({(dir / "runs").string()}, dir.path()) == 2);
  const nlohmann::json data = page_data(dir / "report.html");
  const auto& header = data.at("final").at("header");
  REQUIRE(header.size() > 3);
  for (const auto& row : data.at("final").at("rows"))
    for (std::size_t i = 0; i < row.size(); ++i) {
      INFO(header[i].get<std::string>());
      CHECK(row[i].get<std::string>() != "—");
    }
}

namespace {

// The gnuplot line style of the element titled `title` in `script`: its "dt ... lc rgb '#RRGGBB'" part.
std::string gnuplot_style_of(const std::string& script, const std::string& title) {
  const auto at = script.find("title " + title);
  if (at == std::string::npos) return "";
  const auto begin = script.rfind(" dt ", at), end = script.find(" title ", begin);
  return script.substr(begin + 1, end - begin - 1);
}

// `dash` of the page's picture as gnuplot's dt: 1 (solid) or (a,b,...).
std::string as_dt(const nlohmann::json& picture, std::size_t dash) {
  std::string out;
  for (const auto& v : picture.at("dashes").at(dash))
    out += (out.empty() ? "(" : ",") + fmt::format("{:g}", v.get<double>());
  return out.empty() ? "1" : out + ")";
}

// A series with gaps and uneven steps, smoothed by report::smooth, for the browser test to smooth with page.js:
// written as {x, y (null: a gap), half_width, expected} into `path`. Checks the C++ smoother against its definition.
void write_smoothing_case(const fs::path& path) {
  std::vector<double> x, y;
  for (int i = 0; i < 80; ++i) {
    x.push_back(i < 40 ? 3.0 * i : 120.0 + 7.0 * (i - 40));
    y.push_back(i % 13 == 5 ? nan_value : std::exp(-0.03 * i) + 0.1 * std::sin(1.7 * i));
  }
  const double half_width = 10;
  const std::vector<double> smoothed = smooth(x, y, half_width);
  for (std::size_t i = 0; i < x.size(); ++i) {  // the mean of the finite points within the shrunk window
    if (std::isnan(y[i])) {
      CHECK(std::isnan(smoothed[i]));
      continue;
    }
    const double h = std::min({half_width, x[i] - x.front(), x.back() - x[i]});
    double sum = 0, n = 0;
    for (std::size_t j = 0; j < x.size(); ++j)
      if (!std::isnan(y[j]) && std::fabs(x[j] - x[i]) <= h) sum += y[j], ++n;
    CHECK(smoothed[i] == doctest::Approx(sum / n).epsilon(1e-12));
  }
  std::ofstream(path) << nlohmann::json{{"x", x}, {"y", y}, {"half_width", half_width}, {"expected", smoothed}}.dump();
}

}  // namespace

// With XGRAD_PICTURE_DIR set (the ctest fixture report_page_picture), the sweep, its report and the smoothing case stay
// there for the browser test (tests/browser/report_page_test.js), which checks that the page draws what this case
// checks it is told to.
TEST_CASE("report.html and the PNG figures draw one picture; the page opens on a chart per d_k") {
  const TempDir temp("html_picture");
  const char* keep = std::getenv("XGRAD_PICTURE_DIR");
  const fs::path root = keep ? fs::path(keep) : temp.path();
  for (const char* earlier : {"runs", "plots"}) fs::remove_all(root / earlier);  // of the fixture's last run
  xgrad::testing::write_default_experiment_like(root, 300);
  CompareOptions options;
  options.inputs = {root.string()};
  std::ostringstream out;
  REQUIRE(run_compare(options, out) == 72);
  write_smoothing_case(root / "smoothing_case.json");

  const nlohmann::json data = page_data(root / "report.html");
  const nlohmann::json& picture = data.at("picture");
  CHECK(picture.at("facet_by") == "d_k");
  CHECK(picture.at("group_by") == nlohmann::json{"d_k", "scale", "optimizer", "lr"});  // no beta1, momentum
  // 300 rows: +-2 steps, a window of 5, as the loss figure's title says.
  CHECK(picture.at("smoothing").at("half_width") == 2);
  const std::string loss = read_text(root / "plots" / "loss.gp"), md = read_text(root / "report.md");
  CHECK(loss.find(fmt::format("over {} steps", 2 * picture.at("smoothing").at("half_width").get<int>() + 1)) !=
        std::string::npos);
  for (const auto& item : picture.at("scalings").items()) {
    const std::string scale = item.key();  // not a structured binding: INFO captures it, which Clang refuses
    const nlohmann::json& style = item.value();
    INFO(scale);
    const xgrad::nn::ScalingEntry& entry = xgrad::Registry<xgrad::nn::ScalingEntry>::instance().at(scale);
    CHECK(style.at("colour") == entry.colour);
    CHECK(xgrad::nn::scaling_dash_styles()[style.at("dash").get<std::size_t>()] == entry.dash);
    const std::string expected = "dt " + as_dt(picture, style.at("dash")) + " lc rgb '" + entry.colour + "'";
    CHECK(gnuplot_style_of(loss, "'" + scale + " (3 runs)'") == expected);
    if (gnuplot_available()) CHECK(md.find(scale + " " + entry.colour + " " + entry.dash) != std::string::npos);
  }
  // Summary figures: each line's colour and dash in the page's JSON are those of its line in the figure's script.
  for (const auto& figure : data.at("summary")) {
    const std::string script = read_text(root / "plots" / (figure.at("name").get<std::string>() + ".gp"));
    for (const auto& line : figure.at("lines")) {
      INFO(figure.at("name"), " ", line.at("label"));
      const std::string style = gnuplot_style_of(script, gnuplot_string(line.at("label")));
      const auto& points = line.at("points");
      if (style.empty()) {  // not drawn: nothing to draw
        CHECK(std::none_of(points.begin(), points.end(), [](const auto& p) { return p.at(1).is_number(); }));
        continue;
      }
      CHECK(style.find("dt " + as_dt(picture, line.at("dash"))) == 0);
      CHECK(style.find("lc rgb '" + line.at("colour").get<std::string>() + "'") != std::string::npos);
    }
  }
}
