// `xgrad sweep` under faults, with the real executable and real signals: two sweeps on one --out,
// the sweep killed with SIGKILL, a hangup with and without nohup, a child killed by a signal, and the commands the
// sweep and the trainer print, pasted into bash. Every case reruns the interrupted sweep and checks each run's
// metrics.csv (all columns but step_ms) against the same sweep run without interruption.
//
// A run here takes a few thousand steps of a tiny model, long against the microseconds between seeing its
// metrics.csv grow and signalling it; where a case needs a run to stay mid-way it freezes it with SIGSTOP.
// Each TEST_CASE is its own ctest test (tests/CMakeLists.txt), so they run in parallel.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

// Runs in plan order: d_k, scale, optimizer@lr, seed; with --jobs 2 the first two start together.
const std::vector<std::string> kRuns{"dk4-none-adamw-lr0.01-s0", "dk4-none-adamw-lr0.01-s1",
                                     "dk4-sqrt_dk-adamw-lr0.01-s0", "dk4-sqrt_dk-adamw-lr0.01-s1"};

std::vector<std::string> sweep_args(const fs::path& out) {
  return {"sweep",     "--out",   out.string(), "--scale",       "none,sqrt_dk", "--d-k",  "4",
          "--seeds",   "0,1",     "--arms",     "adamw@0.01",    "--d-model",    "16",     "--batch-size",
          "8",         "--steps", "4000",       "--print-every", "100000",       "--jobs", "2",
          "--threads", "1"};
}

// How the cases start xgrad: as a shell job (a process group of its own, so that killpg reaches the sweep's
// children; own_group false for a single process), stdout and stderr in `output`, `ignored` signals set to SIG_IGN
// before exec as nohup (SIGHUP) or a script's `&` (SIGINT) do, in `cwd` if given.
ProcessOptions job(const fs::path& output, const std::vector<int>& ignored = {}, bool own_group = true,
                   const fs::path& cwd = {}) {
  ProcessOptions options;
  options.output_file = output;
  options.ignored_signals = ignored;
  options.own_group = own_group;
  options.cwd = cwd;
  return options;
}

// Waits for process `pid`, a child of this one or an orphan this process reaps (PR_SET_CHILD_SUBREAPER); its
// wait status.
int wait_status(pid_t pid) {
  int status = 0;
  pid_t got = -1;
  do got = waitpid(pid, &status, 0);
  while (got < 0 && errno == EINTR);
  REQUIRE(got == pid);
  return status;
}

// The exit code of a process that exited; fails the test (with how it ended) otherwise.
int exit_code(const ProcessResult& ended) {
  INFO("killed by signal " << ended.signal);
  REQUIRE(ended.signal == 0);
  return ended.exit_code;
}

// The signal that ended a process (xgrad re-raises the stop signal after its checkpoint); fails the test otherwise.
int killed_by(const ProcessResult& ended) {
  INFO("exited with " << ended.exit_code);
  REQUIRE(ended.signal != 0);
  return ended.signal;
}
int killed_by(int status) {
  INFO("exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  REQUIRE(WIFSIGNALED(status));
  return WTERMSIG(status);
}

std::size_t metrics_rows(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.csv");
  std::size_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  return lines > 0 ? lines - 1 : 0;
}

// The pid the run's lock file names (the process training in it), 0 if none yet.
pid_t lock_holder(const fs::path& run_dir) {
  std::ifstream in(run_dir / ".lock");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// Waits until run `name` of the sweep `sweep` (writing into `out`) has written a few rows and returns the pid
// training it.
pid_t running_child(const Process& sweep, const fs::path& out, const std::string& name) {
  const fs::path dir = out / "runs" / name;
  REQUIRE_MESSAGE(eventually([&] { return (metrics_rows(dir) >= 5 && lock_holder(dir) > 0) || sweep.ended(); }),
                  name << " never started");
  REQUIRE_MESSAGE(!sweep.ended(), "the sweep ended before " << name << " was seen running");
  return lock_holder(dir);
}

// Starts the sweep into root/sweep (its output in root/first.txt, `ignored` signals ignored) and sends `signals` to
// its whole job while both its running children are frozen mid-run, so that the signals find them there; then lets
// them go on and waits for the sweep.
ProcessResult signalled_mid_run(const fs::path& root, const std::vector<int>& signals,
                                const std::vector<int>& ignored = {}) {
  const fs::path out = root / "sweep";
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt", ignored));
  Frozen a(running_child(sweep, out, kRuns[0]));
  Frozen b(running_child(sweep, out, kRuns[1]));
  for (int sig : signals) sweep.send(sig, true);
  a.thaw();
  b.thaw();
  return sweep.wait();
}

nlohmann::json sweep_index(const fs::path& out) { return nlohmann::json::parse(read_text(out / "sweep.json")); }

nlohmann::json index_entry(const fs::path& out, const std::string& name) {
  const nlohmann::json index = sweep_index(out);  // named: a range-for over sweep_index(out).at() would not be
  for (const auto& r : index.at("runs"))
    if (r.at("name") == name) return r;
  FAIL("no run " << name << " in " << (out / "sweep.json"));
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The same sweep, never interrupted: what every interrupted-and-resumed run must equal.
const fs::path& reference_sweep() {
  static const TempDir dir("sweep_reference");
  static const bool done = [] {
    const int code = exit_code(run_xgrad(sweep_args(dir / "sweep"), job(dir / "output.txt")));
    INFO(read_text(dir / "output.txt"));
    REQUIRE(code == 0);
    return true;
  }();
  (void)done;
  static const fs::path out = dir / "sweep";
  return out;
}

// Every run of `out` is complete (in this sweep or an earlier one: "skipped") and wrote the metrics.csv of the
// uninterrupted sweep.
void check_equals_reference(const fs::path& out) {
  for (const std::string& name : kRuns) {
    INFO("run " << name);
    const std::string status = index_entry(out, name).at("status");
    CHECK((status == "complete" || status == "skipped"));
    CHECK(metrics_without_timing(out / "runs" / name) == metrics_without_timing(reference_sweep() / "runs" / name));
  }
}

// A train.log written by one process: no other process's refusal, no holes.
void check_log_whole(const fs::path& run_dir) {
  const std::string log = read_text(run_dir / "train.log");
  INFO((run_dir / "train.log").string() << ":\n" << log);
  CHECK_FALSE(contains(log, "being written by another"));
  CHECK(log.find('\0') == std::string::npos);
}

}  // namespace

TEST_CASE("sweep_faults_lock: a second sweep on the same --out exits 2 naming the first's pid and touches nothing") {
  const TempDir root("sweep_lock");
  const fs::path out = root / "sweep";
  Process first(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  Frozen child(running_child(first, out, kRuns[0]));  // the first sweep stays mid-run while the second one tries
  const std::string log_before = read_text(out / "runs" / kRuns[0] / "train.log");
  const int second = exit_code(run_xgrad(sweep_args(out), job(root / "second.txt")));
  const std::string said = read_text(root / "second.txt");
  INFO("second sweep said: " << said);
  CHECK(second == 2);
  CHECK_FALSE(contains(said, "runs into"));  // a refused sweep announces nothing
  CHECK(contains(said, "--out: " + out.string()));
  CHECK(contains(said, "(pid " + std::to_string(first.pid()) + ")"));
  CHECK(read_text(out / "runs" / kRuns[0] / "train.log") == log_before);
  child.thaw();
  const int code = exit_code(first.wait());
  INFO("first sweep said: " << read_text(root / "first.txt"));
  CHECK(code == 0);
  for (const std::string& name : kRuns) check_log_whole(out / "runs" / name);
  check_equals_reference(out);
}

TEST_CASE(
    "sweep_faults_parent_killed: children of a SIGKILLed sweep checkpoint and exit; a rerun leaves a live run "
    "alone, then resumes every run to the uninterrupted curve") {
  // Orphans are re-parented to this process, which can then wait for them and read how they ended.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const TempDir root("sweep_parent_killed");
  const fs::path out = root / "sweep";
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  const pid_t frozen = running_child(sweep, out, kRuns[0]);
  Frozen freeze(frozen);  // a run still alive when the sweep is rerun
  const pid_t other = running_child(sweep, out, kRuns[1]);
  {
    const nlohmann::json entry = index_entry(out, kRuns[1]);
    CHECK(entry.at("status") == "running");
    CHECK(entry.value("pid", nlohmann::json()) == other);
  }
  sweep.send(SIGKILL);
  sweep.wait();
  // The parent's death stops its children as a SIGTERM would: a checkpoint at the step reached, then the end by
  // SIGTERM.
  const int other_status = wait_status(other);
  INFO(kRuns[1] << "/train.log: " << read_text(out / "runs" / kRuns[1] / "train.log"));
  CHECK(killed_by(other_status) == SIGTERM);
  CHECK(fs::exists(out / "runs" / kRuns[1] / "checkpoint.safetensors"));

  // The frozen run still holds its lock: the rerun reports it (stopped, so it will not go on by itself) and does not
  // touch its directory.
  const fs::path frozen_dir = out / "runs" / kRuns[0];
  const std::string log_before = read_text(frozen_dir / "train.log");
  const std::string metrics_before = read_text(frozen_dir / "metrics.csv");
  const int rerun = exit_code(run_xgrad(sweep_args(out), job(root / "rerun.txt")));
  const std::string said = read_text(root / "rerun.txt");
  INFO("rerun said: " << said);
  CHECK(rerun == 1);  // not every run is complete
  CHECK(contains(said, kRuns[0] + " is held by a stopped process (pid " + std::to_string(frozen) + ")"));
  CHECK(contains(said, "1 held by a stopped process (pid " + std::to_string(frozen) + ";"));
  CHECK_FALSE(contains(said, "still running"));
  CHECK(read_text(frozen_dir / "train.log") == log_before);
  CHECK(read_text(frozen_dir / "metrics.csv") == metrics_before);
  {
    const nlohmann::json entry = index_entry(out, kRuns[0]);
    CHECK(entry.at("status") == "running");
    CHECK(entry.value("pid", nlohmann::json()) == frozen);
  }
  for (std::size_t i = 1; i < kRuns.size(); ++i) CHECK(index_entry(out, kRuns[i]).at("status") == "complete");
  CHECK(contains(read_text(out / "runs" / kRuns[1] / "train.log"), "resuming from"));

  // Woken, the orphan gets the SIGTERM its parent's death sent and stops with a checkpoint; the next rerun resumes it.
  freeze.thaw();
  CHECK(killed_by(wait_status(frozen)) == SIGTERM);
  const int last = exit_code(run_xgrad(sweep_args(out), job(root / "last.txt")));
  INFO("last rerun said: " << read_text(root / "last.txt"));
  CHECK(last == 0);
  CHECK(contains(read_text(frozen_dir / "train.log"), "resuming from"));
  for (const std::string& name : kRuns) check_log_whole(out / "runs" / name);
  check_equals_reference(out);
}

TEST_CASE(
    "sweep_faults_hangup: a hangup stops the sweep with checkpoints and exit 129, never '0 failed'; the rerun "
    "resumes every run to the uninterrupted curve") {
  const TempDir root("sweep_hangup");
  const fs::path out = root / "sweep";
  // A terminal hangup: SIGHUP to the whole job (the sweep and its children).
  const ProcessResult status = signalled_mid_run(root, {SIGHUP});
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(killed_by(status) == SIGHUP);  // re-raised after the checkpoints: a shell sees 129
  CHECK(contains(said, "interrupted by SIGHUP"));
  CHECK_FALSE(contains(said, "0 failed"));
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("run " << kRuns[i]);
    CHECK(index_entry(out, kRuns[i]).at("status") == "interrupted");
    CHECK(fs::exists(out / "runs" / kRuns[i] / "checkpoint.safetensors"));
    CHECK(contains(read_text(out / "runs" / kRuns[i] / "train.log"), "continue with: xgrad train --resume"));
  }
  const int rerun = exit_code(run_xgrad(sweep_args(out), job(root / "rerun.txt")));
  INFO("rerun said: " << read_text(root / "rerun.txt"));
  CHECK(rerun == 0);
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string log = read_text(out / "runs" / kRuns[i] / "train.log");
    INFO(kRuns[i] << "/train.log: " << log);
    CHECK(contains(log, "resuming from"));
    CHECK(contains(log, "stopped by SIG"));  // the first session's output is kept
  }
  check_equals_reference(out);
}

TEST_CASE(
    "sweep_faults_nohup: a sweep whose SIGHUP and SIGINT are ignored (nohup, a script's &) ignores them, and "
    "so do its children") {
  const TempDir root("sweep_nohup");
  const fs::path out = root / "sweep";
  const int code = exit_code(signalled_mid_run(root, {SIGHUP, SIGINT}, {SIGHUP, SIGINT}));
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(code == 0);
  CHECK_FALSE(contains(said, "interrupted"));
  for (const std::string& name : kRuns)
    CHECK_FALSE(contains(read_text(out / "runs" / name / "train.log"), "stopped by"));
  check_equals_reference(out);
}

TEST_CASE(
    "sweep_faults_nohup_library_handler: a SIGHUP ignored at start stays ignored when a library catches it as "
    "it loads (UCX does, under Open MPI 5), also across the OpenBLAS re-exec") {
  const TempDir root("nohup_library");
  const fs::path out = root / "run";
  ProcessOptions options = job(root / "log.txt", {SIGHUP});
  options.environment.emplace_back(
      "LD_PRELOAD", xgrad::test::required_env("XGRAD_TEST_SIGHUP_LIBRARY", "the path of libxgrad_test_sighup.so"));
  Process train(xgrad_command({"train", "--out", out.string(), "--steps", "1000000", "--d-model", "8", "--batch-size",
                               "2", "--print-every", "1000000"}),
                options);
  REQUIRE(eventually([&] { return metrics_rows(out) >= 5 || train.ended(); }));
  REQUIRE_FALSE(train.ended());
  train.send(SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const bool survived = !train.ended();
  train.send(SIGTERM);
  const ProcessResult status = train.wait();
  INFO("xgrad said: " << read_text(root / "log.txt"));
  CHECK(survived);
  CHECK(killed_by(status) == SIGTERM);
  CHECK_FALSE(contains(read_text(root / "log.txt"), "stopped by SIGHUP"));
}

TEST_CASE("sweep_faults_child_killed: a child killed by a signal is reported by its signal; the rerun redoes it") {
  const TempDir root("sweep_child_killed");
  const fs::path out = root / "sweep";
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  kill(running_child(sweep, out, kRuns[0]), SIGKILL);
  const int code = exit_code(sweep.wait());
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(code == 1);
  CHECK(contains(said, kRuns[0] + ": FAILED (killed by SIGKILL; see "));
  CHECK_FALSE(contains(said, "exit -1"));
  CHECK(index_entry(out, kRuns[0]).at("status") == "failed");
  for (std::size_t i = 1; i < kRuns.size(); ++i) CHECK(index_entry(out, kRuns[i]).at("status") == "complete");
  CHECK(exit_code(run_xgrad(sweep_args(out), job(root / "rerun.txt"))) == 0);
  check_equals_reference(out);
}

TEST_CASE("sweep_faults_shell_quoting: the printed 'xgrad compare' and 'continue with' commands work in bash") {
  const TempDir root("sweep_quoting");
  // Directory names a shell would split or choke on.
  const fs::path sweep_dir = root / "a sweep's $HOME";
  const fs::path run_dir = root / "it's a \"run\" (1)";
  const std::string bin_dir = fs::path(XGRAD_BIN).parent_path().string();
  setenv("PATH", (bin_dir + ":" + std::getenv("PATH")).c_str(), 1);
  // Runs the command `output` prints after `prefix` (which ends with "xgrad ") as a line of a bash script.
  auto pasted = [&](const std::string& output, const std::string& prefix) {
    const auto at = output.find(prefix);
    REQUIRE_MESSAGE(at != std::string::npos, "no '" << prefix << "' in: " << output);
    const auto from = at + prefix.size() - std::string("xgrad ").size();
    const std::string command = output.substr(from, output.find('\n', from) - from);
    INFO("pasted: " << command);
    std::ofstream(root / "pasted.sh") << command << "\n";
    // In root: relative paths are printed as given. The script holds only the pasted line.
    ProcessOptions in_root = merged_output();
    in_root.cwd = root.path();
    const ProcessResult bash = run_process({"/bin/bash", (root / "pasted.sh").string()}, in_root);
    const int code = exit_code(bash);
    INFO("bash said: " << bash.out);
    CHECK(code == 0);
  };

  CHECK(exit_code(run_xgrad({"sweep", "--out", sweep_dir.string(), "--scale", "none", "--d-k", "4", "--seeds", "0",
                             "--arms", "adamw@0.01", "--d-model", "16", "--steps", "3", "--jobs", "1"},
                            job(root / "sweep.txt"))) == 0);
  pasted(read_text(root / "sweep.txt"), "Compare the runs with: xgrad ");
  CHECK(fs::exists(sweep_dir / "report.md"));

  Process train(xgrad_command({"train", "--out", run_dir.string(), "--d-model", "16", "--batch-size", "8", "--steps",
                               "4000", "--print-every", "100000", "--checkpoint-every", "0", "--threads", "1"}),
                job(root / "train.txt", {}, false));
  REQUIRE(eventually([&] { return metrics_rows(run_dir) >= 5; }));
  train.send(SIGTERM);
  CHECK(killed_by(train.wait()) == SIGTERM);
  pasted(read_text(root / "train.txt"), "continue with: xgrad ");
  CHECK(fs::exists(run_dir / "summary.json"));

  // Relative directories whose names start with '-' (given as --out=-dash), which a command would take for flags.
  CHECK(exit_code(run_xgrad({"sweep", "--out=-sweep", "--scale", "none", "--d-k", "4", "--seeds", "0", "--arms",
                             "adamw@0.01", "--d-model", "16", "--steps", "3", "--jobs", "1"},
                            job(root / "dash_sweep.txt", {}, true, root.path()))) == 0);
  pasted(read_text(root / "dash_sweep.txt"), "Compare the runs with: xgrad ");
  CHECK(fs::exists(root / "-sweep" / "report.md"));
  Process dash(xgrad_command({"train", "--out=-run", "--d-model", "16", "--batch-size", "8", "--steps", "4000",
                              "--print-every", "100000", "--checkpoint-every", "0", "--threads", "1"}),
               job(root / "dash_train.txt", {}, false, root.path()));
  REQUIRE(eventually([&] { return metrics_rows(root / "-run") >= 5; }));
  dash.send(SIGTERM);
  CHECK(killed_by(dash.wait()) == SIGTERM);
  pasted(read_text(root / "dash_train.txt"), "continue with: xgrad ");
  CHECK(fs::exists(root / "-run" / "summary.json"));
}

TEST_CASE("sweep_faults_shell_loop: Ctrl-C stops a shell loop over xgrad train, after the run's checkpoint") {
  const TempDir root("sweep_shell_loop");
  // bash goes on with a loop after a command that exited, even with 130, and stops it when the command died of the
  // SIGINT it got too.
  const std::string script =
      "for i in 1 2; do \"$0\" train --out \"$1/run$i\" --d-model 16 --batch-size 8 --steps 4000 "
      "--print-every 100000 --checkpoint-every 0 --threads 1; done";
  // A job of its own, as in an interactive shell: Ctrl-C signals the whole of it.
  Process bash({"/bin/bash", "-c", script, XGRAD_BIN, root.path().string()}, job(root / "output.txt"));
  REQUIRE_MESSAGE(eventually([&] { return metrics_rows(root / "run1") >= 5 || bash.ended(); }), "run1 never started");
  bash.send(SIGINT, true);
  const ProcessResult status = bash.wait();
  INFO("output: " << read_text(root / "output.txt"));
  CHECK(killed_by(status) == SIGINT);
  CHECK_FALSE(fs::exists(root / "run2"));
  CHECK(fs::exists(root / "run1" / "checkpoint.safetensors"));
  CHECK(contains(read_text(root / "output.txt"), "stopped by SIGINT"));
}

TEST_CASE("sweep_faults_term_ignored: a sweep started with SIGTERM ignored still stops its runs with a checkpoint") {
  const TempDir root("sweep_term_ignored");
  const fs::path out = root / "sweep";
  // `trap "" TERM; exec xgrad sweep ...` in a script: the sweep ignores SIGTERM, the signal it stops its runs with.
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt", {SIGTERM}));
  running_child(sweep, out, kRuns[0]);
  running_child(sweep, out, kRuns[1]);
  sweep.send(SIGINT);  // the sweep alone: it passes the stop on to its runs
  const ProcessResult status = sweep.wait();
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(killed_by(status) == SIGINT);
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("run " << kRuns[i] << ": " << read_text(out / "runs" / kRuns[i] / "train.log"));
    CHECK(index_entry(out, kRuns[i]).at("status") == "interrupted");
    CHECK(contains(read_text(out / "runs" / kRuns[i] / "train.log"), "stopped by SIGTERM"));
  }
}

TEST_CASE("sweep_faults_stopped_child: a sweep stopped while a child is stopped (SIGSTOP) wakes it to checkpoint") {
  const TempDir root("sweep_stopped_child");
  const fs::path out = root / "sweep";
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  Frozen child(running_child(sweep, out, kRuns[0]));
  running_child(sweep, out, kRuns[1]);
  sweep.send(SIGTERM);
  REQUIRE_MESSAGE(eventually([&] { return sweep.ended(); }), "the sweep waits for its stopped child forever");
  const ProcessResult status = sweep.wait();
  INFO("sweep said: " << read_text(root / "first.txt"));
  CHECK(killed_by(status) == SIGTERM);
  INFO(kRuns[0] << "/train.log: " << read_text(out / "runs" / kRuns[0] / "train.log"));
  CHECK(index_entry(out, kRuns[0]).at("status") == "interrupted");
  CHECK(fs::exists(out / "runs" / kRuns[0] / "checkpoint.safetensors"));
}

TEST_CASE(
    "sweep_faults_stale_running: a run another process held when the sweep started, and that ended since, is "
    "not reported running at the end") {
  const TempDir root("sweep_stale_running");
  const fs::path out = root / "sweep";
  const fs::path held = out / "runs" / kRuns[0];
  fs::create_directories(held);
  // Another process holding the run's lock (as a run left by a killed sweep does) and then ending.
  // bash opens the lock file on descriptor 3, flock(1) locks it, bash writes its pid there and becomes `sleep`,
  // which keeps the pid and the descriptor, so the lock, until killed. The path is an argument, never script text.
  Process holder({"/bin/bash", "-c", "exec 3<>\"$1\" && flock 3 && echo $$ >&3 && exec sleep 100000", "bash",
                  (held / ".lock").string()});
  REQUIRE(eventually([&] { return lock_holder(held) == holder.pid() || holder.ended(); }));
  REQUIRE_FALSE(holder.ended());
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  // The sweep stays mid-way (a child of its frozen) until the holder has ended.
  Frozen child(running_child(sweep, out, kRuns[1]));
  REQUIRE(eventually([&] { return contains(read_text(root / "first.txt"), "left alone") || sweep.ended(); }));
  {
    const std::string said = read_text(root / "first.txt");
    INFO("sweep said: " << said);
    CHECK(contains(said, kRuns[0] + " is still running (pid " + std::to_string(holder.pid()) + ")"));
    CHECK(index_entry(out, kRuns[0]).at("status") == "running");
  }
  holder.send(SIGKILL);
  holder.wait();
  child.thaw();
  const int code = exit_code(sweep.wait());
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(code == 1);  // one run not done
  CHECK(contains(said, kRuns[0] + " (left alone): the other process has ended since, leaving it pending"));
  CHECK_FALSE(contains(said, "still running in another process"));
  CHECK(index_entry(out, kRuns[0]).at("status") == "pending");
  CHECK(index_entry(out, kRuns[0]).at("pid").is_null());
}

TEST_CASE("sweep_faults_broken_pipe: a sweep whose output pipe is closed (`| head -1`) runs to its end") {
  const TempDir root("sweep_broken_pipe");
  const fs::path out = root / "sweep";
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  close(pipe_fds[0]);      // the reader is gone before the sweep writes a line
  ProcessOptions options;  // SIGPIPE at its default action, as every signal Process starts a child with
  options.stdout_fd = pipe_fds[1];
  Process sweep(
      xgrad_command({"sweep", "--out", out.string(), "--scale", "none", "--d-k", "4", "--seeds", "0", "--arms",
                     "adamw@0.01", "--d-model", "16", "--steps", "20", "--jobs", "1", "--threads", "1"}),
      options);
  close(pipe_fds[1]);
  const ProcessResult ended = sweep.wait();
  const int code = exit_code(ended);
  INFO("stderr: " << ended.err);
  CHECK(code == 0);
  CHECK(index_entry(out, "dk4-none-adamw-lr0.01-s0").at("status") == "complete");
}

TEST_CASE(
    "sweep_faults_deleted_run: a run whose directory is deleted while it trains is reported without naming a "
    "log that is gone") {
  const TempDir root("sweep_deleted_run");
  const fs::path out = root / "sweep";
  Process sweep(xgrad_command(sweep_args(out)), job(root / "first.txt"));
  Frozen child(running_child(sweep, out, kRuns[0]));
  fs::remove_all(out / "runs" / kRuns[0]);
  child.thaw();
  const int code = exit_code(sweep.wait());
  const std::string said = read_text(root / "first.txt");
  INFO("sweep said: " << said);
  CHECK(code == 1);
  CHECK(contains(said, kRuns[0] + ": FAILED (exit "));
  CHECK(contains(said, "its directory " + (out / "runs" / kRuns[0]).string() + " is gone, and its train.log with it"));
  CHECK_FALSE(contains(said, "see " + (out / "runs" / kRuns[0] / "train.log").string()));
}

TEST_CASE(
    "sweep_faults_lock_pid: of two `xgrad train --resume` of one run started together, the one refused names "
    "the other's pid") {
  const TempDir root("sweep_lock_pid");
  const fs::path dir = root / "run";
  REQUIRE(exit_code(run_xgrad({"train", "--out", dir.string(), "--d-model", "8", "--batch-size", "2", "--steps", "1",
                               "--threads", "1", "--print-every", "100"},
                              job(root / "first.txt"))) == 0);
  // Both processes do the same work up to the lock, so the second often asks just after the first took it, before
  // it wrote its pid.
  std::size_t refused = 0;
  for (int i = 0; i < 20; ++i) {
    const std::vector<std::string> args{"train", "--resume", dir.string(), "--steps", std::to_string(i + 2)};
    Process a(xgrad_command(args), job(root / "a.txt")), b(xgrad_command(args), job(root / "b.txt"));
    const int code_a = exit_code(a.wait()), code_b = exit_code(b.wait());
    for (const auto& [code, output, other] :
         {std::make_tuple(code_a, root / "a.txt", b.pid()), std::make_tuple(code_b, root / "b.txt", a.pid())}) {
      const std::string said = read_text(output);
      INFO("attempt " << i << ": " << said);
      CHECK((code == 0 || code == 2));
      CHECK_FALSE(contains(said, "pid unknown"));
      if (code == 2) {
        ++refused;
        CHECK(contains(said, "is being written by another xgrad process (pid " + std::to_string(other) + ")"));
      }
    }
  }
  MESSAGE(refused << " of 20 pairs had one process refused");
}

TEST_CASE("sweep_faults_file_too_large: a sweep that cannot write sweep.json says why and leaves no temporary file") {
  const TempDir root("sweep_file_too_large");
  const fs::path out = root / "sweep";
  // Files of at most 4 KiB, as on a disk that fills up: a run's config file (about 1 KiB) fits, the index of 8
  // runs (about 15 KiB) does not.
  ProcessOptions options = merged_output();
  options.ignored_signals = {SIGXFSZ};
  options.file_size_limit = 4096;
  const ProcessResult ended =
      run_xgrad({"sweep", "--out", out.string(), "--scale", "none,sqrt_dk", "--d-k", "4,8", "--seeds", "0,1", "--arms",
                 "adamw@0.01", "--d-model", "16", "--steps", "3", "--jobs", "1", "--threads", "1"},
                options);
  const int code = exit_code(ended);
  const std::string said = ended.out;
  INFO("sweep said: " << said);
  CHECK(code == 1);
  CHECK(contains(said, "writing " + (out / "sweep.json").string() + " failed: File too large"));
  for (const auto& entry : fs::directory_iterator(out))
    CHECK_MESSAGE(entry.path().filename().string().rfind(".sweep.json", 0) != 0, entry.path());
}
