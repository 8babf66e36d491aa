// A sweep as a manifest, without Slurm: `xgrad sweep --launcher slurm` writes sweep.json (every
// grid point with its index and resolved settings) and the array script before anything runs; `xgrad sweep run-one`
// trains one point (resumes it, leaves a complete one alone, refuses a second copy); `xgrad sweep status` reads every
// point's state from the run directories; `xgrad compare` marks a run still training; bad flags exit 2. The real
// xgrad executable throughout (tests/slurm/slurm_sweep_test.sh does the same through a real Slurm).
#include <doctest/doctest.h>

#include <sched.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/refusals.h"
#include "tests/support/run_files.h"
#include "tests/support/shown_text.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::vector<std::string> kNames{"dk4-none-adamw-lr0.01-s0", "dk4-none-adamw-lr0.01-s1",
                                      "dk4-sqrt_dk-adamw-lr0.01-s0", "dk4-sqrt_dk-adamw-lr0.01-s1"};

// A 4-point sweep of a tiny model (plan order: scale, then seed), with `extra` flags.
std::vector<std::string> sweep_args(const fs::path& out, const std::string& steps,
                                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"sweep", "--out",        out.string(), "--scale", "none,sqrt_dk", "--d-k",
                                "4",     "--seeds",      "0,1",        "--arms",  "adamw@0.01",   "--d-model",
                                "16",    "--batch-size", "8",          "--steps", steps,          "--print-every",
                                "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The status column `xgrad sweep status` gives point `index`, and the rest of its line.
std::string status_line(const fs::path& out, std::size_t index) {
  const ProcessResult r = run_xgrad({"sweep", "status", out.string()}, merged_output());
  REQUIRE_MESSAGE(r.exit_code == 0, r.out);
  const std::regex row("^ *" + std::to_string(index) + "  \\S+ +(.*)$");
  std::istringstream lines(r.out);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_match(line, m, row)) return m[1];
  FAIL("no point " << index << " in:\n" << r.out);
  return "";
}

// A local sweep (--jobs 1) of `steps` over the manifest `out` with one point complete: it skips that point, runs
// the other three, and `sweep status` then says all four are complete.
void check_local_sweep_completes(const fs::path& out, const std::string& steps) {
  const ProcessResult local = run_xgrad(sweep_args(out, steps, {"--jobs", "1"}), merged_output());
  INFO(local.out);
  CHECK(local.exit_code == 0);
  CHECK(contains(local.out, "1 of 4 runs already complete, skipped"));
  CHECK(contains(run_xgrad({"sweep", "status", out.string()}, merged_output()).out, "4 points: 4 complete\n"));
}

}  // namespace

TEST_CASE("sweep --launcher slurm writes the manifest and the array script first, and trains nothing") {
  const TempDir root("manifest_slurm");
  const fs::path out = fs::absolute(root / "sweep");
  const ProcessResult r =
      run_xgrad(sweep_args(out, "30",
                           {"--launcher", "slurm", "--max-parallel", "3", "--partition", "debug", "--time", "0:10:00"}),
                merged_output());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const std::string script = (out / "sweep.sbatch").string();
  CHECK(contains(r.out, "sbatch --array=0-3%3 " + script));
  const nlohmann::json index = nlohmann::json::parse(read_text(out / "sweep.json"));
  REQUIRE(index.at("runs").size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    const nlohmann::json& e = index.at("runs").at(i);
    CHECK(e.at("index") == i);
    CHECK(e.at("name") == kNames[i]);
    CHECK(e.at("dir") == "runs/" + kNames[i]);
    CHECK(e.at("status") == "pending");
    // Fully resolved: the settings a run reads, as its config file holds them.
    CHECK(e.at("config").at("d_k") == 4);
    CHECK(e.at("config").at("steps") == 30);
    CHECK(e.at("config").at("seed") == i % 2);
    CHECK(e.at("config") == nlohmann::json::parse(read_text(out / "configs" / (kNames[i] + ".json"))));
    CHECK_FALSE(fs::exists(out / "runs" / kNames[i] / "config.json"));
  }
  const std::string sbatch = read_text(script);
  INFO(sbatch);
  CHECK(contains(sbatch, "#SBATCH --array=0-3%3\n"));
  CHECK(contains(sbatch, "#SBATCH --cpus-per-task=1\n"));
  CHECK(contains(sbatch, "#SBATCH --partition=debug\n"));
  CHECK(contains(sbatch, "#SBATCH --time=0:10:00\n"));
  CHECK(contains(sbatch, "#SBATCH --output=" + out.string() + "/slurm-%A_%a.out\n"));
  CHECK(contains(sbatch, "exec " + fs::canonical(XGRAD_BIN).string() + " sweep run-one " + out.string() +
                             " --index \"$SLURM_ARRAY_TASK_ID\"\n"));
  CHECK((fs::status(script).permissions() & fs::perms::owner_exec) != fs::perms::none);

  // A later sweep into the directory with more seeds keeps the points' numbers and numbers the new ones after them.
  const ProcessResult more =
      run_xgrad({"sweep",   "--out",   out.string(), "--scale",       "none,sqrt_dk", "--d-k",      "4",
                 "--seeds", "0,1,2",   "--arms",     "adamw@0.01",    "--d-model",    "16",         "--batch-size",
                 "8",       "--steps", "30",         "--print-every", "100000",       "--launcher", "slurm"},
                merged_output());
  INFO(more.out);
  REQUIRE(more.exit_code == 0);
  const nlohmann::json grown = nlohmann::json::parse(read_text(out / "sweep.json"));
  REQUIRE(grown.at("runs").size() == 6);
  for (std::size_t i = 0; i < 4; ++i) CHECK(grown.at("runs").at(i).at("name") == kNames[i]);
  CHECK(grown.at("runs").at(4).at("name") == "dk4-none-adamw-lr0.01-s2");
  CHECK(grown.at("runs").at(5).at("name") == "dk4-sqrt_dk-adamw-lr0.01-s2");
  CHECK(contains(more.out, "--array=0-5%16 "));
}

TEST_CASE("sweep --launcher slurm does not hold --threads against the CPUs of the machine that plans the sweep") {
  // The points run on the cluster's nodes with --cpus-per-task CPUs; a 2-CPU login node plans 64-thread runs. (The
  // same flags with the local launcher are refused on a machine with fewer CPUs.)
  const TempDir root("manifest_threads");
  const fs::path out = fs::absolute(root / "sweep");
  const ProcessResult r = run_xgrad(sweep_args(out, "30", {"--launcher", "slurm", "--threads", "64"}), merged_output());
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(read_text(out / "sweep.sbatch"), "#SBATCH --cpus-per-task=64\n"));
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 64) {
    const ProcessResult local = run_xgrad(sweep_args(root / "local", "30", {"--threads", "64"}), merged_output());
    CHECK(local.exit_code == 2);
    CHECK(contains(local.out, "--threads"));
  }
}

TEST_CASE("sweep run-one trains one point, leaves a complete one alone, and the next submission skips it") {
  const TempDir root("manifest_run_one");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "40", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  const ProcessResult first = run_xgrad({"sweep", "run-one", out.string(), "--index", "2"}, merged_output());
  INFO(first.out);
  REQUIRE(first.exit_code == 0);
  CHECK(contains(first.out, "grid point 2 of 4 (" + kNames[2] + "): starting; log: "));
  CHECK(fs::exists(out / "runs" / kNames[2] / "summary.json"));
  CHECK(contains(read_text(out / "runs" / kNames[2] / "train.log"), "done: final loss"));
  CHECK(contains(status_line(out, 2), "complete     final loss "));
  CHECK(status_line(out, 0) == "pending");

  const ProcessResult again = run_xgrad({"sweep", "run-one", out.string(), "--index", "2"}, merged_output());
  INFO(again.out);
  CHECK(again.exit_code == 0);
  CHECK(contains(again.out, "is complete already (final loss "));
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  CHECK(contains(status.out,
                 "4 points: 1 complete, 3 pending\nto continue: the same xgrad sweep command again (any "
                 "--launcher), or `xgrad sweep run-one " +
                     out.string() + " --index I` for one point\n"));

  const ProcessResult submit =
      run_xgrad(sweep_args(out, "40", {"--launcher", "slurm", "--max-parallel", "2"}), merged_output());
  INFO(submit.out);
  CHECK(submit.exit_code == 0);
  CHECK(contains(submit.out, "3 point(s) to run; submit them with:\n  sbatch --array=0-1,3%2 "));
  // The manifest's config is what run-one trained: a local sweep over the same grid finds point 2 complete.
  check_local_sweep_completes(out, "40");
}

TEST_CASE(
    "sweep run-one: a second copy is refused while the first trains, compare marks the run as running, and "
    "a stopped point resumes from its checkpoint") {
  const TempDir root("manifest_running");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "3000", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  // One complete run beside the one in training, for compare.
  REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output()).exit_code == 0);
  const fs::path run = out / "runs" / kNames[1];
  ProcessOptions to_file;
  to_file.output_file = root / "first.txt";
  Process first_run(xgrad_command({"sweep", "run-one", out.string(), "--index", "1"}), to_file);
  const pid_t first = first_run.pid();
  // run-one becomes `xgrad train` in the same process, which holds the lock and checkpoints every 100 steps.
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(run / "checkpoint.safetensors"); }),
                  read_text(root / "first.txt"));
  {
    Frozen frozen(first);
    const std::string running = status_line(out, 1);
    CHECK(contains(running, "running      pid " + std::to_string(first) + ", "));
    CHECK(contains(running, " of 3000 logged"));
    const ProcessResult second = run_xgrad({"sweep", "run-one", out.string(), "--index", "1"}, merged_output());
    INFO(second.out);
    CHECK(second.exit_code == 1);
    CHECK(contains(second.out, "(" + kNames[1] + ") is being trained by another process (pid " + std::to_string(first) +
                                   "); left alone"));
    const ProcessResult compared = run_xgrad({"compare", out.string(), "--plots", "false"}, merged_output());
    INFO(compared.out);
    CHECK(compared.exit_code == 0);
    CHECK(contains(compared.out,
                   "incomplete: " + run.string() + " (still running (pid " + std::to_string(first) + "); "));
    kill(first, SIGTERM);  // acted on once thawed: the step ends, the checkpoint is written
  }
  CHECK(first_run.wait().signal == SIGTERM);
  const std::string stopped = status_line(out, 1);
  CHECK(std::regex_search(stopped, std::regex("^interrupted  checkpoint at step [1-9][0-9]* of 3000; ")));
  const ProcessResult compared = run_xgrad({"compare", out.string(), "--plots", "false"}, merged_output());
  CHECK(contains(compared.out, "incomplete: " + run.string() + " (no summary.json; "));

  const ProcessResult resumed = run_xgrad({"sweep", "run-one", out.string(), "--index", "1"}, merged_output());
  INFO(resumed.out);
  CHECK(resumed.exit_code == 0);
  CHECK(std::regex_search(resumed.out, std::regex("resuming from the checkpoint at step [1-9][0-9]*; log: ")));
  CHECK(contains(status_line(out, 1), "complete"));
  const std::string log = read_text(run / "train.log");
  CHECK(contains(log, "stopped by SIGTERM"));  // the first session's output is kept
  CHECK(contains(log, "done: final loss"));
  std::ifstream metrics(run / "metrics.csv");
  std::size_t lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  CHECK(lines == 3001);
}

TEST_CASE("sweep status: a point whose run failed before a checkpoint is failed, and run-one starts it over") {
  const TempDir root("manifest_failed");
  const fs::path out = fs::absolute(root / "sweep");
  const fs::path text = fs::absolute(root / "text.txt");
  {
    std::ofstream f(text);
    for (int i = 0; i < 200; ++i) f << "the quick brown fox jumps over the lazy dog\n";
  }
  REQUIRE(run_xgrad({"sweep",       "--out",      out.string(), "--task",    "char_lm", "--text",
                     text.string(), "--scale",    "none",       "--d-k",     "4",       "--seeds",
                     "0",           "--arms",     "adamw@0.01", "--d-model", "16",      "--batch-size",
                     "4",           "--seq-len",  "8",          "--steps",   "20",      "--print-every",
                     "100000",      "--launcher", "slurm"},
                    merged_output())
              .exit_code == 0);
  fs::rename(text, root / "moved.txt");
  const ProcessResult failed = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(failed.out);
  CHECK(failed.exit_code != 0);
  const std::string line = status_line(out, 0);
  CHECK(contains(line, "failed       ended before a checkpoint (failed or killed); see "));
  CHECK(contains(run_xgrad({"sweep", "status", out.string()}, merged_output()).out, "1 point: 1 failed\n"));
  fs::rename(root / "moved.txt", text);
  const ProcessResult redone = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(redone.out);
  CHECK(redone.exit_code == 0);
  CHECK(contains(redone.out, "): starting; log: "));
  CHECK(contains(status_line(out, 0), "complete"));
}

TEST_CASE("sweep run-one, status and --launcher refuse bad input with exit 2 naming the flag and the allowed values") {
  const TempDir root("manifest_refusals");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "10", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  const fs::path empty = root / "empty";
  fs::create_directories(empty);
  const fs::path old = root / "old";
  fs::create_directories(old);
  {
    std::ofstream f(old / "sweep.json");
    f << R"({"base": {}, "grid": {}, "runs": [{"name": "dk4-none-adamw-lr0.01-s0", "dir": "runs/x"}]})";
  }
  // A manifest edited so that a point's directory leaves the sweep directory: run-one must not train there.
  const fs::path escaping = root / "escaping";
  fs::create_directories(escaping);
  {
    std::ofstream f(escaping / "sweep.json");
    f << R"({"runs": [{"index": 0, "name": "dk4-none-adamw-lr0.01-s0", "dir": "../../etc"}]})";
  }
  // A point whose recorded status is not a SweepStatus.
  const fs::path unknown_status = root / "unknown_status";
  fs::create_directories(unknown_status);
  {
    std::ofstream f(unknown_status / "sweep.json");
    f << R"({"runs": [{"index": 0, "name": "dk4-none-adamw-lr0.01-s0", "dir": "runs/dk4-none-adamw-lr0.01-s0", )"
      << R"("status": "finished"}]})";
  }
  // A status that is not a string at all: refused as an unknown one, not read as no status (pending).
  const fs::path number_status = root / "number_status";
  fs::create_directories(number_status);
  {
    std::ofstream f(number_status / "sweep.json");
    f << R"({"runs": [{"index": 0, "name": "dk4-none-adamw-lr0.01-s0", "dir": "runs/dk4-none-adamw-lr0.01-s0", )"
      << R"("status": 1}]})";
  }
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"sweep", "status", unknown_status.string()},
       "point 0's status 'finished' is not one of pending, running, complete, diverged, interrupted, failed, skipped"},
      {{"sweep", "run-one", unknown_status.string(), "--index", "0"}, "point 0's status 'finished' is not one of"},
      {{"sweep", "status", number_status.string()}, "point 0's status '1' is not one of"},
      {{"sweep", "run-one", number_status.string(), "--index", "0"}, "point 0's status '1' is not one of"},
      {{"sweep", "run-one", out.string(), "--index", "4"},
       "--index: 4 is not a grid point of " + out.string() + " (allowed: 0 to 3)"},
      {{"sweep", "run-one", out.string(), "--index", "-1"}, "--index: must be a whole number in [0, "},
      {{"sweep", "run-one", out.string()}, "--index is required"},
      {{"sweep", "run-one", empty.string(), "--index", "0"},
       "DIR: " + empty.string() + " holds no sweep.json, so no sweep manifest; write one with `xgrad sweep --out DIR"},
      {{"sweep", "status", empty.string()}, "holds no sweep.json, so no sweep manifest"},
      {{"sweep", "status", (root / "absent").string()}, "is not a directory"},
      {{"sweep", "run-one", old.string(), "--index", "0"}, "is an index written before sweep manifests"},
      {{"sweep", "run-one", escaping.string(), "--index", "0"},
       "gives point 0 the run directory '../../etc' (allowed: runs/<name> inside the sweep directory)"},
      {sweep_args(out, "10", {"--launcher", "pbs"}), "--launcher: must be local or slurm, got 'pbs'"},
      {sweep_args(out, "10", {"--submit"}), "--submit: a flag of --launcher slurm"},
      {sweep_args(out, "10", {"--max-parallel", "2"}), "--max-parallel: a flag of --launcher slurm"},
      {sweep_args(out, "10", {"--launcher", "slurm", "--jobs", "2"}),
       "--jobs: --launcher slurm runs --max-parallel array tasks at a time"},
      {sweep_args(out, "10", {"--launcher", "slurm", "--max-parallel", "0"}), "--max-parallel: must be"},
      {sweep_args(out, "10", {"--launcher", "slurm", "--time", "1h"}),
       "--time: must be a Slurm time limit (allowed: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED), got '1h'"},
      {sweep_args(out, "10", {"--launcher", "slurm", "--partition", "a b"}), "--partition: must be a partition name"},
      {sweep_args(root / "a b", "10", {"--launcher", "slurm"}),
       "holds whitespace, a quote or a backslash, which the #SBATCH --output line of the Slurm script does not take"},
      {sweep_args(out, "10", {"--launcher", "slurm", "--threads", "2", "--cpus-per-task", "1"}),
       "--cpus-per-task: 1 is below --threads 2 (allowed: 2 or more)"},
  };
  for (const Case& c : cases) check_refused({c.args, 2, c.message});
}

TEST_CASE("sweep run-one refuses a run directory that is a symbolic link and leaves the link's target alone") {
  const TempDir root("manifest_run_one_link");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "40", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", "2"}, merged_output()).exit_code == 0);
  const fs::path target = out / "runs" / kNames[2];
  const std::string metrics_before = read_text(target / "metrics.csv");
  const std::string config_before = read_text(target / "config.json");
  // A run directory copied from elsewhere may hold links; point 0's directory is one to point 2's run.
  fs::remove_all(out / "runs" / kNames[0]);
  fs::create_directory_symlink(target, out / "runs" / kNames[0]);
  const ProcessResult linked = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(linked.out);
  CHECK(linked.exit_code == 2);
  CHECK(contains(linked.out, (out / "runs" / kNames[0]).string()));
  CHECK(contains(linked.out, "symbolic link"));
  CHECK(read_text(target / "metrics.csv") == metrics_before);
  CHECK(read_text(target / "config.json") == config_before);

  // A link to a directory outside the sweep: nothing is written there.
  const fs::path elsewhere = fs::absolute(root / "elsewhere");
  fs::create_directories(elsewhere);
  fs::remove(out / "runs" / kNames[0]);
  fs::create_directory_symlink(elsewhere, out / "runs" / kNames[0]);
  const ProcessResult outside = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(outside.out);
  CHECK(outside.exit_code == 2);
  CHECK(contains(outside.out, "symbolic link"));
  CHECK(fs::is_empty(elsewhere));
}

// The arguments of a tiny `xgrad train` into `out`.
std::vector<std::string> train_args(const fs::path& out, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"train",     "--out", out.string(),    "--steps", "3",
                                "--d-model", "16",    "--print-every", "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Checks `r` is the refusal of `link` as a symbolic link in a run directory.
void check_refused_link(const ProcessResult& r, const fs::path& link) {
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.out, link.string() + " is a symbolic link; xgrad does not write through links"));
}

TEST_CASE("a .lock that is a symbolic link is refused by train, resume and sweep, and its target is left alone") {
  const TempDir root("links_lock");
  const fs::path victim = fs::absolute(root / "victim");
  std::ofstream(victim) << "precious\n";
  // train --out into a fresh directory holding only the link
  const fs::path run = fs::absolute(root / "run1");
  fs::create_directories(run);
  fs::create_symlink(victim, run / ".lock");
  check_refused_link(run_xgrad(train_args(run), merged_output()), run / ".lock");
  CHECK(read_text(victim) == "precious\n");
  // train --resume of a run whose .lock was replaced by a link
  const fs::path done = fs::absolute(root / "run2");
  REQUIRE(run_xgrad(train_args(done), merged_output()).exit_code == 0);
  fs::remove(done / ".lock");
  fs::create_symlink(victim, done / ".lock");
  check_refused_link(run_xgrad({"train", "--resume", done.string(), "--steps", "6"}, merged_output()), done / ".lock");
  CHECK(read_text(victim) == "precious\n");
  // a local sweep: its own DIR/.lock, then a run's
  const fs::path out = fs::absolute(root / "sweep");
  fs::create_directories(out);
  fs::create_symlink(victim, out / ".lock");
  check_refused_link(run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output()), out / ".lock");
  CHECK(read_text(victim) == "precious\n");
  fs::remove(out / ".lock");
  fs::create_directories(out / "runs" / kNames[1]);
  fs::create_symlink(victim, out / "runs" / kNames[1] / ".lock");
  check_refused_link(run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output()),
                     out / "runs" / kNames[1] / ".lock");
  CHECK(read_text(victim) == "precious\n");
  // sweep run-one of a manifest point whose run directory holds the link
  const fs::path manifest = fs::absolute(root / "manifest");
  REQUIRE(run_xgrad(sweep_args(manifest, "3", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  fs::create_directories(manifest / "runs" / kNames[0]);
  fs::create_symlink(victim, manifest / "runs" / kNames[0] / ".lock");
  check_refused_link(run_xgrad({"sweep", "run-one", manifest.string(), "--index", "0"}, merged_output()),
                     manifest / "runs" / kNames[0] / ".lock");
  CHECK(read_text(victim) == "precious\n");
}

TEST_CASE("train --out refuses a run file that is a symbolic link, dangling or not, and writes nothing through it") {
  const TempDir root("links_run_files");
  const fs::path outside = fs::absolute(root / "outside");
  fs::create_directories(outside);
  for (const std::string file : {"metrics.csv", "config.json", "summary.json", "checkpoint.safetensors"}) {
    CAPTURE(file);
    const fs::path run = fs::absolute(root / ("run-" + file));
    fs::create_directories(run);
    fs::create_symlink(outside / file, run / file);  // dangling: fs::exists says there is no such file
    check_refused_link(run_xgrad(train_args(run), merged_output()), run / file);
    CHECK(!fs::exists(outside / file));
  }
  // --overwrite and --resume of a finished run whose metrics.csv was replaced by a link to another file
  const fs::path done = fs::absolute(root / "done");
  REQUIRE(run_xgrad(train_args(done), merged_output()).exit_code == 0);
  std::ofstream(outside / "kept.csv") << "kept\n";
  fs::remove(done / "metrics.csv");
  fs::create_symlink(outside / "kept.csv", done / "metrics.csv");
  check_refused_link(run_xgrad(train_args(done, {"--overwrite"}), merged_output()), done / "metrics.csv");
  check_refused_link(run_xgrad({"train", "--resume", done.string(), "--steps", "6"}, merged_output()),
                     done / "metrics.csv");
  CHECK(read_text(outside / "kept.csv") == "kept\n");
}

TEST_CASE("a local sweep and sweep run-one refuse a train.log that is a symbolic link, and leave its target alone") {
  const TempDir root("links_train_log");
  const fs::path victim = fs::absolute(root / "victim");
  for (const bool resume : {false, true}) {
    CAPTURE(resume);
    const fs::path out = fs::absolute(root / (resume ? "resumed" : "fresh"));
    const fs::path log = out / "runs" / kNames[1] / "train.log";
    if (resume) {
      REQUIRE(run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output()).exit_code == 0);
      fs::remove(out / "runs" / kNames[1] / "summary.json");  // the run now reads as interrupted: it is resumed
    } else {
      fs::create_directories(log.parent_path());
    }
    std::ofstream(victim) << "precious\n";
    fs::remove(log);
    fs::create_symlink(victim, log);
    check_refused_link(run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output()), log);
    CHECK(read_text(victim) == "precious\n");
  }
  const fs::path manifest = fs::absolute(root / "manifest");
  REQUIRE(run_xgrad(sweep_args(manifest, "3", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  const fs::path log = manifest / "runs" / kNames[0] / "train.log";
  fs::create_directories(log.parent_path());
  fs::create_symlink(victim, log);
  check_refused_link(run_xgrad({"sweep", "run-one", manifest.string(), "--index", "0"}, merged_output()), log);
  CHECK(read_text(victim) == "precious\n");
}

TEST_CASE("a local sweep refuses a runs/<name> or configs/ that is a symbolic link and writes nothing through it") {
  const TempDir root("links_sweep_dirs");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output()).exit_code == 0);
  const std::string index_before = read_text(out / "sweep.json");
  const fs::path outside = fs::absolute(root / "outside_target");
  fs::create_directories(outside);
  fs::remove_all(out / "runs" / kNames[2]);
  fs::create_directory_symlink(outside, out / "runs" / kNames[2]);
  const ProcessResult linked_run = run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output());
  INFO(linked_run.out);
  CHECK(linked_run.exit_code == 2);
  CHECK(contains(linked_run.out, (out / "runs" / kNames[2]).string() + " is a symbolic link"));
  CHECK(fs::is_empty(outside));
  CHECK(read_text(out / "sweep.json") == index_before);

  fs::remove(out / "runs" / kNames[2]);
  fs::remove_all(out / "configs");
  fs::create_directory_symlink(outside, out / "configs");
  const ProcessResult linked_configs = run_xgrad(sweep_args(out, "3", {"--jobs", "1"}), merged_output());
  INFO(linked_configs.out);
  CHECK(linked_configs.exit_code == 2);
  CHECK(contains(linked_configs.out, (out / "configs").string() + " is a symbolic link"));
  CHECK(fs::is_empty(outside));
  // sweep run-one writes the point's config file in configs/ too
  const fs::path manifest = fs::absolute(root / "manifest");
  REQUIRE(run_xgrad(sweep_args(manifest, "3", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  fs::remove_all(manifest / "configs");
  fs::create_directory_symlink(outside, manifest / "configs");
  const ProcessResult run_one = run_xgrad({"sweep", "run-one", manifest.string(), "--index", "0"}, merged_output());
  INFO(run_one.out);
  CHECK(run_one.exit_code == 2);
  CHECK(contains(run_one.out, (manifest / "configs").string() + " is a symbolic link"));
  CHECK(fs::is_empty(outside));
}

TEST_CASE("sweep status mentions a checkpoint write left half-done (a second signal during the write)") {
  const TempDir root("manifest_status_leftover");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "40", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", "2"}, merged_output()).exit_code == 0);
  const fs::path leftover = out / "runs" / kNames[2] / ".checkpoint.safetensors.tmp-12345";
  std::ofstream(leftover) << "cut short";
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  INFO(status.out);
  CHECK(status.exit_code == 0);
  CHECK(contains(status.out, "1 leftover partial write: " + leftover.string()));
}

TEST_CASE("sweep status counts points whose run directory was deleted or cut short, and never calls them complete") {
  const TempDir root("manifest_status_missing");
  const fs::path out = fs::absolute(root / "sweep");
  const ProcessResult sweep = run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output());
  REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.out);
  fs::remove_all(out / "runs" / kNames[0]);              // deleted: sweep.json records it, no directory
  fs::remove(out / "runs" / kNames[1] / "config.json");  // summary.json without config.json: a rerun redoes it
  std::ofstream(out / "runs" / kNames[3] / "config.json") << "{\"steps\": 2";  // cut short
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  INFO(status.out);
  CHECK(status.exit_code == 0);
  CHECK(status_line(out, 0).rfind("missing", 0) == 0);
  CHECK(status_line(out, 1).rfind("incomplete", 0) == 0);
  CHECK(status_line(out, 2).rfind("complete", 0) == 0);
  CHECK(status_line(out, 3).rfind("incomplete", 0) == 0);
  CHECK(contains(status.out, "4 points: 1 complete, 2 incomplete, 1 missing\n"));
  // What status says is what the next sweep does: it keeps the one complete run and redoes the other three.
  check_local_sweep_completes(out, "20");
}

TEST_CASE(
    "sweep status and a rerun treat a run whose metrics.csv was deleted or cut short as incomplete, not complete") {
  const TempDir root("manifest_status_metrics");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output()).exit_code == 0);
  fs::remove(out / "runs" / kNames[0] / "metrics.csv");
  const fs::path csv = out / "runs" / kNames[1] / "metrics.csv";
  fs::resize_file(csv, fs::file_size(csv) / 2);
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  INFO(status.out);
  CHECK(status_line(out, 0).rfind("incomplete", 0) == 0);
  CHECK(status_line(out, 1).rfind("incomplete", 0) == 0);
  CHECK(contains(status.out, "4 points: 2 complete, 2 incomplete\n"));
  const ProcessResult again = run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output());
  INFO(again.out);
  CHECK(again.exit_code == 0);
  CHECK(contains(run_xgrad({"sweep", "status", out.string()}, merged_output()).out, "4 points: 4 complete\n"));
  CHECK(fs::exists(out / "runs" / kNames[0] / "metrics.csv"));
}

TEST_CASE(
    "compare of a sweep says how many of its grid points are not complete, and mentions leftover partial writes") {
  const TempDir root("manifest_compare_missing");
  const fs::path out = fs::absolute(root / "sweep");
  const ProcessResult sweep = run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output());
  REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.out);
  fs::remove_all(out / "runs" / kNames[0]);
  std::ofstream(out / "runs" / kNames[2] / ".checkpoint.safetensors.tmp-12345") << "cut short";
  const ProcessResult compare = run_xgrad({"compare", out.string()}, merged_output());
  INFO(compare.out);
  CHECK(compare.exit_code == 0);
  CHECK(contains(compare.out, "3 runs in "));
  // The note opens with its count, as the others do (not with the sweep's path).
  CHECK(contains(compare.out, "note: 3 of 4 grid points of the sweep " + out.string() + " complete (1 missing)"));
  CHECK(contains(compare.out, "note: 1 leftover partial write ("));
  CHECK(contains(compare.out, "): " + (out / "runs" / kNames[2] / ".checkpoint.safetensors.tmp-12345").string()));
  const std::string report = read_text(out / "report.md");
  CHECK(contains(report, "**Note:** 3 of 4 grid points"));
  CHECK(contains(report, "1 leftover partial write"));
  // A whole sweep gets no such note.
  const TempDir whole_root("manifest_compare_whole");
  const fs::path whole = fs::absolute(whole_root / "sweep");
  REQUIRE(run_xgrad(sweep_args(whole, "20", {"--jobs", "1"}), merged_output()).exit_code == 0);
  const ProcessResult all = run_xgrad({"compare", whole.string()}, merged_output());
  CHECK(all.exit_code == 0);
  CHECK_FALSE(contains(all.out, "note: "));
}

TEST_CASE("sweep status: a run whose config.json contradicts sweep.json is not complete; run-one refuses it") {
  const TempDir root("manifest_conflicting");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "10", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  for (const std::string index : {"0", "1"})
    REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", index}, merged_output()).exit_code == 0);
  // Point 0's run as another sweep would have trained it (another learning rate), finished; point 1's cut short
  // after its checkpoint.
  const fs::path config = out / "runs" / kNames[0] / "config.json";
  nlohmann::json edited = nlohmann::json::parse(read_text(config));
  edited["lr"] = 0.5;
  std::ofstream(config, std::ios::trunc) << edited.dump(2);
  const fs::path other = out / "runs" / kNames[1];
  fs::remove(other / "summary.json");
  nlohmann::json seeded = nlohmann::json::parse(read_text(other / "config.json"));
  seeded["seed"] = 7;
  std::ofstream(other / "config.json", std::ios::trunc) << seeded.dump(2);

  const std::string line = status_line(out, 0);
  CHECK(line.rfind("conflicting", 0) == 0);
  CHECK(contains(line, "'lr'"));
  CHECK(status_line(out, 1).rfind("conflicting", 0) == 0);
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  INFO(status.out);
  CHECK(contains(status.out, "4 points: 2 conflicting, 2 pending\n"));
  // What the status says is what a rerun does: the point is refused, not skipped as complete.
  const ProcessResult rerun = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(rerun.out);
  CHECK(rerun.exit_code == 2);
  CHECK(contains(rerun.out, "'lr'"));
}

TEST_CASE("sweep status: a point whose sweep.json settings run-one refuses is conflicting, run or pending") {
  const TempDir root("manifest_bad_point_settings");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "10", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output()).exit_code == 0);
  // Point 0 trained; then its entry in sweep.json was edited to an on_nan no build accepts.
  nlohmann::json manifest = nlohmann::json::parse(read_text(out / "sweep.json"));
  manifest["runs"][0]["config"]["on_nan"] = "bogus";
  manifest["runs"][1].erase("config");  // a point not yet run, its settings gone
  std::ofstream(out / "sweep.json", std::ios::trunc) << manifest.dump(2);

  const std::string line = status_line(out, 0);
  CHECK(line.rfind("conflicting", 0) == 0);
  CHECK(contains(line, "'on_nan'"));
  CHECK(status_line(out, 1).rfind("conflicting", 0) == 0);
  for (const std::string index : {"0", "1"}) {
    const ProcessResult rerun = run_xgrad({"sweep", "run-one", out.string(), "--index", index}, merged_output());
    INFO(rerun.out);
    CHECK(rerun.exit_code == 2);
    if (index == "0") CHECK(contains(rerun.out, "'on_nan'"));
  }
}

TEST_CASE("sweep status: a run whose config.json lost keys is compared at their defaults, not taken as complete") {
  const TempDir root("manifest_lost_keys");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "10", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  for (const std::string index : {"0", "1"})
    REQUIRE(run_xgrad({"sweep", "run-one", out.string(), "--index", index}, merged_output()).exit_code == 0);
  // Point 0 loses 'lr' (the point's 0.01; a missing lr reads as its default 3e-3) and 'optimizer' (the point's
  // adamw is the default); point 1 loses only keys at their defaults, so it is still the point's run.
  const auto drop = [&](const std::string& name, const std::vector<std::string>& keys) {
    const fs::path config = out / "runs" / name / "config.json";
    nlohmann::json edited = nlohmann::json::parse(read_text(config));
    for (const std::string& key : keys) REQUIRE(edited.erase(key) == 1);
    std::ofstream(config, std::ios::trunc) << edited.dump(2);
  };
  drop(kNames[0], {"lr", "optimizer"});
  drop(kNames[1], {"optimizer", "causal"});

  const std::string line = status_line(out, 0);
  CHECK(line.rfind("conflicting", 0) == 0);
  CHECK(contains(line, "'lr'"));
  CHECK(status_line(out, 1).rfind("complete", 0) == 0);
  const ProcessResult rerun = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
  INFO(rerun.out);
  CHECK(rerun.exit_code == 2);
  CHECK(contains(rerun.out, "'lr'"));
}

TEST_CASE("sweep run-one: a point name with terminal escapes, a newline or C1 controls is shown escaped") {
  const TempDir root("manifest_run_one_escapes");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "5", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  const std::string evil =
      "evil\x1b]0;PWNED\a\x1b[31m\nRED\xc2\x9b"
      "2J";
  nlohmann::json index = nlohmann::json::parse(read_text(out / "sweep.json"));
  index["runs"][0]["name"] = evil;
  std::ofstream(out / "sweep.json", std::ios::trunc) << index.dump(2);
  for (int pass = 0; pass < 2; ++pass) {  // starting it, then finding it complete
    const ProcessResult r = run_xgrad({"sweep", "run-one", out.string(), "--index", "0"}, merged_output());
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "evil\\e]0;PWNED\\a\\e[31m\\nRED\\u009B2J"));
    CHECK(r.out.find('\x1b') == std::string::npos);
    CHECK(r.out.find('\a') == std::string::npos);
    CHECK(r.out.find("\xc2\x9b") == std::string::npos);
  }
}

TEST_CASE("sweep status: names and the preset from sweep.json stay on their lines, unpadded past a bound, unrun") {
  const TempDir root("manifest_status_names");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "5", {"--launcher", "slurm"}), merged_output()).exit_code == 0);
  const std::string huge(1 << 20, 'n');
  nlohmann::json index = nlohmann::json::parse(read_text(out / "sweep.json"));
  index["runs"][0]["name"] = "evil\nline2";
  index["runs"][1]["name"] = huge;
  index["preset"] = {{"name", "lr $(touch " + (root / "PWNED").string() + ");rm -rf ~"}, {"quick", false}};
  std::ofstream(out / "sweep.json", std::ios::trunc) << index.dump(2);
  const ProcessResult r = run_xgrad({"sweep", "status", out.string()}, merged_output());
  CHECK(r.exit_code == 0);
  CHECK(raw_lines(r.out).empty());
  CHECK_FALSE(has_line_starting(r.out, "line2"));
  CHECK(r.out.size() < huge.size() + 10000);  // the long name once, no row padded to it
  // No suggested command holds the preset's name unquoted.
  CHECK(r.out.find("--preset lr $(") == std::string::npos);
  CHECK_FALSE(fs::exists(root / "PWNED"));
}

TEST_CASE("a sweep.json that lists no runs is refused by sweep status and run-one, not shown as a sweep of 0 points") {
  const TempDir root("manifest_no_runs");
  fs::create_directories(root / "sweep");
  std::ofstream(root / "sweep" / "sweep.json") << R"({"base": {}, "grid": {}, "runs": []})";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"sweep", "status", (root / "sweep").string()},
        std::vector<std::string>{"sweep", "run-one", (root / "sweep").string(), "--index", "0"}}) {
    const ProcessResult r = run_xgrad(args, merged_output());
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.out, "lists no runs"));
  }
}

TEST_CASE("a run whose summary.json is JSON no trainer writes is invalid, naming why; sweep and run-one refuse it") {
  const TempDir root("manifest_invalid_summary");
  const fs::path out = fs::absolute(root / "sweep");
  REQUIRE(run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output()).exit_code == 0);
  // Point 0 finished; then its summary.json gained an accuracy of 2, which LengthEval::from_json refuses. It is not a
  // summary cut short: resuming or redoing the run would silently replace it.
  const fs::path summary = out / "runs" / kNames[0] / "summary.json";
  nlohmann::json damaged = nlohmann::json::parse(read_text(summary));
  damaged["length_eval"] = {{{"setting", "n_pairs"},
                             {"value", 16},
                             {"seq_len", 33},
                             {"loss", 0.1},
                             {"accuracy", 2},
                             {"max_prob_mean", 0.5},
                             {"entropy_mean", 1.0}}};
  std::ofstream(summary, std::ios::trunc) << damaged.dump();
  const std::string kept = read_text(summary);
  const fs::path second = out / "runs" / kNames[1] / "summary.json";  // the sweep names both, for one fix of all
  std::ofstream(second, std::ios::trunc) << "{}";

  const std::string line = status_line(out, 0);
  CHECK(line.rfind("invalid", 0) == 0);
  CHECK(contains(line, summary.string()));
  CHECK(contains(line, "accuracy is 2"));  // the reason from_json gives
  const ProcessResult status = run_xgrad({"sweep", "status", out.string()}, merged_output());
  INFO(status.out);
  CHECK(contains(status.out, "4 points: 2 complete, 2 invalid\n"));
  CHECK(contains(status.out, "first settle the 2 invalid"));  // the advice to rerun alone would meet the refusal
  const ProcessResult compare = run_xgrad({"compare", out.string(), "--out", (root / "report").string()});
  INFO(compare.out);
  CHECK(contains(compare.out, "note: 2 of 4 grid points of the sweep " + out.string() + " complete (2 invalid)"));
  // What the status says is what a rerun does: refused, naming the file, and the file left as it is.
  for (const std::vector<std::string>& args :
       {sweep_args(out, "20", {"--jobs", "1"}),
        std::vector<std::string>{"sweep", "run-one", out.string(), "--index", "0"}}) {
    const ProcessResult rerun = run_xgrad(args, merged_output());
    INFO(rerun.out);
    CHECK(rerun.exit_code == 2);
    CHECK(contains(rerun.out, summary.string()));
    CHECK(read_text(summary) == kept);
  }
  CHECK(contains(run_xgrad(sweep_args(out, "20", {"--jobs", "1"}), merged_output()).out, second.string()));
}

TEST_CASE("an invalid point's reason is one line of sweep status, whatever the sweep directory is named") {
  const TempDir root("manifest_invalid_named");
  const fs::path out = fs::absolute(root / "sw\nx");  // a newline in the path the reason names
  REQUIRE(run_xgrad(sweep_args(out, "5", {"--jobs", "1"}), merged_output()).exit_code == 0);
  std::ofstream(out / "runs" / kNames[0] / "summary.json", std::ios::trunc) << "{}";
  const std::string line = status_line(out, 0);
  CHECK(line.rfind("invalid", 0) == 0);
  CHECK(contains(line, "summary.json is refused"));  // on the point's row, not on a line of its own
}
