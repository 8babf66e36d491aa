// Training end to end: it learns, it is reproducible, it writes what the README promises, and the CLI rejects
// bad usage with exit code 2.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/sweep.h"
#include "platform/environment.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/metrics_log.h"
#include "train/run_files.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::train;
using namespace xgrad::cli;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {
std::vector<std::string> column_text(const fs::path& csv, std::size_t col) {
  std::ifstream in(csv);
  std::string line;
  std::vector<std::string> out;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    for (std::size_t i = 0; i <= col; ++i) std::getline(ss, cell, ',');
    out.push_back(cell);
  }
  return out;
}

// `c` trained into a fresh temp_dir(name); the configuration it ran with.
TrainConfig trained_into(TrainConfig c, const std::string& name) {
  c.out = temp_dir(name).string();
  xgrad::train::train(c);
  return c;
}
}  // namespace

TEST_CASE("sqrt_dk attention at d_k = 16 learns key-value recall to well below chance in 400 steps") {
  TrainConfig c = tiny_run(temp_dir("learns").string(), 400);
  const RunSummary s = xgrad::train::train(c);
  INFO("final loss " << s.final_loss << ", chance " << s.chance_loss);
  CHECK_FALSE(s.diverged);
  CHECK(s.first_loss > s.chance_loss);
  CHECK(s.final_loss < 0.5 * s.chance_loss);
  CHECK(s.final_accuracy > 0.6);
  fs::remove_all(c.out);
}

TEST_CASE("metrics.csv and config.json hold what the README promises") {
  TrainConfig c;
  c.model.d_model = 8;
  c.steps = 5;
  c.out = temp_dir("files").string();
  xgrad::train::train(c);
  const MetricsTable t = read_metrics((fs::path(c.out) / "metrics.csv").string());
  CHECK(t.rows.size() == 5);
  for (const char* col : {"step", "loss", "accuracy", "lr", "grad_norm", "grad_norm/blocks.0.attn.w_q.weight",
                          "grad_norm/blocks.0.attn.w_k.weight", "grad_norm/head.weight", "step_ms"})
    CHECK_NOTHROW(t.column(col));
  CHECK(t.rows[4][t.column("step")] == 4);
  // The global norm is the L2 norm of the per-parameter norms.
  double s2 = 0;
  for (std::size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].rfind("grad_norm/", 0) == 0) s2 += t.rows[0][i] * t.rows[0][i];
  CHECK(t.rows[0][t.column("grad_norm")] == doctest::Approx(std::sqrt(s2)).epsilon(1e-5));

  std::ifstream in(fs::path(c.out) / "config.json");
  const auto j = nlohmann::json::parse(in);
  CHECK(j.at("d_model") == 8);
  CHECK(j.at("scale") == "sqrt_dk");
  CHECK(j.at("environment").contains("openblas_core"));
  CHECK(j.at("environment").at("xgrad").is_string());
  fs::remove_all(c.out);
}

TEST_CASE("metrics.csv column names: one definition the trainer writes with and compare reads with") {
  namespace columns = metrics_columns;
  CHECK(columns::grad_norm("blocks.0.attn.w_q.weight") == "grad_norm/blocks.0.attn.w_q.weight");
  CHECK(columns::grad_norm_parameter("grad_norm/blocks.0.attn.w_q.weight") == "blocks.0.attn.w_q.weight");
  CHECK(columns::grad_norm_parameter(columns::kGradNorm).empty());
  CHECK(columns::is_query_weight("blocks.1.attn.w_q.weight"));
  CHECK_FALSE(columns::is_query_weight("blocks.1.attn.w_k.weight"));
  CHECK(columns::attention(1, 3, "entropy_mean") == "attn/l1h3/entropy_mean");
  CHECK(columns::is_attention("attn/l1h3/entropy_mean", 1, "entropy_mean"));
  CHECK_FALSE(columns::is_attention("attn/l11h3/entropy_mean", 1, "entropy_mean"));
  CHECK_FALSE(columns::is_attention("attn/l1h3/entropy_min", 1, "entropy_mean"));
  CHECK(columns::attention_stat_name(&nn::AttentionStats::frac_max_prob_above_099) == "frac_max_prob_gt_0.99");
  std::set<std::string> names;
  for (const auto& stat : columns::attention_stats()) names.insert(stat.name);
  CHECK(names.size() == columns::attention_stats().size());
}

TEST_CASE("MetricsReader: a UTF-8 BOM and CRLF line ends are not part of column names or cells") {
  const fs::path dir = temp_dir("metrics_reader_bom");
  fs::create_directories(dir);
  const fs::path csv = dir / "metrics.csv";
  std::ofstream(csv, std::ios::binary) << "\xEF\xBB\xBFstep,loss,step_ms\r\n0,1.5,2\r\n1,x,3\r\n";
  MetricsReader reader(csv.string());
  CHECK(reader.columns() == std::vector<std::string>{"step", "loss", "step_ms"});
  REQUIRE(reader.next());
  CHECK(reader.cells()[2] == 2);
  CHECK(reader.malformed_cells() == 0);
  CHECK(reader.line() == "0,1.5,2");
  REQUIRE(reader.next());
  CHECK(reader.cells()[2] == 3);
  CHECK(reader.malformed_cells() == 1);  // "x", not the line end
  CHECK_FALSE(reader.malformed(0));
  CHECK(reader.malformed(1));
  CHECK_FALSE(reader.next());
  CHECK_FALSE(reader.cut());
  fs::remove_all(dir);
}

TEST_CASE("MetricsReader: a NUL byte inside a cell makes it malformed, not the number before the NUL") {
  const fs::path dir = temp_dir("metrics_reader_nul");
  fs::create_directories(dir);
  const fs::path csv = dir / "metrics.csv";
  std::ofstream(csv, std::ios::binary) << std::string("step,loss\n0,1\0garbage\n1,2\n", 26);
  MetricsReader reader(csv.string());
  REQUIRE(reader.next());
  CHECK(std::isnan(reader.cells()[1]));
  CHECK(reader.malformed(1));
  REQUIRE(reader.next());
  CHECK(reader.cells()[1] == 2);
  CHECK(reader.malformed_cells() == 0);
  fs::remove_all(dir);
}

TEST_CASE("MetricsReader: empty and non-numeric cells read as NaN; a row cut short ends the rows") {
  const fs::path dir = temp_dir("metrics_reader");
  fs::create_directories(dir);
  const fs::path csv = dir / "metrics.csv";
  std::ofstream(csv) << "step,loss\n0,1.5\n1,\n\n2,x\n3,2,9\n4,0.5\n";
  MetricsReader reader(csv.string());
  CHECK(reader.columns() == std::vector<std::string>{"step", "loss"});
  REQUIRE(reader.next());
  CHECK(reader.cells()[1] == 1.5);
  CHECK(reader.malformed_cells() == 0);
  REQUIRE(reader.next());
  CHECK(std::isnan(reader.cells()[1]));
  CHECK(reader.malformed_cells() == 0);  // an empty cell was not measured that step: NaN, not malformed
  REQUIRE(reader.next());                // the empty line is skipped
  CHECK(reader.cells()[0] == 2);
  CHECK(std::isnan(reader.cells()[1]));
  CHECK(reader.malformed_cells() == 1);  // "x": not a number
  CHECK_FALSE(reader.next());            // three cells under two columns
  CHECK(reader.cut());
  CHECK(reader.rows() == 4);

  std::ofstream(csv) << "step,loss\n0,1.5\n1,2.";  // the writer stopped mid-row
  const MetricsTable t = read_metrics(csv.string());
  CHECK(t.rows.size() == 1);
  std::ofstream(csv) << "";
  CHECK_THROWS_WITH_AS(MetricsReader(csv.string()), (csv.string() + " has no header row").c_str(), std::runtime_error);
  fs::remove_all(dir);
}

TEST_CASE("two runs with the same seed write identical loss columns; another seed does not") {
  const TrainConfig c = trained_into(tiny_run("", 30), "det_a");
  const TrainConfig d = trained_into(c, "det_b");
  TrainConfig other_seed = c;
  other_seed.seed = 1;
  const TrainConfig e = trained_into(other_seed, "det_c");
  const auto la = column_text(fs::path(c.out) / "metrics.csv", 1);
  CHECK(la.size() == 30);
  CHECK(la == column_text(fs::path(d.out) / "metrics.csv", 1));
  CHECK(la != column_text(fs::path(e.out) / "metrics.csv", 1));
  // Bit-identical means every column but the timing: loss, accuracy, every gradient norm and saturation statistic.
  const auto a = metrics_without_timing(c.out);
  CHECK(a.size() == 31);
  CHECK(a == metrics_without_timing(d.out));
  for (auto& p : {c.out, d.out, e.out}) fs::remove_all(p);
}

TEST_CASE("more BLAS threads: the same run to float tolerance (what README's Determinism section promises)") {
  // With several OpenBLAS threads a GEMM is split into blocks computed by different threads; README documents that
  // results may then differ in the last bits. What is promised is agreement to float tolerance, tested here.
  TrainConfig one_thread = tiny_run("", 20);
  one_thread.model.d_model = 32;
  one_thread.model.d_k = 64;
  one_thread.batch_size = 64;
  const TrainConfig c = trained_into(one_thread, "threads_1");
  TrainConfig two_threads = c;
  two_threads.threads = 2;
  const TrainConfig d = trained_into(two_threads, "threads_2");
  const auto one = column_text(fs::path(c.out) / "metrics.csv", 1);
  const auto two = column_text(fs::path(d.out) / "metrics.csv", 1);
  REQUIRE(one.size() == 20);
  REQUIRE(two.size() == 20);
  for (std::size_t i = 0; i < one.size(); ++i)
    CHECK(std::stod(two[i]) == doctest::Approx(std::stod(one[i])).epsilon(1e-4));
  xgrad::platform::set_threads(1);
  for (auto& p : {c.out, d.out}) fs::remove_all(p);
}

TEST_CASE("--config: a run's config.json given to xgrad train reproduces its metrics.csv; flags override the file") {
  const fs::path dir = temp_dir("config_round_trip");
  // Settings of every kind: core, the task's own, the optimizer's own, a boolean, a number.
  REQUIRE(run_xgrad(words("train --out " + (dir / "a").string() +
                          " --task copy --seq-len 8 --n-symbols 5 --d-model 16 "
                          "--optimizer sgd --momentum 0.5 --lr 0.05 --mlp false --steps 12 --batch-size 8 --seed 3"))
              .exit_code == 0);
  REQUIRE(run_xgrad(words("train --config " + (dir / "a/config.json").string() + " --out " + (dir / "b").string()))
              .exit_code == 0);
  CHECK(metrics_without_timing(dir / "a") == metrics_without_timing(dir / "b"));
  auto config_of = [&](const std::string& run) {
    std::ifstream in(dir / run / "config.json");
    return nlohmann::json::parse(in);
  };
  nlohmann::json a = config_of("a"), b = config_of("b");
  CHECK(b.at("momentum") == 0.5);
  CHECK(b.at("seq_len") == 8);
  CHECK(b.at("data_seed") == 3);  // from the file, not reset to the seed's default
  for (auto* j : {&a, &b}) j->erase("out"), j->erase("environment");
  CHECK(a == b);
  // A flag overrides the file; selecting another task drops the file's copy settings instead of refusing them.
  REQUIRE(run_xgrad(words("train --config " + (dir / "a/config.json").string() + " --out " + (dir / "c").string() +
                          " --task kv_recall --n-pairs 4 --steps 3"))
              .exit_code == 0);
  const nlohmann::json c = config_of("c");
  CHECK(c.at("task") == "kv_recall");
  CHECK(c.at("n_pairs") == 4);
  CHECK(c.at("steps") == 3);
  CHECK(c.at("momentum") == 0.5);
  CHECK_FALSE(c.contains("n_symbols"));
  // One name per idea: derived values apart from the settings of the same name.
  CHECK(a.at("derived").at("seq_len") == 8);
  CHECK(a.at("derived").at("vocab_size") == 6);
  CHECK_FALSE(a.contains("task_seq_len"));
  CHECK_FALSE(a.contains("head_dim"));
  fs::remove_all(dir);
}

TEST_CASE("sweep --grid: any setting is an axis; run names carry it, each child runs from its config file") {
  const fs::path dir = temp_dir("grid");
  REQUIRE(run_xgrad(words("sweep --out " + dir.string() +
                          " --d-k 4 --seeds 0 --scale none --arms sgd@0.1 --steps 3 "
                          "--batch-size 4 --grid d_model=8,16 --n-pairs 4"))
              .exit_code == 0);
  for (const char* run : {"dk4-none-sgd-lr0.1-d_model8-s0", "dk4-none-sgd-lr0.1-d_model16-s0"}) {
    INFO(run);
    CHECK(fs::exists(dir / "runs" / run / "summary.json"));
    std::ifstream in(dir / "configs" / (std::string(run) + ".json"));
    REQUIRE(in);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j.at("n_pairs") == 4);
    CHECK(j.at("d_k") == 4);
  }
  std::ifstream index(dir / "sweep.json");
  const nlohmann::json sweep = nlohmann::json::parse(index);
  REQUIRE(sweep.at("runs").size() == 2);
  CHECK(sweep.at("grid").at("d_model") == nlohmann::json::array({8, 16}));
  CHECK(sweep.at("runs").at(1).at("grid").at("d_model") == 16);
  // compare tells the arms apart by d_model.
  const ProcessResult compare = run_xgrad({"compare", dir.string(), "--plots", "false"});
  REQUIRE(compare.exit_code == 0);
  const std::string& text = compare.out;
  CHECK(text.find("d_model") != std::string::npos);
  // A grid axis that has its own flag, or a setting no run reads, is refused.
  CHECK(run_xgrad(words("sweep --out " + (dir / "x").string() + " --grid d_k=4,8")).exit_code == 2);
  CHECK(run_xgrad(words("sweep --out " + (dir / "x").string() + " --grid nonsense=1")).exit_code == 2);
  CHECK(run_xgrad(words("sweep --out " + (dir / "x").string() + " --task copy --n-keys 3")).exit_code == 2);
  fs::remove_all(dir);
}

TEST_CASE("a grid axis of only_readers varies the runs that read its setting; the others run once, without it") {
  TempDir tmp("only_readers");
  SweepConfig cfg;
  cfg.out = (tmp / "sweep").string();
  cfg.base.steps = 3;
  cfg.scales = {"none", "qk_norm"};
  cfg.d_ks = {16};
  cfg.seeds = {0};
  cfg.arms = {{"adamw", 0.001}};
  cfg.jobs = 1;
  cfg.grid = {{"qk_norm_scale", {"1", "inv_sqrt_dk"}, true}};
  const std::vector<SweepRun> runs = plan_sweep(cfg);
  std::vector<std::string> names;
  for (const SweepRun& r : runs) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"dk16-none-adamw-lr0.001-s0", "dk16-qk_norm-adamw-lr0.001-qk_norm_scale1-s0",
                                          "dk16-qk_norm-adamw-lr0.001-qk_norm_scaleinv_sqrt_dk-s0"});
  REQUIRE(runs.size() == 3);
  CHECK(!runs[0].config.settings.contains("qk_norm_scale"));
  CHECK(runs[0].grid.empty());
  CHECK(get_setting(runs[2].config, "qk_norm_scale") == "inv_sqrt_dk");
  CHECK(keeps_point(cfg, runs[0].config, runs[0].grid));
  CHECK(!keeps_point(cfg, runs[0].config, {{"qk_norm_scale", "inv_sqrt_dk"}}));
  // As a --grid axis (every run must read it) the same grid is refused, naming the scaling that reads it.
  cfg.grid.front().only_readers = false;
  CHECK_THROWS_WITH_AS(plan_sweep(cfg), doctest::Contains("qk_norm_scale"), ConfigError);
}

TEST_CASE("xgrad --version prints the version, the commit and the library versions, and exits 0") {
  const ProcessResult version = run_xgrad({"--version"});
  REQUIRE(version.exit_code == 0);
  const std::string& text = version.out;
  CHECK(text.rfind("xgrad ", 0) == 0);
  CHECK(text.find("(commit ") != std::string::npos);
  CHECK(text.find("openblas") != std::string::npos);
  CHECK(text.find("compiler") != std::string::npos);
}

TEST_CASE("help texts say what they mean: --version's thread counts, compare's outputs and --plots' default") {
  auto output = [](const std::string& args) { return run_xgrad(words(args), merged_output()).out; };
  const std::string version = output("--version");
  INFO(version);
  // The process's BLAS thread count is not what a run uses: a run sets --threads (default 1).
  CHECK(version.find("blas_threads: ") != std::string::npos);
  CHECK(version.find("a run uses --threads, default 1") != std::string::npos);
  const std::string help = output("compare --help");
  INFO(help);
  CHECK(help.find("report.md and report.html") != std::string::npos);
  CHECK(help.find("--plots") != std::string::npos);
  // A boolean's default reads "true", never "1": CLI11 2.1 prints it as "=true", 2.4 as "[true]".
  CHECK((help.find("=true") != std::string::npos || help.find("[true]") != std::string::npos));
  CHECK(help.find("=1 ") == std::string::npos);
  CHECK(help.find("[1]") == std::string::npos);
}

TEST_CASE(
    "probe --help offers no scaling's setting: it measures unscaled and 1/sqrt(d_k) only; explain's --scale does") {
  const auto options_of = [](const std::string& command) {  // --help up to "Not taken by this command", and after
    const std::string help = run_xgrad({command, "--help"}, merged_output()).out;
    const auto at = help.find("Not taken by this command");
    return std::pair{help.substr(0, at), at == std::string::npos ? "" : help.substr(at)};
  };
  const auto [probe_options, probe_refused] = options_of("probe");
  const auto [explain_options, explain_refused] = options_of("explain");
  std::size_t scaling_settings = 0;
  for (const ComponentSetting& c : component_settings()) {
    if (c.component != "scale" || std::count(c.owners.begin(), c.owners.end(), "none") ||
        std::count(c.owners.begin(), c.owners.end(), "sqrt_dk"))
      continue;
    ++scaling_settings;
    const std::string flag = c.setting.flag() + " ";
    INFO(flag);
    CHECK(probe_options.find(flag) == std::string::npos);
    CHECK(probe_refused.find(flag) != std::string::npos);
    CHECK(explain_options.find(flag) != std::string::npos);
  }
  CHECK(scaling_settings > 0);  // softcap_cap, qk_clip_tau, ...
  const ProcessResult refused = run_xgrad({"probe", "--softcap-cap", "30"}, merged_output());
  CHECK(refused.exit_code == 2);
  CHECK(refused.out.find("--softcap-cap: probe") != std::string::npos);
}

TEST_CASE("the CLI: bad usage exits 2, an experiment runs end to end") {
  const fs::path dir = temp_dir("cli");
  CHECK(run_xgrad(words("")).exit_code == 2);
  CHECK(run_xgrad(words("bogus")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --scale sqrt")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --d-model 10 --n-heads 3")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --lr -1")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --optimizer adam")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --steps abc")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + dir.string() + " --n-keys 4 --n-pairs 8")).exit_code == 2);
  CHECK(run_xgrad(words("train")).exit_code == 2);  // --out is required
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --d-k 4,8 --seeds 0,1 --arms adamw@0.003 --steps 3"))
            .exit_code == 0);
  for (const char* run :
       {"dk4-sqrt_dk-adamw-lr0.003-s0", "dk4-none-adamw-lr0.003-s1", "dk8-sqrt_dk-adamw-lr0.003-s1"}) {
    CHECK(fs::exists(dir / "runs" / run / "metrics.csv"));
    CHECK(fs::exists(dir / "runs" / run / "summary.json"));
  }
  std::ifstream index(dir / "sweep.json");
  const auto j = nlohmann::json::parse(index);
  CHECK(j.at("runs").size() == 8);
  for (const auto& r : j.at("runs")) CHECK(r.at("status") == "complete");
  // Scaled and unscaled runs of one seed share the weight seed and the data stream (equal weights for equal seeds
  // are checked in test_nn); seed k reads data stream k.
  std::ifstream a(dir / "runs/dk8-sqrt_dk-adamw-lr0.003-s1/config.json"),
      b(dir / "runs/dk8-none-adamw-lr0.003-s1/config.json");
  const auto ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
  CHECK(ja.at("seed") == jb.at("seed"));
  CHECK(ja.at("data_seed") == jb.at("data_seed"));
  CHECK(ja.at("data_seed") == 1);
  CHECK(ja.at("d_k") == 8);
  CHECK(ja.at("d_model") == 64);
  // Running the same sweep again skips every complete run; a duplicate value is bad usage.
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --d-k 4,8 --seeds 0,1 --arms adamw@0.003 --steps 3"))
            .exit_code == 0);
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --d-k 4,4 --steps 3")).exit_code == 2);
  // The same directory with other settings is refused rather than overwritten.
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --d-k 4,8 --seeds 0,1 --arms adamw@0.003 --steps 4"))
            .exit_code == 2);
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --arms adam@0.1 --steps 3")).exit_code == 2);
  CHECK(run_xgrad(words("sweep --out " + dir.string() + " --arms sgd@-1 --steps 3")).exit_code == 2);
  CHECK(run_xgrad(words("train --out " + (dir / "runs/dk4-none-adamw-lr0.003-s0").string())).exit_code ==
        2);  // holds a run already
  fs::remove_all(dir);
}

TEST_CASE("--lr and --clip-grad-norm must be normal floats: 1e-300 would become 0.0f and train nothing") {
  TrainConfig c;
  c.out = "x";
  for (double lr : {1e-300, 1e-46, 1e-38, 1e39}) {
    c.lr = lr;
    CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("--lr must be in [1.17549435e-38, 3.40282347e+38]"),
                         ConfigError);
  }
  c.lr = 1.17549435e-38;
  CHECK_NOTHROW(c.validate());
  c.lr = 3e-3;
  for (double clip : {1e-300, 1e-46}) {
    c.clip_grad_norm = clip;
    CHECK_THROWS_WITH_AS(c.validate(),
                         doctest::Contains("--clip-grad-norm must be 0 or at least 1.17549435e-38 in magnitude"),
                         ConfigError);
  }
  c.clip_grad_norm = 0;
  CHECK_NOTHROW(c.validate());
  c.clip_grad_norm = 1e-30;
  CHECK_NOTHROW(c.validate());
}

TEST_CASE("summary.json of a run that diverged at step 0 (null losses and means) reads back as NaN") {
  RunSummary s;
  s.first_loss = NAN;
  s.final_loss = NAN;
  s.mean_grad_norm_w_q = NAN;
  s.mean_grad_norm_w_k = NAN;
  s.frac_zero_grad_w_q = NAN;
  s.frac_zero_grad_w_k = NAN;
  s.diverged = true;
  s.diverged_step = 0;
  s.steps_done = 1;
  const nlohmann::json j = nlohmann::json::parse(s.to_json().dump());
  CHECK(j.at("first_loss").is_null());
  const RunSummary r = RunSummary::from_json(j);
  CHECK(std::isnan(r.first_loss));
  CHECK(std::isnan(r.mean_grad_norm_w_q));
  CHECK(std::isnan(r.frac_zero_grad_w_k));
  CHECK(r.diverged);
  CHECK(r.diverged_step == 0);
}

namespace {
SweepConfig tiny_sweep(const fs::path& out) {
  SweepConfig s;
  s.base.steps = 2;
  s.base.batch_size = 2;
  s.base.print_every = 1000;
  s.d_ks = {4};
  s.seeds = {0};
  s.scales = {"none"};
  s.arms = {{"sgd", 0.1}};
  s.jobs = 1;
  s.out = out.string();
  s.executable = XGRAD_BIN;
  return s;
}
}  // namespace

TEST_CASE("sweep: a run that diverges at step 0 is recorded as diverged and the sweep finishes") {
  const fs::path dir = temp_dir("sweep_div0");
  SweepConfig s = tiny_sweep(dir);
  s.base.model.proj_init_gain = 1e23;
  const auto runs = run_sweep(s, nullptr).runs;
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == SweepStatus::diverged);
  CHECK(runs[0].diverged_step == 0);
  std::ifstream index(dir / "sweep.json");
  CHECK(nlohmann::json::parse(index).at("runs").at(0).at("status") == "diverged");
  // Run again: the diverged run is complete (skipped), not redone forever.
  const auto again = run_sweep(s, nullptr).runs;
  CHECK(again[0].status == SweepStatus::skipped);
  CHECK(again[0].diverged_step == 0);
  fs::remove_all(dir);
}

TEST_CASE(
    "sweep: a sweep into an earlier sweep's --out with other settings is refused naming the setting; one adding "
    "seeds keeps the earlier runs in the index") {
  const fs::path dir = temp_dir("sweep_other_settings");
  const SweepConfig first = tiny_sweep(dir);
  REQUIRE(run_sweep(first, nullptr).runs.at(0).status == SweepStatus::complete);
  SweepConfig other = tiny_sweep(dir);
  other.seeds = {1};
  other.base.steps = 3;
  // The refusal of `other` in dir: "--out: <dir> holds a sweep <what>; use a new --out for a sweep with <use>".
  const auto refused = [&](const std::string& what, const std::string& use) {
    CHECK_THROWS_WITH_AS(
        run_sweep(other, nullptr),
        ("--out: " + dir.string() + " holds a sweep " + what + "; use a new --out for a sweep " + use).c_str(),
        ConfigError);
  };
  refused("with --steps 2 (this one: 3)", "with other settings");
  other.base.steps = first.base.steps;
  other.grid = {GridAxis{"n_layers", {1, 2}}};
  refused("over --grid (none) (this one: n_layers)", "over other axes");
  other.grid.clear();
  other.base.print_every = 7;  // how a run reports progress is not another setting
  const auto runs = run_sweep(other, nullptr).runs;
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == SweepStatus::complete);
  std::ifstream in(dir / "sweep.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  REQUIRE(index.at("runs").size() == 2);
  // In manifest order: the earlier sweep's run keeps grid point 0, the added seed is point 1.
  CHECK(index.at("runs").at(0).at("name") == "dk4-none-sgd-lr0.1-s0");
  CHECK(index.at("runs").at(0).at("index") == 0);
  CHECK(index.at("runs").at(0).at("status") == "complete");
  CHECK(index.at("runs").at(1).at("name") == "dk4-none-sgd-lr0.1-s1");
  CHECK(index.at("runs").at(1).at("index") == 1);
  fs::remove_all(dir);
}

TEST_CASE("sweep: --out holding an `xgrad train` run is refused; runs that cannot start are failed, not fatal") {
  const fs::path dir = temp_dir("sweep_into_run");
  TrainConfig c = tiny_run(dir.string(), 2);
  c.model.d_model = 8;
  xgrad::train::train(c);
  CHECK_THROWS_WITH_AS(
      run_sweep(tiny_sweep(dir), nullptr),
      doctest::Contains(("--out: " + dir.string() + " holds an `xgrad train` run (config.json)").c_str()), ConfigError);
  CHECK_FALSE(fs::exists(dir / "sweep.json"));
  CHECK_FALSE(fs::exists(dir / "runs"));
  fs::remove_all(dir);

  // A regular file where every run directory must go: each run fails to start, the sweep still ends normally.
  const fs::path sg = temp_dir("sweep_blocked");
  SweepConfig s = tiny_sweep(sg);
  s.seeds = {0, 1};
  fs::create_directories(sg / "runs");
  for (const char* name : {"dk4-none-sgd-lr0.1-s0", "dk4-none-sgd-lr0.1-s1"}) std::ofstream(sg / "runs" / name) << "x";
  std::vector<SweepRun> runs;
  CHECK_NOTHROW(runs = run_sweep(s, nullptr).runs);
  REQUIRE(runs.size() == 2);
  for (const auto& r : runs) CHECK(r.status == SweepStatus::failed);
  std::ifstream index(sg / "sweep.json");
  const auto sweep_json =
      nlohmann::json::parse(index);  // named: a range-for over parse(...).at() reads a dead temporary
  for (const auto& r : sweep_json.at("runs")) CHECK(r.at("status") == "failed");
  fs::remove_all(sg);
}

TEST_CASE("train() gives its caller back the floating-point control it found: subnormals still count afterwards") {
  // Training flushes subnormals on its thread (flush_denormals); a program that trains and then reads numbers (a
  // report of 1e-310, a gradient check) must not find them zeroed after train() returned, or after it threw.
  volatile double tiny = 1e-310, one = 1.0;
  REQUIRE(tiny * one > 0.0);
  TrainConfig c = tiny_run(temp_dir("fp_control").string(), 2);
  c.model.d_model = 8;
  c.flush_denormals = true;
  xgrad::train::train(c);
  CHECK(tiny * one > 0.0);
  c.resume = true;
  c.steps = 1;  // fewer steps than the run has: refused after the flush bits were set
  CHECK_THROWS(xgrad::train::train(c));
  CHECK(tiny * one > 0.0);
}

TEST_CASE("train says at the start how much disk its metrics.csv and checkpoint will take, beside the memory") {
  const fs::path dir = temp_dir("disk_estimate");
  fs::remove_all(dir);
  fs::create_directories(dir);
  // 64 layers of 64 heads: 43,290 columns, about half a megabyte per logged row.
  const ProcessResult train = run_xgrad({"train",
                                         "--out",
                                         (dir / "run").string(),
                                         "--task",
                                         "copy",
                                         "--seq-len",
                                         "4",
                                         "--n-symbols",
                                         "4",
                                         "--d-model",
                                         "64",
                                         "--n-heads",
                                         "64",
                                         "--n-layers",
                                         "64",
                                         "--batch-size",
                                         "1",
                                         "--steps",
                                         "3",
                                         "--print-every",
                                         "1000"},
                                        merged_output());
  const std::string& log = train.out;
  INFO(log);
  REQUIRE(train.signal == 0);
  REQUIRE(train.exit_code == 0);
  const std::size_t at = log.find("estimate: memory about ");
  REQUIRE(at != std::string::npos);
  CHECK(log.find("training copy") < at);  // at the start, before any step
  std::smatch m;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  REQUIRE(std::regex_search(line, m,
                            std::regex(R"(disk about ([0-9.]+) MB \(3 rows of metrics.csv, ([0-9.]+) kB per )"
                                       R"(logged row; checkpoint )")));
  const double disk_mb = std::stod(m[1]), row_kb = std::stod(m[2]);
  const double csv_mb = static_cast<double>(fs::file_size(dir / "run" / "metrics.csv")) / 1e6;
  const double ckpt_mb = static_cast<double>(fs::file_size(dir / "run" / "checkpoint.safetensors")) / 1e6;
  CHECK(row_kb > 300);                       // visible: hundreds of kB per row
  CHECK(disk_mb >= csv_mb + 0.5 * ckpt_mb);  // an upper estimate of what was written...
  CHECK(disk_mb <= 3 * (csv_mb + ckpt_mb));  // ...of the right size
  fs::remove_all(dir);
}

TEST_CASE("rows of steps that are not measured leave the measured-only cells empty, and read as the same numbers") {
  TrainConfig c = tiny_run(temp_dir("short_rows").string(), 40);
  c.model.n_heads = 8;
  c.model.n_layers = 2;
  c.log_every = 20;
  fs::remove_all(c.out);
  xgrad::train::train(c);
  const fs::path csv = fs::path(c.out) / "metrics.csv";
  const std::string text = xgrad::testing::read_text(csv);
  // The same rows as the earlier form wrote them: nan in every measured-only cell of an unmeasured row.
  std::string with_nan;
  {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::string out;
      for (std::size_t i = 0; i < line.size(); ++i) {
        const bool cell_start = i == 0 || line[i - 1] == ',';
        if (cell_start && line[i] == ',') out += "nan";
        out += line[i];
      }
      if (!line.empty() && line.back() == ',') out += "nan";
      with_nan += out + "\n";
    }
  }
  const fs::path old_csv = fs::path(c.out) / "metrics_with_nan.csv";
  std::ofstream(old_csv) << with_nan;
  CHECK(text.size() * 10 < with_nan.size() * 7);  // 37 of the 40 rows are not measured: the file shrinks
  MetricsReader now(csv.string()), before(old_csv.string());
  std::size_t rows = 0, nan_cells = 0;
  while (now.next()) {
    REQUIRE(before.next());
    ++rows;
    CHECK(now.malformed_cells() == 0);  // an empty cell is "not measured", not a broken one
    for (std::size_t i = 0; i < now.cells().size(); ++i) {
      const double a = now.cells()[i], b = before.cells()[i];
      CHECK(((std::isnan(a) && std::isnan(b)) || a == b));
      nan_cells += std::isnan(a) ? 1 : 0;
    }
  }
  CHECK_FALSE(before.next());
  CHECK(rows == 40);
  CHECK(nan_cells > 0);
  fs::remove_all(c.out);
}

TEST_CASE("XGRAD_SGEMM_COUNT: the sgemm calls of the steps without statistics, by shape, per counted step") {
  TrainConfig c;
  c.model.d_model = 8;
  c.steps = 6;
  c.log_every = 1000;  // statistics at steps 0 and 5 only: steps 1-4 are counted
  const fs::path dir = temp_dir("sgemm_count"), file = dir / "sgemm.csv";
  fs::create_directories(dir);
  setenv("XGRAD_SGEMM_COUNT", file.c_str(), 1);
  trained_into(c, "sgemm_count_run");
  unsetenv("XGRAD_SGEMM_COUNT");
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  CHECK(line == "steps,trans_a,trans_b,m,n,k,calls");
  std::size_t rows = 0;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<long> v;
    for (std::string cell; std::getline(ss, cell, ',');) v.push_back(std::stol(cell));
    REQUIRE(v.size() == 7);
    CHECK(v[0] == 4);
    CHECK(v[6] % 4 == 0);  // every counted step issues the same calls
    ++rows;
  }
  CHECK(rows >= 3);  // at least one product and its two gradients
  fs::remove(file);
  trained_into(c, "sgemm_count_unset");  // unset: nothing written
  CHECK_FALSE(fs::exists(file));
}
