// The experiment-preset machinery (cli/presets/preset.h, report/preset_report.h): `xgrad experiment
// --help` lists the registered presets, an unknown one is refused naming them, flags override a preset's grid, and a
// preset's report sections and figures reach report.md with the numbers its function computed from the runs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "common/registry.h"
#include "report/compare.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "tests/support/compare_findings.h"
#include "tests/support/fake_run.h"
#include "tests/support/paths.h"
#include "tests/support/preset_run.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

using namespace xgrad;
using namespace xgrad::train;
using namespace xgrad::report;
using namespace xgrad::testing;
namespace fs = std::filesystem;

namespace {

// A preset report registered by this test alone: one figure of each scaling's arm mean final loss against d_k and
// one sentence counting the arms, so the test can check what reaches report.md against sweep.json's numbers.
std::vector<PresetSection> api_test_sections(const PresetInput& in) {
  PresetSection s;
  s.anchor = "api-test";
  s.title = "API test";
  SummaryFigure f;
  f.name = "api_test_final_loss";
  f.title = "Final loss per scaling";
  f.caption = "mean over seeds";
  f.x_label = "d_k";
  f.y_label = "final loss";
  for (const ArmStats& arm : in.comparison.arms) {
    SummaryLine line;
    line.label = arm.scale();
    line.scale = arm.scale();
    SummaryPoint p;
    p.x = static_cast<double>(arm.d_k());
    p.y = arm.stat("final_loss").mean;
    p.n = arm.kept.size();
    line.points.push_back(p);
    f.lines.push_back(line);
  }
  s.figures.push_back(f);
  s.markdown = "arms=" + std::to_string(in.comparison.arms.size()) + " quick=" + (in.quick ? "yes" : "no") + "\n";
  return {s};
}
const Registration<PresetReport> api_test_registration{PresetReport{"api_test", 100, api_test_sections}};

}  // namespace

TEST_CASE("experiment --help lists every preset with its run counts; an unknown preset is refused naming them") {
  const ProcessResult help_run = run_xgrad({"experiment", "--help"}, merged_output());
  const std::string& help = help_run.out;
  CHECK(help_run.exit_code == 0);
  CHECK(help.find("--preset") != std::string::npos);
  CHECK(help.find("--quick") != std::string::npos);
  CHECK(help.find("Presets (cli/presets/") != std::string::npos);
  CHECK(help.find("  dk ") != std::string::npos);
  CHECK(help.find("(72 / 16 runs)") != std::string::npos);  // dk: 4 d_k x 2 scales x 3 arms x 3 seeds; quick 2x2x2x2

  const ProcessResult refused_run =
      run_xgrad({"experiment", "--preset", "bogus", "--out", "/nonexistent/x"}, merged_output());
  const std::string& refused = refused_run.out;
  CHECK(refused_run.exit_code == 2);
  CHECK(refused.find("--preset: 'bogus' is not a preset (allowed: dk") != std::string::npos);
}

TEST_CASE("flags given with --preset override its grid; sweep.json records the preset") {
  TempDir tmp("presets_override");
  const auto ok = xgrad::testing::run_preset("dk", tmp / "sweep2", "--seeds 0 --steps 12 --d-k 16");
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.sweep.at("preset") == nlohmann::json{{"name", "dk"}, {"quick", true}});
  REQUIRE(ok.sweep.at("runs").size() == 4);  // 2 scales x 2 quick arms x seed 0 x d_k 16
  for (const auto& r : ok.sweep.at("runs")) {
    CHECK(r.at("config").at("steps") == 12);
    CHECK(r.at("d_k") == 16);
    CHECK(r.at("seed") == 0);
  }
}

TEST_CASE("a flag given for one of a preset's own axes replaces that axis: --d-model with --preset width") {
  TempDir tmp("presets_axis_flag");
  const auto ok =
      xgrad::testing::run_preset("width", tmp / "sweep", "--seeds 0 --steps 2 --d-k 32 --d-model 32 --arms adamw@0.01");
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  // The width grid's d_model axis (16, 64 quick) would leave no point where d_model = d_k = 32: the flag holds.
  REQUIRE(ok.sweep.at("runs").size() == 3);  // SP sqrt_dk, SP none and muP (dk) at d_model = d_k = 32
  for (const auto& r : ok.sweep.at("runs")) CHECK(r.at("config").at("d_model") == 32);
}

TEST_CASE("a preset's sections and figures reach report.md with the numbers its function computed") {
  TempDir tmp("presets_api");
  const fs::path dir = tmp / "sweep";
  REQUIRE(run_xgrad({"sweep", "--out", dir.string(), "--scale", "sqrt_dk,none", "--d-k", "16", "--seeds", "0,1",
                     "--arms", "adamw@0.003", "--steps", "20", "--d-model", "16", "--print-every", "1000"})
              .exit_code == 0);
  // What `xgrad experiment --preset api_test --quick` would have recorded.
  nlohmann::json index = nlohmann::json::parse(read_text(dir / "sweep.json"));
  index["preset"] = {{"name", "api_test"}, {"quick", true}};
  std::ofstream(dir / "sweep.json") << index.dump(2);

  CompareOptions options;
  options.inputs = {dir.string()};
  std::ostringstream out;
  REQUIRE(run_compare(options, out) == 4);
  const std::string report = read_text(dir / "report.md");
  const std::string section = xgrad::testing::report_section(report, "api-test");
  INFO(report);
  REQUIRE(!section.empty());
  CHECK(section.find("## API test") != std::string::npos);
  CHECK(section.find("arms=2 quick=yes") != std::string::npos);
  CHECK(report.find("Preset: api\\_test (its --quick grid)") < report.find("## Findings"));
  CHECK(fs::exists(dir / "plots" / "api_test_final_loss.gp"));
  // Each scaling's cell is the mean of its seeds' final losses, as sweep.json has them.
  for (const std::string scale : {"sqrt_dk", "none"}) {
    double sum = 0;
    int n = 0;
    for (const auto& r : index.at("runs"))
      if (r.at("scale") == scale) {
        sum += r.at("final_loss").get<double>();
        ++n;
      }
    REQUIRE(n == 2);
    CHECK(section.find("| " + markdown_text(scale, true) + " | " + g3(sum / n)) != std::string::npos);
  }

  // A preset this build does not know: the usual report, with a note saying so.
  index["preset"] = {{"name", "not_here"}, {"quick", false}};
  std::ofstream(dir / "sweep.json") << index.dump(2);
  options.plots = false;
  run_compare(options, out);
  CHECK(read_text(dir / "report.md").find("'not\\_here'") != std::string::npos);  // the note names it, as text
}

namespace {

// The cells of the first row of markdown table `table` that begins with `cells`; empty when there is none.
std::vector<std::string> preset_table_row(const std::string& table, const std::vector<std::string>& cells) {
  std::string start = "|";
  for (const std::string& cell : cells) start += " " + markdown_text(cell, true) + " |";  // cells are data
  std::vector<std::string> out;
  const std::string row = xgrad::testing::line_starting(table, start);
  for (std::size_t at = 1, bar; !row.empty() && (bar = row.find(" |", at)) != std::string::npos; at = bar + 2)
    out.push_back(row.substr(at + 1, bar - at - 1));
  return out;
}

// summary.json of the run of sweep.json entry `r`.
nlohmann::json summary_of(const xgrad::testing::PresetRun& run, const nlohmann::json& r) {
  return nlohmann::json::parse(read_text(run.dir / r.at("dir").get<std::string>() / "summary.json"));
}

// "0.12 → 0.34": a run's value of `field` at the first and the second number of pairs (length_eval), 2 decimals.
std::string length_change(const nlohmann::json& summary, int from, int to, const std::string& field) {
  double a = -1, b = -1;
  for (const auto& e : summary.at("length_eval")) {
    if (e.at("value") == from) a = e.at(field).get<double>();
    if (e.at("value") == to) b = e.at(field).get<double>();
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.2f → %.2f", a, b);
  return text;
}

}  // namespace

TEST_CASE("lr report: arms that flags add (--grid n_layers=1,2) are lines and rows of their own, labelled apart") {
  TempDir tmp("presets_lr_labels");
  const auto run =
      xgrad::testing::run_preset("lr", tmp / "lr", "--scale sqrt_dk --seeds 0 --steps 5 --grid n_layers=1,2");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.sweep.at("runs").size() == 16);  // 8 quick arms x n_layers 1, 2
  const std::string table = xgrad::testing::report_section(run.report, "lr-sensitivity-table");
  INFO(table);
  for (const std::string optimizer : {"adamw", "sgd"})
    for (const std::string layers : {"1", "2"})
      CHECK(!preset_table_row(table, {optimizer, "64", "sqrt_dk n_layers=" + layers}).empty());
  CHECK(table.find("| " + markdown_text("sqrt_dk", true) + " |") == std::string::npos);
  const std::string gp = read_text(run.dir / "plots" / "lr_final_loss_vs_lr_adamw_dk64.gp");
  CHECK(gp.find("sqrt_dk n_layers=1") != std::string::npos);
  CHECK(gp.find("sqrt_dk n_layers=2") != std::string::npos);
}

TEST_CASE("length report: each run read at its own trained length; lines labelled by what differs; no empty lists") {
  TempDir tmp("presets_length_labels");
  const auto run = xgrad::testing::run_preset(
      "length", tmp / "len", "--scale sqrt_dk --grid n_pairs=4,8 --arms adamw@0.003,adamw@0.0003 --steps 5 --seeds 0");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.sweep.at("runs").size() == 4);
  const std::string accuracy = xgrad::testing::report_section(run.report, "length-accuracy");
  const std::string findings = xgrad::testing::report_section(run.report, "length-findings");
  INFO(accuracy);
  INFO(findings);
  for (const std::string lr : {"0.003", "0.0003"})
    for (const std::string pairs : {"4", "8"})
      CHECK(accuracy.find(markdown_text("sqrt_dk lr=" + lr + " n_pairs=" + pairs, true)) != std::string::npos);
  // The runs trained at 8 pairs: their own accuracy and largest weight from 8 to 64 pairs, under their own heading.
  for (const auto& r : run.sweep.at("runs")) {
    const std::string lr = r.at("lr").get<double>() > 0.001 ? "0.003" : "0.0003";
    const int pairs = r.at("config").at("n_pairs").get<int>();
    const std::size_t heading =
        findings.find("**d_k = 64, " + markdown_text("lr=" + lr + " n_pairs=" + std::to_string(pairs)) + ".**");
    REQUIRE(heading != std::string::npos);
    const std::string group = findings.substr(heading, findings.find("**d_k", heading + 1) - heading);
    INFO(group);
    if (pairs == 8) {
      const nlohmann::json summary = summary_of(run, r);
      CHECK(group.find(length_change(summary, 8, 64, "accuracy")) != std::string::npos);
      CHECK(group.find(length_change(summary, 8, 64, "max_prob_mean")) != std::string::npos);
      // Its findings row tells the largest weight's change, measured from 8 to 64 pairs.
      const std::vector<std::string> row = preset_table_row(group, {"sqrt_dk"});
      REQUIRE(row.size() == 8);
      CHECK(row[5].rfind("not measured", 0) == std::string::npos);
    } else {  // trained at 4, evaluated at 8 to 64: nothing to compare with
      CHECK(group.find("not measured") != std::string::npos);
      CHECK(group.find("trained at 4") != std::string::npos);
    }
  }
  CHECK(findings.find("no scaling") == std::string::npos);
  CHECK(run.report.find(
            preset_text("length.caption", {{"trained", "4 and 8"}, {"legend", " (n_pairs in the legend)"}})) !=
        std::string::npos);  // the caption names both lengths
}

TEST_CASE("length report: the evaluated lengths are the runs' own; a trained length not evaluated is not measured") {
  TempDir tmp("presets_length_eval");
  const auto run =
      xgrad::testing::run_preset("length", tmp / "len", "--scale sqrt_dk --eval-n-pairs 16,32 --steps 5 --seeds 0");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string accuracy = xgrad::testing::report_section(run.report, "length-accuracy");
  const std::string findings = xgrad::testing::report_section(run.report, "length-findings");
  INFO(accuracy);
  INFO(findings);
  CHECK(accuracy.find("8x") == std::string::npos);
  const std::string evaluated = "16 and 32 (2x and 4x)";
  CHECK(accuracy.find(preset_text("length.lengths", {{"trained", 8}, {"evaluated", evaluated}})) != std::string::npos);
  const std::vector<std::string> row = preset_table_row(findings, {"sqrt_dk"});
  REQUIRE(row.size() == 8);
  CHECK(row[5].rfind("not measured", 0) == 0);  // the largest weight's change: never evaluated at the trained 8
  CHECK(findings.find("not measured") != std::string::npos);
  CHECK(findings.find("no scaling") == std::string::npos);
  CHECK(findings.find("(1 of 1)") == std::string::npos);  // no run was measured at the trained length
}

TEST_CASE("lr report: where every run diverged it says so, naming no best lr nor a sensitivity") {
  TempDir tmp("presets_lr_diverged");
  const auto run =
      xgrad::testing::run_preset("lr", tmp / "lr", "--scale sqrt_dk --arms sgd@1000,sgd@100 --seeds 0 --steps 20");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const auto& r : run.sweep.at("runs")) REQUIRE(!r.at("diverged_step").is_null());
  const std::string loss = xgrad::testing::report_section(run.report, "lr-final-loss");
  const std::string table = xgrad::testing::report_section(run.report, "lr-sensitivity-table");
  INFO(loss);
  INFO(table);
  CHECK(loss.find("diverged") != std::string::npos);  // the figure's table, at each lr
  CHECK(loss.find("at lr 100") == std::string::npos);
  const std::vector<std::string> row = preset_table_row(table, {"sgd", "64", "sqrt_dk"});
  REQUIRE(row.size() == 10);
  CHECK(row[3] == "—");  // no best lr
  CHECK(row[4] == "every run diverged");
  CHECK(row[7] == "—");  // no sensitivity
}

TEST_CASE("compare writes a preset's sections only when every input sweep records that preset") {
  TempDir tmp("presets_compare_mixed");
  const auto dk = xgrad::testing::run_preset("dk", tmp / "pdk", "--seeds 0 --steps 5 --d-k 16");
  const auto len = xgrad::testing::run_preset("length", tmp / "len", "--scale sqrt_dk --seeds 0 --steps 5");
  REQUIRE(dk.exit_code == 0);
  REQUIRE(len.exit_code == 0);
  for (const bool dk_first : {true, false}) {
    CAPTURE(dk_first);
    CompareOptions options;
    options.inputs = dk_first ? std::vector<std::string>{(tmp / "pdk").string(), (tmp / "len").string()}
                              : std::vector<std::string>{(tmp / "len").string(), (tmp / "pdk").string()};
    options.out = (tmp / (dk_first ? "both1" : "both2")).string();
    options.plots = false;
    std::ostringstream out;
    REQUIRE(run_compare(options, out) == 5);
    const std::string report = read_text(fs::path(options.out) / "report.md");
    INFO(report);
    CHECK(report.find("length-findings") == std::string::npos);
    CHECK(report.find("Preset: ") == std::string::npos);
    CHECK((report.find("pdk: dk --quick") < report.find("len: length --quick")) == dk_first);  // in the inputs' order
    CHECK(report.find("pdk: dk --quick") != std::string::npos);
    CHECK(report.find("len: length --quick") != std::string::npos);
    CHECK(out.str().find("warning: ") != std::string::npos);
    CHECK(out.str().find("len: length --quick") != std::string::npos);
  }
}

TEST_CASE(
    "a preset sweep directory takes no other preset nor variant; a malformed record is said; dk has no sections") {
  TempDir tmp("presets_record");
  const fs::path dir = tmp / "pdk";
  const auto quick = xgrad::testing::run_preset("dk", dir, "--seeds 0 --steps 5 --d-k 16");
  INFO(quick.output);
  REQUIRE(quick.exit_code == 0);
  // dk has no sections of its own: the report and the console say so, and no "its sections come first".
  CHECK(quick.report.find("Preset: dk (its --quick grid); it has no sections of its own: the usual report.") !=
        std::string::npos);
  CHECK(quick.report.find("its sections come first") == std::string::npos);
  CHECK(quick.output.find("preset dk (quick): no sections of its own") != std::string::npos);
  CHECK(quick.output.find("0 section(s)") == std::string::npos);

  const auto full = xgrad::testing::run_preset("dk", dir, "--seeds 0 --steps 5 --d-k 16", false);
  CHECK(full.exit_code == 2);
  CHECK(full.output.find("holds the sweep of `xgrad experiment --preset dk --quick` (this one: `xgrad experiment "
                         "--preset dk`)") != std::string::npos);
  const auto other = xgrad::testing::run_preset("length", dir, "--seeds 0 --steps 5 --d-k 16");
  CHECK(other.exit_code == 2);
  CHECK(other.output.find("(this one: `xgrad experiment --preset length --quick`)") != std::string::npos);
  const nlohmann::json index = nlohmann::json::parse(read_text(dir / "sweep.json"));
  CHECK(index.at("preset") == nlohmann::json{{"name", "dk"}, {"quick", true}});
  CHECK(index.at("runs").size() == 4);

  // A record of another form: compare says so instead of ignoring it.
  for (const nlohmann::json& bad :
       {nlohmann::json{{"name", 123}}, nlohmann::json{{"name", "dk"}, {"quick", "yes"}}, nlohmann::json()}) {
    CAPTURE(bad.dump());
    nlohmann::json edited = index;
    edited["preset"] = bad;
    std::ofstream(dir / "sweep.json") << edited.dump(2);
    CompareOptions options;
    options.inputs = {dir.string()};
    options.plots = false;
    std::ostringstream out;
    run_compare(options, out);
    const std::string report = read_text(dir / "report.md");
    CHECK(report.find("records the preset as " + bad.dump()) != std::string::npos);
    CHECK(out.str().find("warning: ") != std::string::npos);
  }

  // An unregistered preset: a note, and no sentence promising its sections.
  nlohmann::json edited = index;
  edited["preset"] = {{"name", "not_here"}, {"quick", false}};
  std::ofstream(dir / "sweep.json") << edited.dump(2);
  CompareOptions options;
  options.inputs = {dir.string()};
  options.plots = false;
  std::ostringstream out;
  run_compare(options, out);
  const std::string report = read_text(dir / "report.md");
  CHECK(report.find("'not\\_here'") != std::string::npos);  // the note names it, as text
  CHECK(report.find("its sections come first") == std::string::npos);
}

TEST_CASE("sweep status on a preset directory names the experiment command; a preset's own value is named as such") {
  TempDir tmp("presets_status");
  const fs::path dir = tmp / "pdk";
  const auto run = xgrad::testing::run_preset("dk", dir, "--seeds 0 --steps 5 --d-k 16");
  REQUIRE(run.exit_code == 0);
  // The experiment explains the argument on its own model and runs, and its report links the page.
  CHECK(fs::exists(dir / "explain" / "explain.html"));
  CHECK(fs::exists(dir / "explain" / "explain.md"));
  CHECK(run.output.find("The argument, measured: ") != std::string::npos);
  CHECK(run.report.find("[explain/explain.html](explain/explain.html)") != std::string::npos);
  fs::remove_all(dir / run.sweep.at("runs").at(0).at("dir").get<std::string>());  // a point to continue
  const std::string status = run_xgrad({"sweep", "status", dir.string()}, merged_output()).out;
  INFO(status);
  CHECK(status.find("to continue: the same `xgrad experiment --preset dk --quick` command again") != std::string::npos);
  CHECK(status.find("xgrad sweep command") == std::string::npos);

  const ProcessResult refused_run =
      run_xgrad({"experiment", "--preset", "length", "--quick", "--n-keys", "16", "--out", (tmp / "len").string()},
                merged_output());
  const std::string& refused = refused_run.out;
  CHECK(refused_run.exit_code == 2);
  CHECK(refused.find("--eval-n-pairs 8,16,32,64 is preset length's --quick value; give --eval-n-pairs to change it") !=
        std::string::npos);
}

TEST_CASE("width and collapse reports: lines that flags add are labelled apart; every run diverged names no best lr") {
  TempDir tmp("presets_width_collapse");
  const auto width =
      xgrad::testing::run_preset("width", tmp / "width", "--seeds 0 --steps 5 --arms adamw@0.01,sgd@1000");
  INFO(width.output);
  REQUIRE(width.exit_code == 0);
  REQUIRE(width.sweep.at("runs").size() == 12);  // 2 widths x 3 variants x 2 arms
  const std::string w = xgrad::testing::report_section(width.report, "width");
  INFO(w);
  for (const std::string variant : {"SP sqrt_dk", "SP none", "muP (1/d_k)"}) {
    CHECK(!preset_table_row(w, {variant + " optimizer=adamw", "16"}).empty());
    const std::vector<std::string> sgd = preset_table_row(w, {variant + " optimizer=sgd", "16"});
    REQUIRE(sgd.size() == 6);
    CHECK(sgd[2].rfind("none", 0) == 0);  // no best lr: every run diverged
    CHECK(sgd[5] == "1 of 1");
    CHECK(w.find("| " + variant + " |") == std::string::npos);
  }
  CHECK(fs::exists(width.dir / "plots" / "width_loss_vs_lr_sqrt_dk_sp_optimizer_sgd.gp"));

  const auto collapse = xgrad::testing::run_preset("collapse", tmp / "collapse",
                                                   "--seeds 0 --steps 24 --scale sqrt_dk --arms adamw@0.01,sgd@0.01");
  INFO(collapse.output);
  REQUIRE(collapse.exit_code == 0);
  const std::string s = xgrad::testing::report_section(collapse.report, "collapse");
  INFO(s);
  // A row per line; one seed: nothing to disagree, too few seeds to decide.
  for (const char* line : {"sqrt_dk optimizer=adamw", "sqrt_dk optimizer=sgd"})
    CHECK(s.find("| " + markdown_text(line, true) + " | 0.01 | ") != std::string::npos);
  CHECK(s.find(preset_text("collapse.undecided_at")) == std::string::npos);
  CHECK(s.find("| " + preset_text("collapse.few_at") + " |") != std::string::npos);
}

TEST_CASE("length report: Nakanishi's claim is not decided from seeds that never learned the task") {
  // 5 steps learn nothing: each seed's largest weight sits on an arbitrary key, so whether it fades says nothing about
  // the claim (a newcomer's run of 50 steps printed "reproduced" from two runs at chance accuracy).
  TempDir tmp("presets_length_unlearned");
  const auto run = xgrad::testing::run_preset("length", tmp / "len", "--scale sqrt_dk,ssmax --steps 5 --seeds 0");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string findings = xgrad::testing::report_section(run.report, "length-findings");
  INFO(findings);
  const std::string not_decided =
      preset_text("length.claim_not_learned", {{"ref", 0}, {"ref_n", 1}, {"ss", 0}, {"ss_n", 1}});
  CHECK(findings.find(preset_text("length.claim", {{"verdict", not_decided}})) != std::string::npos);
  CHECK(findings.find("reproduced") == std::string::npos);
}

TEST_CASE("text report: a scaled arm is judged only against the unscaled arm that differs from it in scale alone") {
  // Held-out losses: sqrt_dk 2.0, none 3.0 in both seeds, so sqrt_dk is lower by far more than the 2% tolerance.
  const auto text_section = [](double none_weight_decay) {
    TempDir tmp("presets_text_pairs");
    std::vector<RunRecord> runs;
    for (const int seed : {0, 1})
      for (const std::string scale : {"none", "sqrt_dk"}) {
        FakeRun r;
        r.scale = scale;
        r.seed = seed;
        r.loss = {2.0, 1.5, 1.0};
        r.eval_loss = {NAN, NAN, scale == "none" ? 3.0 : 2.0};
        r.extra_config["weight_decay"] = scale == "none" ? none_weight_decay : 0.0;
        const fs::path dir = tmp / (scale + "-s" + std::to_string(seed));
        write_run(dir, r);
        runs.push_back(load_run(dir.string()));
      }
    const Comparison c = analyse_runs(runs, -1, 0.9, 1);
    const PresetReport* text = Registry<PresetReport>::instance().find("text");
    REQUIRE(text != nullptr);
    const std::vector<PresetSection> sections = text->sections({c, true, tmp.path().string()});
    REQUIRE(!sections.empty());
    return sections.front().markdown;
  };
  const std::string paired = text_section(0.0);
  INFO(paired);
  CHECK(paired.find(preset_text("text.no_pair")) == std::string::npos);
  CHECK(preset_table_row(paired, {"64", "2", "16", "sqrt_dk"}).at(6) == preset_text("text.better"));
  // The unscaled runs trained with another weight decay: no arm differs from them in scale alone, so no verdict.
  const std::string unpaired = text_section(0.5);
  INFO(unpaired);
  CHECK(unpaired.find(preset_text("text.no_pair")) != std::string::npos);
  CHECK(preset_table_row(unpaired, {"64", "2", "16", "sqrt_dk"}).at(6) == "—");
}

namespace {

// The width section of a grid of d_model 16 and 64, SP and muP, lrs 0.001 0.01 0.1, seeds 0 and 1, lr 0.01 the best
// everywhere (loss 1.0 against 2.0); `edit` takes runs out or adds some (keyed by their directory's name) first.
std::string width_section(const std::function<void(std::map<std::string, FakeRun>&)>& edit) {
  TempDir tmp("presets_width_hole");
  std::map<std::string, FakeRun> runs;
  for (const std::size_t width : {16, 64})
    for (const std::string parametrization : {"sp", "mup"})
      for (const double lr : {0.001, 0.01, 0.1})
        for (const int seed : {0, 1}) {
          FakeRun r;
          r.d_k = width;
          r.scale = parametrization == "mup" ? "dk" : "sqrt_dk";
          r.lr = lr;
          r.seed = seed;
          r.loss = {3.0, lr == 0.01 ? 1.0 : 2.0};
          r.extra_config = {{"d_model", width}, {"n_heads", 1}, {"parametrization", parametrization}};
          runs[std::to_string(width) + parametrization + std::to_string(lr) + "s" + std::to_string(seed)] = r;
        }
  edit(runs);
  std::vector<RunRecord> records;
  for (const auto& name_run : runs) {
    write_run(tmp / name_run.first, name_run.second);
    records.push_back(load_run((tmp / name_run.first).string()));
  }
  const Comparison c = analyse_runs(records, -1, 0.9, 1);
  const PresetReport* width = Registry<PresetReport>::instance().find("width");
  REQUIRE(width != nullptr);
  return width->sections({c, true, tmp.path().string()}).at(0).markdown;
}

}  // namespace

TEST_CASE("width report: a grid with a hole decides no move of the best lr, naming the run missing") {
  // Without muP's runs at lr 0.01 and d_model 64 its best lr there would be 0.001 or 0.1: a move of 10x that only the
  // hole makes.
  const std::string full = width_section([](auto&) {});
  INFO(full);
  CHECK(full.find(preset_text("width.claim_tie", {{"mup", 1.0}, {"sp", 1.0}})) != std::string::npos);
  const std::string holed = width_section([](auto& runs) {
    for (const char* seed : {"s0", "s1"}) runs.erase("64mup" + std::to_string(0.01) + seed);
  });
  INFO(holed);
  CHECK(holed.find(preset_text("width.claim_hole", {{"missing", markdown_text("muP (1/d_k)")}})) != std::string::npos);
  CHECK(holed.find(preset_text("width.hole", {{"holes", "d_model 64 at lr 0.01"}})) != std::string::npos);
  // What the hole alone would have claimed: muP's best lr moving 10x against SP's 1x.
  CHECK(holed.find(preset_text("width.claim_not_reproduced", {{"mup", 10.0}, {"sp", 1.0}})) == std::string::npos);
}

TEST_CASE("width report: a cell one seed lacks is a hole too, naming the cell and the seed") {
  const std::string holed = width_section([](auto& runs) { runs.erase("64mup" + std::to_string(0.01) + "s1"); });
  INFO(holed);
  CHECK(holed.find(preset_text("width.claim_hole", {{"missing", markdown_text("muP (1/d_k)")}})) != std::string::npos);
  CHECK(holed.find(preset_text("width.hole", {{"holes", "d_model 64 at lr 0.01 for seed 1"}})) != std::string::npos);
}

TEST_CASE("width report: a seed run twice counts as the mean of its runs, in its best lr as in the point") {
  // Seed 1 runs twice at muP, d_model 64, lr 0.01, the second run at loss 9.0: its lr objective there, the mean of 2.0
  // and 9.0, is worse than the 2.5 of lr 0.001 and 0.1 (the first of them taken), so seed 1's best lr is 0.001 against
  // seed 0's 0.01: not decided. Taking its better run as seed 1's made the seeds agree on 0.01 while the point (mean
  // 4.33) went to 0.001: a 10x move under muP, and Yang et al.'s claim refuted.
  const std::string twice = width_section([](auto& runs) {
    const std::string name = "64mup" + std::to_string(0.01) + "s1";
    runs[name + "again"] = runs.at(name);
    runs[name + "again"].loss = {9.0, 9.0};
  });
  INFO(twice);
  CHECK(preset_table_row(twice, {"muP (1/d_k)", "64"}).at(2) == "0.001 (not decided)");
  CHECK(preset_table_row(twice, {"muP (1/d_k)", "64"}).at(3) == "0.001 to 0.01");
  CHECK(twice.find(preset_text("width.claim_no_spread")) != std::string::npos);
}

TEST_CASE("width report: a single-seed grid says a best lr needs two seeds, not that they agree at 0 widths") {
  const std::string one = width_section([](auto& runs) {
    for (auto it = runs.begin(); it != runs.end();) it = it->second.seed == 1 ? runs.erase(it) : std::next(it);
  });
  INFO(one);
  CHECK(one.find(preset_text("width.one_seed")) != std::string::npos);
  CHECK(one.find(preset_text("width.few_decided", {{"n", 0}, {"s", "s"}})) == std::string::npos);
}

// Summary.json's length_eval of a FakeRun at n_pairs 8 (trained), 32 and 64 unless `to` is NaN: accuracy 1 and
// largest weight `from`, `from`, `to`.
void write_length_run(const fs::path& dir, int seed, double from, double to) {
  FakeRun r;
  r.scale = "sqrt_dk", r.seed = seed, r.loss = {3.0, 2.0, 1.0}, r.extra_config = {{"n_pairs", 8}};
  write_run(dir, r);
  nlohmann::json summary = fake_run_detail::summary(r);
  for (const auto& point : {std::make_pair(8, from), std::make_pair(32, from), std::make_pair(64, to)})
    if (!std::isnan(point.second))  // NaN: not evaluated at that length
      summary["length_eval"].push_back({{"setting", "n_pairs"},
                                        {"value", point.first},
                                        {"seq_len", 2 * point.first + 1},
                                        {"loss", 0.1},
                                        {"accuracy", 1.0},
                                        {"max_prob_mean", point.second},
                                        {"entropy_mean", 1.0}});
  std::ofstream(dir / kSummaryFile) << summary.dump();
}

TEST_CASE("preset length counts seeds: a seed's second run is averaged into it, not another seed") {
  const TempDir root("preset_length_seeds");
  write_length_run(root / "s0", 0, 0.9, 0.3);
  write_length_run(root / "s0-again", 0, 0.9, 0.3);
  write_length_run(root / "s1", 1, 0.9, 0.9);
  const Comparison c = analyse_dirs({root.string()});
  const std::string md =
      Registry<PresetReport>::instance().at("length").sections(PresetInput{c, false, ""}).back().markdown;
  INFO(md);
  // 2 seeds learned the task, and the weight at 64 pairs is the mean of seed 0's (0.3) and seed 1's (0.9), not of
  // the 3 runs (0.5).
  CHECK(md.find("| 2 of 2 |") != std::string::npos);
  CHECK(md.find("0.90 → 0.60") != std::string::npos);
}

TEST_CASE("preset length tells no change to a length that a seed was not evaluated at") {
  const TempDir root("preset_length_missing");
  write_length_run(root / "s0", 0, 0.9, 0.3);
  write_length_run(root / "s1", 1, 0.9, NAN);
  const Comparison c = analyse_dirs({root.string()});
  const std::string md =
      Registry<PresetReport>::instance().at("length").sections(PresetInput{c, false, ""}).back().markdown;
  INFO(md);
  // Not seed 0 to 64 pairs against seed 1 to 32, nor both to 32 (held): the change is not measured, naming 64 pairs.
  const std::string why = preset_text("length.some_seeds_only", {{"longest", 64}});
  CHECK(md.find(preset_text("length.not_measured", {{"why", why}})) != std::string::npos);
}

TEST_CASE("preset length names and counts the runs it leaves out for holding no length evaluations") {
  const TempDir root("preset_length_unevaluated");
  write_length_run(root / "s0", 0, 0.9, 0.3);
  write_length_run(root / "s1", 1, NAN, NAN);  // trained without --eval-n-pairs: summary.json has no length_eval
  write_length_run(root / "s2", 2, NAN, NAN);
  const fs::path empty = root / "s2" / kSummaryFile;  // an empty list reads as none
  nlohmann::json summary = nlohmann::json::parse(read_text(empty));
  summary["length_eval"] = nlohmann::json::array();
  std::ofstream(empty) << summary.dump();
  const Comparison c = analyse_dirs({root.string()});
  std::string md;
  for (const PresetSection& s : Registry<PresetReport>::instance().at("length").sections(PresetInput{c, false, ""}))
    md += s.markdown;
  INFO(md);
  const std::string list = markdown_text((root / "s1").string()) + " and " + markdown_text((root / "s2").string());
  const std::string note = preset_text("length.unevaluated", {{"runs", "2 runs"}, {"list", list}});
  CHECK(md.find(note) != std::string::npos);
  CHECK(md.find(note, md.find(note) + 1) == std::string::npos);  // said once
}
