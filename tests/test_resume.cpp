// Determinism and recovery: a run is bit-identical to itself (one BLAS thread), and a run killed at an arbitrary
// step (SIGKILL), or stopped by SIGTERM, then resumed writes the same metrics.csv as one never interrupted.
// Every comparison of metrics.csv leaves out step_ms, the only column that is wall time.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"
#include "tests/support/fault_hooks.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/small_disk.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/run_checkpoint.h"
#include "train/run_directory.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::train;
namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

std::size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

nlohmann::json summary_without_time(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j.erase("wall_seconds");
  return j;
}

std::size_t checkpoint_step(const fs::path& dir) {
  return std::stoul(nn::load_checkpoint((dir / kCheckpointFile).string()).meta("step"));
}

// Starts `xgrad train`, waits until metrics.csv holds `rows` data rows, then sends `signal` (the child may have run
// a few steps further by then: the point is an arbitrary step). Returns how it ended.
ProcessResult interrupt_at(const std::vector<std::string>& args, const fs::path& dir, std::size_t rows, int signal) {
  Process train(xgrad_command(args));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(dir / "metrics.csv") < rows + 1 && std::chrono::steady_clock::now() < deadline) {
    if (train.ended()) return train.wait();  // finished before the signal
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  train.send(signal);
  return train.wait();
}

std::vector<std::string> run_args(const fs::path& dir, const std::string& optimizer) {
  // Thinned statistics (every 7th row), held-out loss every 13th, checkpoints every 25: none of them line up, so a
  // resume lands between thinned and eval rows.
  return {"train",
          "--out",
          dir.string(),
          "--d-model",
          "32",
          "--steps",
          "200",
          "--optimizer",
          optimizer,
          "--lr",
          optimizer == "sgd" ? "0.05" : "0.003",
          "--log-every",
          "7",
          "--eval-every",
          "13",
          "--checkpoint-every",
          "25",
          "--print-every",
          "1000",
          "--threads",
          "1"};
}

}  // namespace

TEST_CASE("determinism: two runs of one configuration (one thread) write the same metrics.csv and summary.json") {
  TrainConfig c = tiny_run(temp_dir("det_a").string(), 40);
  c.log_every = 3;
  c.eval_every = 7;
  xgrad::train::train(c);
  TrainConfig d = c;
  d.out = temp_dir("det_b").string();
  xgrad::train::train(d);
  CHECK(metrics_without_timing(c.out) == metrics_without_timing(d.out));
  CHECK(summary_without_time(c.out) == summary_without_time(d.out));
  // The checkpoints agree too, apart from the time already spent.
  nn::Checkpoint a = nn::load_checkpoint((fs::path(c.out) / kCheckpointFile).string());
  nn::Checkpoint b = nn::load_checkpoint((fs::path(d.out) / kCheckpointFile).string());
  a.metadata.erase("progress.wall_seconds");
  b.metadata.erase("progress.wall_seconds");
  a.metadata.erase("config");  // names the run directory
  b.metadata.erase("config");
  CHECK(a.metadata == b.metadata);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) CHECK(a.tensors[i] == b.tensors[i]);
  fs::remove_all(c.out);
  fs::remove_all(d.out);
}

TEST_CASE("a run killed with SIGKILL at an arbitrary step and resumed writes the uninterrupted metrics.csv") {
  // The kill step varies from run to run of this test; it is printed on failure.
  std::mt19937 rng(static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (const std::string optimizer : {"adamw", "sgd", "muon"}) {
    const fs::path whole = temp_dir("whole_" + optimizer), cut = temp_dir("cut_" + optimizer);
    REQUIRE(run_xgrad(run_args(whole, optimizer)).exit_code == 0);
    const std::size_t kill_row = std::uniform_int_distribution<std::size_t>(26, 180)(rng);
    INFO(optimizer << ": SIGKILL once metrics.csv holds " << kill_row << " rows");
    const ProcessResult ended = interrupt_at(run_args(cut, optimizer), cut, kill_row, SIGKILL);
    CHECK(ended.signal != 0);
    CHECK_FALSE(fs::exists(cut / "summary.json"));
    const std::size_t resumed_at = checkpoint_step(cut);
    INFO("checkpoint at step " << resumed_at << ", metrics.csv had " << count_lines(cut / "metrics.csv") - 1
                               << " rows");
    CHECK(resumed_at >= 25);
    CHECK(resumed_at % 25 == 0);
    REQUIRE(run_xgrad({"train", "--resume", cut.string()}).exit_code == 0);
    CHECK(count_lines(cut / "metrics.csv") == 201);
    CHECK(metrics_without_timing(cut) == metrics_without_timing(whole));
    CHECK(summary_without_time(cut) == summary_without_time(whole));
    fs::remove_all(whole);
    fs::remove_all(cut);
  }
}

TEST_CASE("SIGTERM: the run writes a checkpoint at the step it reached, ends by SIGTERM, and resumes identically") {
  const fs::path whole = temp_dir("term_whole"), cut = temp_dir("term_cut");
  REQUIRE(run_xgrad(run_args(whole, "adamw")).exit_code == 0);
  const ProcessResult ended = interrupt_at(run_args(cut, "adamw"), cut, 60, SIGTERM);
  REQUIRE(ended.signal != 0);  // re-raised after the checkpoint: a shell sees 143
  CHECK(ended.signal == SIGTERM);
  CHECK_FALSE(fs::exists(cut / "summary.json"));
  // The checkpoint is at exactly the last row written: nothing is computed twice.
  CHECK(checkpoint_step(cut) == count_lines(cut / "metrics.csv") - 1);
  CHECK(checkpoint_step(cut) >= 60);
  REQUIRE(run_xgrad({"train", "--resume", cut.string()}).exit_code == 0);
  CHECK(metrics_without_timing(cut) == metrics_without_timing(whole));
  CHECK(summary_without_time(cut) == summary_without_time(whole));
  fs::remove_all(whole);
  fs::remove_all(cut);
}

TEST_CASE("resume: raising --steps continues a finished run as if it had been planned longer") {
  TrainConfig c = tiny_run(temp_dir("raise").string(), 30);
  c.checkpoint_every = 8;
  xgrad::train::train(c);
  TrainConfig longer = c;
  longer.steps = 50;
  longer.resume = true;
  xgrad::train::train(longer);
  TrainConfig whole = c;
  whole.steps = 50;
  whole.out = temp_dir("raise_whole").string();
  xgrad::train::train(whole);
  // With statistics on every row and no held-out loss, the old last row is an ordinary row.
  CHECK(metrics_without_timing(c.out) == metrics_without_timing(whole.out));
  nlohmann::json a = summary_without_time(c.out), b = summary_without_time(whole.out);
  CHECK(a == b);
  fs::remove_all(c.out);
  fs::remove_all(whole.out);
}

TEST_CASE("resume: a run with no checkpoint yet starts again; a cut-short last row is dropped") {
  TrainConfig c = tiny_run(temp_dir("nockpt").string(), 20);
  c.checkpoint_every = 0;
  xgrad::train::train(c);
  const auto expected = metrics_without_timing(c.out);
  // As if killed before the first checkpoint, halfway through writing a row.
  fs::remove(fs::path(c.out) / kCheckpointFile);
  fs::remove(fs::path(c.out) / "summary.json");
  {
    std::ofstream out(fs::path(c.out) / "metrics.csv", std::ios::app);
    out << "20,1.2345";
  }
  TrainConfig r = c;
  r.resume = true;
  xgrad::train::train(r);
  CHECK(metrics_without_timing(c.out) == expected);

  // Killed after a checkpoint at step 10, with rows up to step 15 and half a row written.
  c.checkpoint_every = 10;
  c.overwrite = true;
  xgrad::train::train(c);
  const fs::path ckpt = fs::path(c.out) / kCheckpointFile;
  TrainConfig ten = c;
  ten.steps = 10;
  ten.out = temp_dir("nockpt_ten").string();
  ten.overwrite = false;
  xgrad::train::train(ten);
  fs::copy_file(fs::path(ten.out) / kCheckpointFile, ckpt, fs::copy_options::overwrite_existing);
  {
    const std::string text = read_text(fs::path(c.out) / "metrics.csv");
    std::size_t pos = 0;
    for (int line = 0; line < 17; ++line) pos = text.find('\n', pos) + 1;  // header + 16 rows
    std::ofstream out(fs::path(c.out) / "metrics.csv", std::ios::binary | std::ios::trunc);
    out << text.substr(0, pos) << "16,0.5";
  }
  r.checkpoint_every = 10;
  xgrad::train::train(r);
  CHECK(metrics_without_timing(c.out) == expected);
  fs::remove_all(c.out);
  fs::remove_all(ten.out);
}

TEST_CASE("resume: a run the disk filled before its metrics.csv header was whole starts over from step 0") {
  TrainConfig c = tiny_run(temp_dir("full_disk_header").string(), 6);
  xgrad::train::train(c);
  const auto expected = metrics_without_timing(c.out);
  const fs::path metrics = fs::path(c.out) / "metrics.csv";
  const std::string text = read_text(metrics);
  const std::string header = text.substr(0, text.find('\n'));
  // What a full disk leaves: config.json written, metrics.csv created with none, part or all of its header line but
  // not its newline, no checkpoint, no summary.
  for (const std::string& left : {std::string(), header.substr(0, header.size() / 2), header}) {
    fs::remove(fs::path(c.out) / kCheckpointFile);
    fs::remove(fs::path(c.out) / "summary.json");
    std::ofstream(metrics, std::ios::binary | std::ios::trunc) << left;
    TrainConfig r = c;
    r.resume = true;
    INFO("metrics.csv held " << left.size() << " bytes");
    RunSummary s;
    CHECK_NOTHROW(s = xgrad::train::train(r));
    CHECK(s.steps_done == 6);
    CHECK(metrics_without_timing(c.out) == expected);
  }
  fs::remove_all(c.out);
}

TEST_CASE("a full disk: a write error names the run file and the cause; the run left behind resumes and finishes") {
  const TempDir dir("resume_full_disk");
  const SmallDisk disk(dir / "disk", 4 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path run = dir / "disk" / "run";
  const std::string no_space = std::strerror(ENOSPC);
  struct FullAt {
    std::size_t pages_left;  // tmpfs pages free when the run starts
    std::string checkpoint_every, file;
    bool header_cut = false;  // the disk is full before metrics.csv's header line is whole
  };
  // A page each for .lock, config.json (under 2 kB) and metrics.csv's header (under 2 kB) with its first row; four
  // more rows (under 1 kB each) a page; the checkpoint takes 8 pages (32 kB).
  for (const FullAt& at : {FullAt{1, "0", "config.json"}, FullAt{2, "0", "metrics.csv", true},
                           FullAt{4, "0", "metrics.csv"}, FullAt{8, "1", kCheckpointFile}}) {
    fs::remove_all(run);
    disk.fill_leaving(at.pages_left * 4096);
    const std::vector<std::string> args{"train",   "--out", run.string(),         "--d-model",         "8",
                                        "--steps", "40",    "--checkpoint-every", at.checkpoint_every, "--print-every",
                                        "1000"};
    const ProcessResult full = run_xgrad(args);
    INFO(at.pages_left << " pages free; xgrad said: " << full.err);
    CHECK(full.exit_code == 1);
    CHECK(full.err.find((run / at.file).string()) != std::string::npos);
    CHECK(full.err.find(no_space) != std::string::npos);
    if (at.header_cut) CHECK(read_text(run / "metrics.csv").find('\n') == std::string::npos);
    // With space again, what was left goes on: resumed when it holds a config.json (from step 0 without a
    // checkpoint), else the same command again.
    disk.empty_fill();
    const ProcessResult again =
        run_xgrad(fs::exists(run / "config.json") ? std::vector<std::string>{"train", "--resume", run.string()} : args);
    INFO("then: " << again.err);
    CHECK(again.exit_code == 0);
    CHECK(fs::exists(run / "summary.json"));
    CHECK(count_lines(run / "metrics.csv") == 41);
  }
}

TEST_CASE("a full disk while a resume cuts metrics.csv back to its checkpoint: the old file is left whole") {
  const TempDir dir("resume_full_disk_cut");
  const SmallDisk disk(dir / "disk", 4 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path run = dir / "disk" / "run";
  REQUIRE(run_xgrad({"train", "--out", run.string(), "--d-model", "8", "--steps", "40", "--checkpoint-every", "10",
                     "--print-every", "1000"})
              .exit_code == 0);
  const std::string metrics = read_text(run / "metrics.csv");
  // Two pages free: enough to replace config.json, not for the 40 rows (about 9 pages) the cut copies.
  disk.fill_leaving(2 * 4096);
  const ProcessResult full = run_xgrad({"train", "--resume", run.string(), "--steps", "50"});
  INFO("xgrad said: " << full.err);
  CHECK(full.exit_code == 1);
  CHECK(full.err.find((run / "metrics.csv").string()) != std::string::npos);
  CHECK(full.err.find(std::strerror(ENOSPC)) != std::string::npos);
  CHECK(read_text(run / "metrics.csv") == metrics);
  CHECK(leftover_partial_writes(run).empty());
  disk.empty_fill();
  CHECK(run_xgrad({"train", "--resume", run.string(), "--steps", "50"}).exit_code == 0);
  CHECK(count_lines(run / "metrics.csv") == 51);
}

// What `xgrad train --resume` with `r` says when it refuses (empty: it resumed).
static std::string resume_error(TrainConfig r) {
  r.resume = true;
  try {
    xgrad::train::train(r);
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::string("");
}

TEST_CASE("resume refuses what would not continue the same run, naming the flag") {
  TrainConfig c = tiny_run(temp_dir("refuse").string());
  xgrad::train::train(c);
  TrainConfig r = c;
  r.model.d_model = 32;
  CHECK(resume_error(r).find("--d-model: the run in") != std::string::npos);
  r = c;
  r.lr = 0.1;
  CHECK(resume_error(r).find("--lr:") != std::string::npos);
  r = c;
  r.model.scale = "none";
  CHECK(resume_error(r).find("--scale:") != std::string::npos);
  r.model.scale = "qk_clip";  // its --qk-clip-tau, a setting the run's sqrt_dk lacks, is "not set" there (not null)
  const std::string new_setting = resume_error(r);
  CHECK(new_setting.find("--qk-clip-tau: not set, not ") != std::string::npos);
  CHECK(new_setting.find("null") == std::string::npos);
  r = c;
  r.seed = 5;
  CHECK(resume_error(r).find("--seed:") != std::string::npos);
  // Every differing setting is named with both values, so that one command fixes them all.
  r.seed = 987654321;
  r.lr = 0.25;
  const std::string both = resume_error(r);
  for (const char* named : {"--seed", "987654321", "--lr", "0.25", "0.003"}) {
    CAPTURE(named);
    CHECK(both.find(named) != std::string::npos);
  }
  // Named as a setting the run keeps, not with advice for a new run ("give --scale dk") that would only lead here.
  r = c;
  r.model.parametrization = nn::Parametrization::mup;
  CHECK(resume_error(r).find("--parametrization: the run in") != std::string::npos);
  r = c;
  r.steps = 5;
  CHECK(resume_error(r).find("may raise --steps but not lower it") != std::string::npos);
  r.seed = 5;  // a lowered --steps is named beside a setting, not on the retry after fixing it
  const std::string seed_and_steps = resume_error(r);
  CHECK(seed_and_steps.find("--seed:") != std::string::npos);
  CHECK(seed_and_steps.find("--steps:") != std::string::npos);
  fs::remove_all(c.out);
}

TEST_CASE("resume refuses a run directory that cannot be continued, and takes what may change") {
  TrainConfig c = tiny_run(temp_dir("refuse_files").string());
  xgrad::train::train(c);
  TrainConfig r = c;
  r.overwrite = true;
  CHECK(resume_error(r).find("exclude each other") != std::string::npos);
  r = c;
  r.out = temp_dir("refuse_empty").string();
  fs::create_directories(r.out);
  CHECK(resume_error(r).find("holds no run") != std::string::npos);
  fs::remove_all(r.out);
  // What may change: print_every, threads, checkpoint_every, on_nan, and steps upwards.
  r = c;
  r.print_every = 3;
  r.checkpoint_every = 5;
  r.on_nan = train::OnNan::skip;
  r.steps = 14;
  CHECK(resume_error(r).empty());
  // A checkpoint without the metrics.csv it continues cannot be resumed either.
  const fs::path metrics = fs::path(c.out) / "metrics.csv";
  fs::rename(metrics, fs::path(c.out) / "metrics.csv.bak");
  CHECK(resume_error(r).find("metrics.csv is missing but the checkpoint is at step 14") != std::string::npos);
  fs::rename(fs::path(c.out) / "metrics.csv.bak", metrics);
  // A metrics.csv whose header was edited: the error names the first column that differs.
  {
    const std::string csv = read_text(metrics);
    std::ofstream(metrics, std::ios::trunc) << "steps" << csv.substr(csv.find(','));
    CHECK(resume_error(r).find("column 1 is 'steps' in the file but 'step' in this run") != std::string::npos);
    std::ofstream(metrics, std::ios::trunc) << csv;
  }
  // A corrupt checkpoint is a runtime error naming it.
  {
    std::ofstream out(fs::path(c.out) / kCheckpointFile, std::ios::binary | std::ios::trunc);
    out << "garbage";
  }
  CHECK(resume_error(r).find("cannot resume: safetensors:") != std::string::npos);
  // A new run never replaces an existing one without --overwrite.
  TrainConfig again = c;
  CHECK_THROWS_WITH_AS(xgrad::train::train(again), doctest::Contains("already holds a run"), ConfigError);
  fs::remove_all(c.out);
}

TEST_CASE("--init-from: a run starts from a checkpoint's weights; a file that does not fit is refused by name") {
  TrainConfig a = tiny_run(temp_dir("init_a").string(), 25);
  xgrad::train::train(a);
  const std::string source = (fs::path(a.out) / kCheckpointFile).string();
  const nn::Checkpoint trained = nn::load_checkpoint(source);

  // Stopped before its first step, run b's checkpoint holds exactly the weights it started from.
  TrainConfig b = a;
  b.seed = 7;
  b.init_from = source;
  b.out = temp_dir("init_b").string();
  request_stop(SIGTERM);
  CHECK(xgrad::train::train(b).stop_signal == SIGTERM);
  const nn::Checkpoint started = nn::load_checkpoint((fs::path(b.out) / kCheckpointFile).string());
  CHECK(started.meta("step") == "0");
  std::size_t compared = 0;
  for (const auto& [name, value] : started.tensors)
    if (name.rfind("model.", 0) == 0) {
      CHECK(value == *trained.find(name));
      ++compared;
    }
  CHECK(compared == 18);
  // The stop request was consumed: the next run trains normally, and its first loss is the trained model's.
  TrainConfig c = b;
  c.out = temp_dir("init_c").string();
  const RunSummary from_trained = xgrad::train::train(c);
  CHECK(from_trained.stop_signal == 0);
  TrainConfig fresh = c;
  fresh.init_from.clear();
  fresh.steps = 1;
  fresh.out = temp_dir("init_fresh").string();
  const RunSummary from_seed = xgrad::train::train(fresh);
  CHECK(from_trained.first_loss < from_seed.first_loss - 0.5);  // 25 steps of training show
  fs::remove_all(fresh.out);

  // A file of bare parameter names (no "model." prefix) is read too.
  nn::Checkpoint bare;
  for (const auto& [name, value] : trained.tensors)
    if (name.rfind("model.", 0) == 0) bare.add(name.substr(6), value);
  const fs::path bare_path = fs::path(a.out) / "bare.safetensors";
  nn::save_checkpoint(bare_path.string(), bare);
  TrainConfig d = b;
  d.init_from = bare_path.string();
  d.out = temp_dir("init_d").string();
  d.steps = 1;
  CHECK(xgrad::train::train(d).first_loss == from_trained.first_loss);

  auto init_error = [&](TrainConfig t) {
    t.out = temp_dir("init_err").string();
    std::string message;
    try {
      xgrad::train::train(t);
    } catch (const ConfigError& e) {
      message = e.what();
    }
    fs::remove_all(t.out);
    return message;
  };
  TrainConfig wider = b;
  wider.model.d_model = 32;
  CHECK(init_error(wider).find("--init-from: checkpoint " + source +
                               ": tensor 'model.tok_emb.weight' has shape [72, 16], the model needs [72, 32]") == 0);
  nn::Checkpoint partial = bare;
  partial.tensors.pop_back();
  nn::save_checkpoint(bare_path.string(), partial);
  TrainConfig missing = d;
  CHECK(init_error(missing).find("no tensor 'head.bias'") != std::string::npos);
  nn::Checkpoint extra = bare;
  extra.add("blocks.1.attn.w_q.weight", xt::zeros<float>({16, 16}));
  nn::save_checkpoint(bare_path.string(), extra);
  CHECK(init_error(missing).find("tensor 'blocks.1.attn.w_q.weight' is not a parameter of this model") !=
        std::string::npos);
  TrainConfig absent = b;
  absent.init_from = (fs::path(a.out) / "absent.safetensors").string();
  CHECK(init_error(absent).find("--init-from: '") == 0);
  for (const auto& dir : {a.out, b.out, c.out, d.out}) fs::remove_all(dir);
}

namespace {

// Console lines of the runs made while it lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() { spdlog::default_logger()->sinks().pop_back(); }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TrainConfig nan_run(const std::string& name) {
  TrainConfig c = tiny_run(temp_dir(name).string(), 20);
  c.checkpoint_every = 4;
  return c;
}

bool has_nan(const xt::xarray<float>& a) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isnan(a.data()[i])) return true;
  return false;
}

}  // namespace

TEST_CASE(
    "non-finite gradient, --on-nan stop: the run stops there, names the step and the parameter, and keeps "
    "the last good checkpoint beside a marked non-finite one") {
  TrainConfig c = nan_run("nan_stop");
  LogCapture log;
  const RunSummary s = xgrad::train::train(c, xgrad::testing::nan_gradient_at({6}));
  CHECK(s.diverged);
  CHECK(s.diverged_step == 6);
  CHECK(s.steps_done == 7);
  CHECK(std::isnan(s.final_loss));
  CHECK(count_lines(fs::path(c.out) / "metrics.csv") == 8);  // every row up to the failing one
  CHECK(log.text().find("diverged at step 6: ") != std::string::npos);
  CHECK(log.text().find("first non-finite: gradient of blocks.0.attn.w_q.weight") != std::string::npos);
  const nn::Checkpoint good = nn::load_checkpoint((fs::path(c.out) / kCheckpointFile).string());
  CHECK(good.meta("nonfinite") == "false");
  CHECK(good.meta("step") == "4");
  const nn::Checkpoint bad = nn::load_checkpoint((fs::path(c.out) / kNonfiniteCheckpointFile).string());
  CHECK(bad.meta("nonfinite") == "true");
  CHECK(bad.meta("step") == "6");  // the state before the failing step
  CHECK(has_nan(*bad.find("grad.blocks.0.attn.w_q.weight")));
  CHECK_FALSE(has_nan(*bad.find("grad.blocks.0.attn.w_k.weight")));
  // A non-finite checkpoint is not a place to resume from; the good one is, and with --on-nan skip the run goes on.
  std::ifstream in(fs::path(c.out) / "summary.json");
  CHECK(nlohmann::json::parse(in).at("diverged") == true);
  TrainConfig r = c;
  r.resume = true;
  r.on_nan = train::OnNan::skip;
  const RunSummary resumed = xgrad::train::train(r, xgrad::testing::nan_gradient_at({6}));
  CHECK_FALSE(resumed.diverged);
  CHECK(resumed.skipped_steps == 1);
  CHECK(count_lines(fs::path(c.out) / "metrics.csv") == 21);
  fs::remove_all(c.out);
}

TEST_CASE("--on-nan skip: the step's update is dropped, the row kept, the count reported; it resumes identically") {
  TrainConfig c = nan_run("nan_skip");
  c.on_nan = train::OnNan::skip;
  c.optimizer = "adamw";
  const RunSummary s = xgrad::train::train(c, xgrad::testing::nan_gradient_at({3, 9, 10}));
  CHECK_FALSE(s.diverged);
  CHECK(s.skipped_steps == 3);
  CHECK(s.steps_done == 20);
  CHECK(std::isfinite(s.final_loss));
  std::ifstream in(fs::path(c.out) / "summary.json");
  CHECK(nlohmann::json::parse(in).at("skipped_steps") == 3);
  // AdamW took 17 steps, and the skipped rows show no update.
  CHECK(nn::load_checkpoint((fs::path(c.out) / kCheckpointFile).string()).meta("optim.step") == "17");
  const auto table = read_text(fs::path(c.out) / "metrics.csv");
  std::istringstream lines(table);
  std::string header, line;
  std::getline(lines, header);
  std::vector<std::string> columns;
  {
    std::istringstream h(header);
    std::string col;
    while (std::getline(h, col, ',')) columns.push_back(col);
  }
  for (int row = 0; std::getline(lines, line); ++row) {
    std::istringstream cells(line);
    std::string cell;
    for (std::size_t i = 0; std::getline(cells, cell, ','); ++i)
      if (columns[i].rfind("update_rms/", 0) == 0) {
        INFO("row " << row << " " << columns[i]);
        CHECK((cell == "0") == (row == 3 || row == 9 || row == 10));
      }
  }
  // Interrupted after 12 steps (a skip streak behind it) and resumed: the same rows.
  TrainConfig part = c;
  part.steps = 12;
  part.out = temp_dir("nan_skip_part").string();
  xgrad::train::train(part, xgrad::testing::nan_gradient_at({3, 9, 10}));
  part.steps = 20;
  part.resume = true;
  CHECK(xgrad::train::train(part, xgrad::testing::nan_gradient_at({3, 9, 10})).skipped_steps == 3);
  CHECK(metrics_without_timing(part.out) == metrics_without_timing(c.out));
  CHECK(summary_without_time(part.out) == summary_without_time(c.out));
  fs::remove_all(c.out);
  fs::remove_all(part.out);
}

TEST_CASE("--on-nan skip stops after kMaxConsecutiveSkips non-finite steps in a row") {
  TrainConfig c = nan_run("nan_streak");
  c.on_nan = train::OnNan::skip;
  std::vector<std::size_t> nan_steps;
  for (std::size_t step = 5; step < 20; ++step) nan_steps.push_back(step);
  LogCapture log;
  const RunSummary s = xgrad::train::train(c, xgrad::testing::nan_gradient_at(nan_steps));
  CHECK(s.diverged);
  CHECK(s.diverged_step == static_cast<long>(5 + kMaxConsecutiveSkips - 1));
  CHECK(s.skipped_steps == kMaxConsecutiveSkips - 1);
  CHECK(log.text().find("non-finite steps in a row") != std::string::npos);
  fs::remove_all(c.out);
}

TEST_CASE("resume refuses a checkpoint that is not the run's: copied from another run, or config.json edited since") {
  TrainConfig a = tiny_run(temp_dir("foreign_a").string(), 6);
  xgrad::train::train(a);
  TrainConfig b = a;
  b.seed = 1;
  set_setting(b, "weight_decay", 0.5);
  b.out = temp_dir("foreign_b").string();
  xgrad::train::train(b);
  const fs::path ckpt = fs::path(a.out) / kCheckpointFile, config = fs::path(a.out) / "config.json";
  const std::string own = read_text(ckpt);
  fs::copy_file(fs::path(b.out) / kCheckpointFile, ckpt, fs::copy_options::overwrite_existing);
  TrainConfig r = a;
  r.resume = true;
  r.steps = 8;
  CHECK_THROWS_WITH_AS(
      xgrad::train::train(r),
      doctest::Contains(("--resume: --seed is 1 in " + ckpt.string() + " but 0 in " + config.string()).c_str()),
      ConfigError);
  // Every differing setting is named, each with both values.
  for (const char* named : {"--seed", "--weight-decay", "0.5"})
    CHECK_THROWS_WITH_AS(xgrad::train::train(r), doctest::Contains(named), ConfigError);
  CHECK(read_text(ckpt) != own);  // refused before anything was written
  {
    std::ofstream out(ckpt, std::ios::binary | std::ios::trunc);
    out << own;
  }
  // config.json edited after the checkpoint was written (xgrad train --resume reads its settings from config.json).
  nlohmann::json j = nlohmann::json::parse(read_text(config));
  j["lr"] = 0.5;
  {
    std::ofstream out(config, std::ios::trunc);
    out << j.dump(2);
  }
  r.lr = 0.5;
  CHECK_THROWS_WITH_AS(
      xgrad::train::train(r),
      doctest::Contains(("--resume: --lr is 0.003 in " + ckpt.string() + " but 0.5 in " + config.string()).c_str()),
      ConfigError);
  j["lr"] = 0.003;
  {
    std::ofstream out(config, std::ios::trunc);
    out << j.dump(2);
  }
  r.lr = 0.003;
  CHECK(xgrad::train::train(r).steps_done == 8);  // its own checkpoint and config still resume
  fs::remove_all(a.out);
  fs::remove_all(b.out);
}

TEST_CASE("resume without a checkpoint warns that it starts again from step 0 and how many rows it discards") {
  TrainConfig c = tiny_run(temp_dir("warn_nockpt").string(), 6);
  xgrad::train::train(c);
  fs::remove(fs::path(c.out) / kCheckpointFile);
  TrainConfig r = c;
  r.resume = true;
  {
    LogCapture log;
    xgrad::train::train(r);
    CHECK(log.text().find("warn") != std::string::npos);
    CHECK(log.text().find("holds no checkpoint.safetensors") != std::string::npos);
    CHECK(log.text().find("starting again from step 0 and restarting metrics.csv (6 rows discarded)") !=
          std::string::npos);
  }
  fs::remove_all(c.out);
}

TEST_CASE("a corrupt config.json is refused as bad usage naming the file and the key") {
  TrainConfig c = tiny_run(temp_dir("corrupt_config").string(), 3);
  c.model.d_model = 8;
  xgrad::train::train(c);
  const fs::path config = fs::path(c.out) / "config.json";
  const nlohmann::json good = nlohmann::json::parse(read_text(config));
  TrainConfig r = c;
  r.resume = true;
  auto write = [&](const std::string& text) {
    std::ofstream out(config, std::ios::trunc);
    out << text;
  };
  for (const auto& key_value_entry : std::vector<std::pair<std::string, nlohmann::json>>{{"steps", -3},
                                                                                         {"d_model", 2.5},
                                                                                         {"seed", -1},
                                                                                         {"threads", 1.5},
                                                                                         {"mlp", 1},
                                                                                         {"lr", nullptr},
                                                                                         {"d_model", "x"}}) {
    const auto& key = std::get<0>(key_value_entry);
    const auto& value = std::get<1>(key_value_entry);
    nlohmann::json j = good;
    j[key] = value;
    write(j.dump());
    INFO(key << " = " << value.dump());
    CHECK_THROWS_WITH_AS(
        xgrad::train::train(r),
        doctest::Contains((config.string() + ": '" + key + "' holds " + value.dump() + ", which is not").c_str()),
        ConfigError);
  }
  for (const std::string& text : {std::string(""), std::string("{\"d_model\": NaN}")}) {
    write(text);
    CHECK_THROWS_WITH_AS(xgrad::train::train(r),
                         doctest::Contains(("--resume: " + config.string() + " is not valid JSON").c_str()),
                         ConfigError);
  }
  fs::remove_all(c.out);
}

TEST_CASE("a run directory is locked while a process trains in it; a killed run leaves no stale lock") {
  const fs::path dir = temp_dir("lock");
  std::vector<std::string> args{"train",  "--out",         dir.string(), "--d-model",          "32", "--steps",
                                "100000", "--print-every", "100000",     "--checkpoint-every", "5",  "--threads",
                                "1"};
  Process train(xgrad_command(args));
  const pid_t pid = train.pid();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir / kCheckpointFile) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(dir / kCheckpointFile));
  TrainConfig r;
  r.model.d_model = 32;
  r.steps = 100000;
  r.out = dir.string();
  r.resume = true;
  CHECK_THROWS_WITH_AS(
      xgrad::train::train(r),
      doctest::Contains(("--out/--resume: " + dir.string() + " is being written by another xgrad process (pid " +
                         std::to_string(pid) + ")")
                            .c_str()),
      ConfigError);
  TrainConfig o = r;
  o.resume = false;
  o.overwrite = true;
  CHECK_THROWS_WITH_AS(xgrad::train::train(o), doctest::Contains("is being written by another xgrad process"),
                       ConfigError);
  CHECK(run_xgrad({"train", "--resume", dir.string()}).exit_code == 2);
  train.send(SIGKILL);
  train.wait();
  // The kernel released the lock with the process: the run resumes (and stops at once, asked to beforehand).
  const std::size_t at = checkpoint_step(dir);
  TrainConfig again = TrainConfig::from_json(nlohmann::json::parse(read_text(dir / "config.json")), "config.json");
  again.out = dir.string();
  again.resume = true;
  request_stop(SIGTERM);
  const RunSummary s = xgrad::train::train(again);
  CHECK(s.stop_signal == SIGTERM);
  CHECK(s.steps_done == at);
  fs::remove_all(dir);
}

TEST_CASE("a non-finite step says what was non-finite, with its value: the gradient when the loss was finite") {
  // A NaN gradient at a finite loss (a message "non-finite loss=7.4e+22" was once read as if the loss were the cause).
  TrainConfig c = nan_run("nan_message_gradient");
  c.on_nan = train::OnNan::skip;
  {
    LogCapture log;
    xgrad::train::train(c, xgrad::testing::nan_gradient_at({3}));
    INFO(log.text());
    CHECK(log.text().find("step 3: non-finite gradient (grad_norm=nan; loss=") != std::string::npos);
    CHECK(log.text().find(" is finite); first non-finite: gradient of blocks.0.attn.w_q.weight; step skipped") !=
          std::string::npos);
    CHECK(log.text().find("non-finite loss") == std::string::npos);
  }
  c.on_nan = train::OnNan::stop;
  c.overwrite = true;
  {
    LogCapture log;
    xgrad::train::train(c, xgrad::testing::nan_gradient_at({3}));
    INFO(log.text());
    CHECK(log.text().find("diverged at step 3: non-finite gradient (grad_norm=nan; loss=") != std::string::npos);
  }
  // SGD at lr 1e30 makes the loss itself NaN at step 1: weights of ~1e28 overflow the first products to inf, and
  // LayerNorm's x - mean makes that NaN. (At lr 1e12 whether the loss or only its gradient overflows first depends on
  // the BLAS kernel's summation order.)
  TrainConfig l = nan_run("nan_message_loss");
  l.optimizer = "sgd";
  l.lr = 1e30;
  LogCapture log;
  const RunSummary s = xgrad::train::train(l);
  INFO(log.text());
  REQUIRE(s.diverged);
  CHECK(log.text().find("diverged at step " + std::to_string(s.diverged_step) + ": non-finite loss (loss=nan") !=
        std::string::npos);
  // Every gradient is non-finite at a non-finite loss: the message names a weight, or none, never "the first" of them.
  CHECK(log.text().find("first non-finite: gradient of") == std::string::npos);
  CHECK((log.text().find("every weight is finite (the forward pass overflowed)") != std::string::npos ||
         log.text().find("first non-finite: value of ") != std::string::npos));
  fs::remove_all(c.out);
  fs::remove_all(l.out);
}

TEST_CASE("a cosine-scheduled run stopped by SIGTERM resumes with the same learning rates; other --steps are refused") {
  const fs::path whole = temp_dir("cosine_whole"), cut = temp_dir("cosine_cut");
  auto args = [](const fs::path& dir) {
    std::vector<std::string> a = run_args(dir, "adamw");
    for (const char* extra : {"--lr-schedule", "cosine", "--warmup-steps", "20", "--min-lr", "0.0003"})
      a.push_back(extra);
    return a;
  };
  REQUIRE(run_xgrad(args(whole)).exit_code == 0);
  const ProcessResult ended = interrupt_at(args(cut), cut, 60, SIGTERM);
  REQUIRE(ended.signal != 0);
  CHECK_FALSE(fs::exists(cut / "summary.json"));
  CHECK(run_xgrad({"train", "--resume", cut.string(), "--steps", "300"}).exit_code == 2);
  REQUIRE(run_xgrad({"train", "--resume", cut.string()}).exit_code == 0);
  CHECK(metrics_without_timing(cut) == metrics_without_timing(whole));
  CHECK(summary_without_time(cut) == summary_without_time(whole));
  fs::remove_all(whole);
  fs::remove_all(cut);
}

TEST_CASE(
    "SIGTERM during the end-of-run length evaluation: the run ends by SIGTERM soon, without summary.json; "
    "--resume redoes the evaluation") {
  const fs::path dir = temp_dir("term_length_eval");
  // kv_recall evaluated at 1024 pairs: each held-out batch takes a while, so the signal lands inside the evaluation.
  const std::vector<std::string> args{
      "train", "--out",          dir.string(), "--task",         "kv_recall", "--kv-encoding", "sum", "--n-keys",
      "1024",  "--n-values",     "16",         "--steps",        "5",         "--d-model",     "16",  "--batch-size",
      "16",    "--eval-n-pairs", "8,1024",     "--eval-batches", "8",         "--threads",     "1"};
  Process train(xgrad_command(args));
  // The only checkpoint (--checkpoint-every 100) is the one at the end, written just before the evaluation.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool exited = false;
  while (!fs::exists(dir / kCheckpointFile) && std::chrono::steady_clock::now() < deadline)
    if (train.ended()) {
      exited = true;
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  REQUIRE_FALSE(exited);
  REQUIRE(fs::exists(dir / kCheckpointFile));
  train.send(SIGTERM);
  const ProcessResult ended = train.wait();
  REQUIRE(ended.signal != 0);  // a shell sees 143, not 0
  CHECK(ended.signal == SIGTERM);
  CHECK_FALSE(fs::exists(dir / "summary.json"));
  CHECK(checkpoint_step(dir) == 5);
  CHECK(count_lines(dir / "metrics.csv") == 6);
  // The training is complete; the resumed run only evaluates, and writes both points.
  REQUIRE(run_xgrad({"train", "--resume", dir.string()}).exit_code == 0);
  CHECK(count_lines(dir / "metrics.csv") == 6);
  std::ifstream in(dir / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  REQUIRE(summary.at("length_eval").size() == 2);
  CHECK(summary.at("length_eval")[1].at("value") == 1024);
  fs::remove_all(dir);
}

TEST_CASE(
    "an optimizer state that overflows to inf (--z-loss 1e30 with AdamW) stops the run as a divergence naming "
    "the buffer, not 'done' with frozen weights") {
  TrainConfig c = nan_run("nan_optimizer_state");
  c.optimizer = "adamw";
  c.z_loss = 1e30;
  LogCapture log;
  const RunSummary s = xgrad::train::train(c);
  INFO(log.text());
  CHECK(s.diverged);
  CHECK(s.steps_done < c.steps);
  CHECK(log.text().find("non-finite optimizer state: v of ") != std::string::npos);
  // The checkpoint left is one whose optimizer state is finite (or none was written yet).
  const fs::path ckpt = fs::path(c.out) / kCheckpointFile;
  if (fs::exists(ckpt)) {
    const nn::Checkpoint good = nn::load_checkpoint(ckpt.string());
    CHECK(good.meta("nonfinite") == "false");
  }
}

TEST_CASE(
    "resume refuses a checkpoint whose optimizer step count differs from its step, naming the file and both "
    "numbers, exit 2") {
  TrainConfig c = tiny_run(temp_dir("optim_step").string(), 6);
  c.optimizer = "adamw";
  xgrad::train::train(c);
  const fs::path ckpt = fs::path(c.out) / kCheckpointFile;
  nn::Checkpoint edited = nn::load_checkpoint(ckpt.string());
  REQUIRE(edited.meta("step") == "6");
  REQUIRE(edited.meta("optim.step") == "6");
  for (const char* count : {"3", "0", "9"}) {
    edited.metadata["optim.step"] = count;
    nn::save_checkpoint(ckpt.string(), edited);
    TrainConfig r = c;
    r.resume = true;
    r.steps = 8;
    INFO("optim.step = " << count);
    CHECK_THROWS_WITH_AS(xgrad::train::train(r),
                         doctest::Contains((ckpt.string() + ": the optimizer has taken " + count +
                                            " steps (metadata optim.step) but the run 6 (metadata step, 0 of them "
                                            "skipped)")
                                               .c_str()),
                         ConfigError);
    CHECK(run_xgrad({"train", "--resume", c.out, "--steps", "8"}).exit_code == 2);
    CHECK(checkpoint_step(c.out) == 6);  // refused before training anything
  }
  fs::remove_all(c.out);
}

TEST_CASE(
    "resume refuses a checkpoint whose metadata config nests 200,000 deep or repeats a key, naming the file, "
    "never a crash") {
  TrainConfig c = tiny_run(temp_dir("metadata_config").string(), 4);
  xgrad::train::train(c);
  const fs::path ckpt = fs::path(c.out) / kCheckpointFile;
  const nn::Checkpoint original = nn::load_checkpoint(ckpt.string());
  const std::string config = original.meta("config");
  REQUIRE(config.front() == '{');
  struct Hostile {
    std::string text, message;
  };
  const std::vector<Hostile> cases{
      {"{\"lr\": " + std::string(200000, '[') + std::string(200000, ']') + "}", "deeper than 64 levels"},
      {"{\"lr\": 1, " + config.substr(1), "the key 'lr' appears twice"},
  };
  for (const Hostile& h : cases) {
    nn::Checkpoint edited = original;
    edited.metadata["config"] = h.text;
    nn::save_checkpoint(ckpt.string(), edited);
    TrainConfig r = c;
    r.resume = true;
    r.steps = 6;
    INFO(h.message);
    CHECK_THROWS_WITH_AS(xgrad::train::train(r), doctest::Contains(h.message.c_str()), ConfigError);
    CHECK(run_xgrad({"train", "--resume", c.out, "--steps", "6"}).exit_code == 2);
    CHECK(checkpoint_step(c.out) == 4);
  }
  fs::remove_all(c.out);
}
