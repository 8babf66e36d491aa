// The commands that write into a directory someone else may have filled (explain, export tensorboard): nothing is
// written or deleted through a symbolic link found there, two writers into one directory each write a whole file,
// a full disk (a small tmpfs) leaves the old outputs whole with an error naming the cause, and values that cannot be
// written faithfully are refused by name.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "platform/atomic_file.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/small_disk.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/tensorboard.h"
#include "train/trainer.h"

using namespace xgrad::train;
using xgrad::testing::Process;
using xgrad::testing::ProcessResult;
using xgrad::testing::read_text;
using xgrad::testing::run_xgrad;
using xgrad::testing::SmallDisk;
using xgrad::testing::TempDir;
using xgrad::testing::tiny_run;
using xgrad::testing::xgrad_command;
namespace fs = std::filesystem;

namespace {

// The smallest explain: two head sizes, the default scalings.
std::vector<std::string> explain_args(const fs::path& out) {
  return {"explain", "--d-k", "4,8", "--d-model", "16", "--batch-size", "2", "--out", out.string()};
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Every entry below `dir` (links not followed): a regular file's bytes, "link -> target" for a link, "dir" for a
// directory.
std::map<std::string, std::string> tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = fs::relative(it->path(), dir).string();
    const fs::file_status s = it->symlink_status();
    if (fs::is_symlink(s))
      out[name] = "link -> " + fs::read_symlink(it->path()).string();
    else if (fs::is_directory(s))
      out[name] = "dir";
    else
      out[name] = read_text(it->path());
  }
  return out;
}

// "" when explain's outputs in `out` are whole (each ends as its kind of file ends), else the first that is not.
std::string whole_outputs(const fs::path& out) {
  auto ends_with = [](const std::string& text, const std::string& end) {
    return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
  };
  if (!ends_with(read_text(out / "explain.html"), "</html>\n")) return "explain.html";
  if (read_text(out / "explain.md").find("## The numbers") == std::string::npos) return "explain.md";
  for (const auto& entry : fs::directory_iterator(out / "figures")) {
    const std::string text = read_text(entry.path());
    if ((entry.path().extension() == ".svg" && !ends_with(text, "</svg>\n\n") && !ends_with(text, "</svg>\n")) ||
        (entry.path().extension() == ".png" && text.find("IEND") == std::string::npos))
      return entry.path().string();
  }
  return "";
}

// Names in `dir` that a writer's temporary files or directories have (a leading '.' and ".tmp-").
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '.' && name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// The records of the event file at `path`, each Event without its wall_time (the one field two exports of one run
// write differently), after checking every record's length and CRCs; `problem` says what is wrong, if anything.
std::vector<std::string> event_records(const fs::path& path, std::string& problem) {
  const std::string bytes = read_text(path);
  std::vector<std::string> records;
  auto u32 = [&](std::size_t i) {
    std::uint32_t v = 0;
    std::memcpy(&v, bytes.data() + i, 4);
    return v;
  };
  for (std::size_t at = 0; at < bytes.size();) {
    problem = "a record cut or damaged at byte " + std::to_string(at);
    if (bytes.size() - at < 12) return records;
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    if (u32(at + 8) != masked_crc32c(std::string_view(bytes).substr(at, 8)) || bytes.size() - at - 12 < length + 4 ||
        u32(at + 12 + length) != masked_crc32c(std::string_view(bytes).substr(at + 12, length)))
      return records;
    const std::string event = bytes.substr(at + 12, length);
    records.push_back(event.size() >= 9 && event[0] == 0x09 ? event.substr(9) : event);  // Event.wall_time
    at += 16 + length;
  }
  problem.clear();
  return records;
}

// What is wrong with the event file at `path` ("" when nothing): every record's length and CRCs check, and it holds
// `events` records.
std::string event_file_problem(const fs::path& path, std::size_t events) {
  std::string problem;
  const std::size_t records = event_records(path, problem).size();
  if (!problem.empty()) return problem;
  return records == events ? "" : std::to_string(records) + " records, not " + std::to_string(events);
}

std::vector<fs::path> event_file_paths(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind(kEventFilePrefix, 0) == 0) out.push_back(entry.path());
  return out;
}

// A tiny trained run in `dir` of `steps` steps.
void trained_tiny_run(const fs::path& dir, std::size_t steps = 12) {
  TrainConfig config = tiny_run(dir.string(), steps);
  train(config);
}

}  // namespace

TEST_CASE("explain: links in its output directory are replaced, never written through") {
  const TempDir dir("writers_explain_links");
  const fs::path out = dir / "out", victims = dir / "victims";
  fs::create_directories(out / "figures" / "data");
  fs::create_directories(victims / "linked_figures");
  for (const std::string name : {"md", "html", "gp", "log", "dat"}) write_file(victims / name, "victim " + name);
  write_file(victims / "linked_figures" / "kept", "victim figures");
  fs::create_symlink(victims / "md", out / "explain.md");
  fs::create_symlink(victims / "html", out / "explain.html");
  fs::create_symlink(victims / "gp", out / "figures" / "score_hist.gp");
  fs::create_symlink(victims / "log", out / "figures" / "gnuplot.log");
  fs::create_symlink(victims / "dat", out / "figures" / "data" / "score_hist_0_0.dat");
  const auto before = tree(victims);

  const ProcessResult first = run_xgrad(explain_args(out));
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  CHECK(tree(victims) == before);
  for (const fs::path& written : {out / "explain.md", out / "explain.html", out / "figures" / "score_hist.gp"})
    CHECK_MESSAGE(fs::is_regular_file(fs::symlink_status(written)), written);
  CHECK(read_text(out / "explain.md").find("# Why divide") == 0);
  CHECK(temporaries(out).empty());

  // The figures directory itself a link: replaced by a directory, the linked one untouched.
  fs::remove_all(out / "figures");
  fs::create_symlink(victims / "linked_figures", out / "figures");
  const ProcessResult second = run_xgrad(explain_args(out));
  REQUIRE_MESSAGE(second.exit_code == 0, second.err);
  CHECK(tree(victims) == before);
  CHECK(fs::is_directory(fs::symlink_status(out / "figures")));
  CHECK(fs::exists(out / "figures" / "score_hist.gp"));
  CHECK(temporaries(out).empty());
}

TEST_CASE("explain: gnuplot.log starts afresh each run") {
  const TempDir dir("writers_explain_log");
  const fs::path out = dir / "out";
  fs::create_directories(out / "figures");
  write_file(out / "figures" / "gnuplot.log", "from an earlier run\n");
  const ProcessResult r = run_xgrad(explain_args(out));
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(read_text(out / "figures" / "gnuplot.log").find("from an earlier run") == std::string::npos);
}

// Not a test that failed before (a stop had to fall inside a write of a millisecond): a guard that a stop at any
// moment leaves explain's three outputs of one run, each whole, and that the next run clears what it left.
TEST_CASE("explain: a SIGTERM at any moment leaves the old outputs or the new ones, all of one run") {
  const TempDir dir("writers_explain_stop");
  const fs::path out = dir / "out";
  REQUIRE(run_xgrad(explain_args(out)).exit_code == 0);
  std::vector<std::string> larger = explain_args(out);
  larger[2] = "4,8,16";
  for (int delay_ms : {300, 700, 1000, 1300, 1600, 2000}) {
    CAPTURE(delay_ms);
    Process p(xgrad_command(larger));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    p.send(SIGTERM);
    p.wait();
    CHECK(whole_outputs(out) == "");
    const bool md_new = read_text(out / "explain.md").find("\n| 16 |") != std::string::npos;
    CHECK(md_new == (read_text(out / "explain.html").find("\"d_ks\":[4,8,16]") != std::string::npos));
    CHECK(md_new == (read_text(out / "figures" / "score_hist.gp").find("d_k 16") != std::string::npos));
  }
  REQUIRE(run_xgrad(larger).exit_code == 0);
  CHECK(temporaries(out).empty());
}

TEST_CASE("explain: a full disk leaves the old outputs whole and says why") {
  const TempDir dir("writers_explain_full");
  SmallDisk disk(dir / "disk", 8 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path out = dir / "disk" / "out";
  const ProcessResult first = run_xgrad(explain_args(out));
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  const auto old = tree(out);
  std::size_t outputs = 0;
  for (const auto& [name, bytes] : old) outputs += bytes.size();
  std::size_t failed = 0;
  // From no room at all to nearly enough for a second copy: each cut falls somewhere else.
  // Each later run measures one head size more: its outputs are larger than those they replace.
  std::vector<std::string> larger = explain_args(out);
  larger[2] = "4,8,16";
  for (std::size_t left : {std::size_t{0}, outputs / 8, outputs / 3, outputs / 2, outputs * 3 / 4}) {
    CAPTURE(left);
    disk.fill_leaving(left);
    const ProcessResult r = run_xgrad(larger);
    if (r.exit_code == 0) {  // it fitted: all new, each whole
      CHECK(whole_outputs(out) == "");
      continue;
    }
    ++failed;
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("No space left on device") != std::string::npos);
    CHECK(r.err.find("compare") == std::string::npos);  // explain wrote the figures
    CHECK(tree(out) == old);
    CHECK(temporaries(out).empty());
  }
  CHECK(failed >= 2);
}

TEST_CASE("export tensorboard: a linked subdirectory of --out is refused and its target left alone") {
  const TempDir dir("writers_export_link");
  trained_tiny_run(dir / "runs" / "r1", 3);
  const fs::path out = dir / "out", victim = dir / "victim";
  fs::create_directories(out);
  fs::create_directories(victim);
  write_file(victim / (std::string(kEventFilePrefix) + "1.other"), "someone's events");
  const auto before = tree(victim);
  for (const auto& entry :
       std::vector<std::pair<fs::path, fs::path>>{{dir / "runs" / "r1", out / "r1"}, {dir / "runs", out / "runs"}}) {
    // Named, not a structured binding: doctest's assertions are lambdas, which C++17 lets no binding enter.
    const fs::path& input = entry.first;
    const fs::path& link = entry.second;
    CAPTURE(link);
    fs::create_symlink(victim, link);
    const ProcessResult r = run_xgrad({"export", "tensorboard", input.string(), "--out", out.string()});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(link.string()) != std::string::npos);
    CHECK(tree(victim) == before);
    fs::remove(link);
  }
}

TEST_CASE("export tensorboard: two exports into one directory at once each write a whole event file") {
  const TempDir dir("writers_export_concurrent");
  // Two runs of one name, of different lengths: both are exported to out/r1.
  const fs::path first = dir / "a" / "r1", second = dir / "b" / "r1", out = dir / "out";
  trained_tiny_run(first, 3000);
  trained_tiny_run(second, 2000);
  // What each export writes alone (the file's bytes follow from metrics.csv and its modification time).
  std::vector<std::vector<std::string>> alone;
  for (const fs::path& run : {first, second}) {
    const fs::path reference = dir / ("alone_" + std::to_string(alone.size()));
    REQUIRE(run_xgrad({"export", "tensorboard", run.string(), "--out", reference.string()}).exit_code == 0);
    const std::vector<fs::path> files = event_file_paths(reference / "r1");
    REQUIRE(files.size() == 1);
    REQUIRE(event_file_problem(files.front(), alone.empty() ? 3001 : 2001) == "");
    std::string problem;
    alone.push_back(event_records(files.front(), problem));
  }
  // "" when `file` holds what one of the exports writes alone; else its problem.
  auto whole = [&](const fs::path& file) {
    std::string problem;
    const std::vector<std::string> records = event_records(file, problem);
    if (!problem.empty()) return problem;
    return records == alone[0] || records == alone[1] ? std::string() : "whole records, but a mix of both runs";
  };
  for (int attempt = 0; attempt < 5; ++attempt) {
    CAPTURE(attempt);
    Process a(xgrad_command({"export", "tensorboard", first.string(), "--out", out.string()}));
    Process b(xgrad_command({"export", "tensorboard", second.string(), "--out", out.string()}));
    const ProcessResult ra = a.wait(), rb = b.wait();
    for (const ProcessResult& r : {ra, rb}) {
      if (r.exit_code != 0) {
        CHECK(r.exit_code == 1);
        CHECK_FALSE(r.err.empty());
        continue;
      }
      const fs::path written = r.out.substr(0, r.out.find("  ("));
      // The other export may have replaced it since; what it names, if there, is whole.
      if (fs::exists(written)) CHECK_MESSAGE(whole(written) == "", written);
    }
    const std::vector<fs::path> files = event_file_paths(out / "r1");
    REQUIRE(files.size() == 1);
    CHECK_MESSAGE(whole(files.front()) == "", files.front());
    CHECK(temporaries(out / "r1").empty());
  }
}

TEST_CASE("export tensorboard: a step that is not a whole number in range is refused naming file, line, column") {
  const TempDir dir("writers_export_steps");
  trained_tiny_run(dir / "r1", 3);
  const fs::path metrics = dir / "r1" / "metrics.csv";
  const std::string original = read_text(metrics);
  // Steps are whole decimal numbers: hex, a sign or space, trailing text and "nan" are not read as steps (nor
  // replaced by the row's index).
  for (const std::string step : {"1.5", "1e30", "-1", "0x10", " 3", "+3", "3abc", "nan", "9223372036854775808"}) {
    CAPTURE(step);
    // Line 3: the second row; its first cell is the step.
    std::string text = original;
    const std::size_t row = text.find('\n', text.find('\n') + 1) + 1;
    text.replace(row, text.find(',', row) - row, step);
    write_file(metrics, text);
    const ProcessResult r =
        run_xgrad({"export", "tensorboard", (dir / "r1").string(), "--out", (dir / "out").string()});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(metrics.string()) != std::string::npos);
    CHECK(r.err.find("line 3") != std::string::npos);
    CHECK(r.err.find("step") != std::string::npos);
    if (fs::exists(dir / "out" / "r1")) CHECK(event_file_paths(dir / "out" / "r1").empty());
  }
}

TEST_CASE("export tensorboard: the largest int64 step is exported exactly, not through a double; 1e+09 as written") {
  const TempDir dir("writers_export_max_step");
  trained_tiny_run(dir / "r1", 3);
  const fs::path metrics = dir / "r1" / "metrics.csv";
  std::string text = read_text(metrics);
  const std::size_t last_row = text.rfind('\n', text.size() - 2) + 1;
  text.replace(last_row, text.find(',', last_row) - last_row, "9223372036854775807");
  // The first row as metrics.csv writes step 10^9 (%.9g): the writer's own form of a step is one.
  const std::size_t first_row = text.find('\n') + 1;
  text.replace(first_row, text.find(',', first_row) - first_row, "1e+09");
  write_file(metrics, text);
  const ProcessResult r = run_xgrad({"export", "tensorboard", (dir / "r1").string(), "--out", (dir / "out").string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const std::vector<fs::path> files = event_file_paths(dir / "out" / "r1");
  REQUIRE(files.size() == 1);
  // Event.step (field 2, varint) 2^63 - 1: the tag byte 0x10, eight bytes of 0xFF, 0x7F.
  const std::string step_field = std::string("\x10") + std::string(8, '\xFF') + "\x7F";
  CHECK(read_text(files.front()).find(step_field) != std::string::npos);
}

TEST_CASE("export tensorboard: a run's name reaches the terminal with its escapes shown, not obeyed") {
  const TempDir dir("writers_export_escapes");
  const fs::path run = dir / "r\x1b]0;title\x07\nx";
  trained_tiny_run(run, 3);
  const ProcessResult r = run_xgrad({"export", "tensorboard", run.string(), "--out", (dir / "out").string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("\\e]0;title") != std::string::npos);
}

TEST_CASE("export tensorboard: a full disk gives an error naming the event file and the cause, and no file") {
  const TempDir dir("writers_export_full");
  trained_tiny_run(dir / "r1", 400);
  SmallDisk disk(dir / "disk", 1 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path out = dir / "disk" / "out";
  fs::create_directories(out / "r1");
  disk.fill_leaving(8192);
  const ProcessResult r = run_xgrad({"export", "tensorboard", (dir / "r1").string(), "--out", out.string()});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("No space left on device") != std::string::npos);
  CHECK(r.err.find((out / "r1" / kEventFilePrefix).string()) != std::string::npos);
  CHECK(event_file_paths(out / "r1").empty());
  CHECK(temporaries(out / "r1").empty());
}

TEST_CASE("platform::StagedFile: a link at the target is replaced; an unfinished file is removed") {
  const TempDir dir("writers_staged_file");
  write_file(dir / "victim", "victim");
  fs::create_symlink(dir / "victim", dir / "target");
  xgrad::platform::write_file_atomically(dir / "target", "new");
  CHECK(read_text(dir / "victim") == "victim");
  CHECK(fs::is_regular_file(fs::symlink_status(dir / "target")));
  CHECK(read_text(dir / "target") == "new");
  {
    xgrad::platform::StagedFile cut(dir / "target");
    cut.write("half");
  }
  CHECK(read_text(dir / "target") == "new");
  CHECK(temporaries(dir).empty());
}

TEST_CASE("train --tensorboard on a full disk: the error names the real file and the cause") {
  const TempDir dir("writers_train_full");
  SmallDisk disk(dir / "disk", 1 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path run = dir / "disk" / "r1";
  for (const bool tensorboard : {false, true}) {
    CAPTURE(tensorboard);
    disk.fill_leaving(24 << 10);
    std::vector<std::string> args{"train",         "--d-model", "16",          "--steps", "2000",
                                  "--print-every", "1000",      "--overwrite", "--out",   run.string()};
    if (tensorboard) args.push_back("--tensorboard");
    const ProcessResult r = run_xgrad(args);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("No space left on device") != std::string::npos);
    CHECK(r.err.find(".tmp-") == std::string::npos);
    MESSAGE(r.err);
  }
}

namespace {

volatile std::sig_atomic_t terms_received = 0;
void count_term(int) { terms_received = terms_received + 1; }

}  // namespace

TEST_CASE("platform::StopSignalsHeld: a SIGTERM while held arrives when the hold ends") {
  struct sigaction action {
  }, previous{};
  action.sa_handler = count_term;
  sigemptyset(&action.sa_mask);
  REQUIRE(::sigaction(SIGTERM, &action, &previous) == 0);
  terms_received = 0;
  {
    const xgrad::platform::StopSignalsHeld held;
    ::kill(::getpid(), SIGTERM);
    CHECK(terms_received == 0);
  }
  CHECK(terms_received == 1);
  ::sigaction(SIGTERM, &previous, nullptr);
}

TEST_CASE("platform::StopSignalsHeld: a SIGTERM that another thread would take waits for the hold's end too") {
  // A process-directed signal goes to any thread that does not block it (OpenBLAS starts such a thread when it
  // loads), so holding it back in the renaming thread alone would let its default action end the process mid-rename.
  // In a child of its own, which the signal is to end: "held" must be written before it does.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::signal(SIGTERM, SIG_DFL);
    std::thread other([] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); });
    {
      const xgrad::platform::StopSignalsHeld held;
      ::kill(::getpid(), SIGTERM);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // time for the other thread to take it
      (void)!::write(pipe_fds[1], "held", 4);
    }
    (void)!::write(pipe_fds[1], "-survived", 9);
    other.join();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string seen;
  char buf[64];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) seen.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(seen == "held");  // the hold's work was done, and the signal ended the process right after it
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

namespace {

// The smallest sweep: one run of five steps.
std::vector<std::string> sweep_args(const fs::path& out) {
  return {"sweep", "--out",  out.string(), "--scale", "none", "--d-k",     "16", "--seeds",
          "0",     "--arms", "sgd@0.1",    "--steps", "5",    "--d-model", "16"};
}

}  // namespace

TEST_CASE("sweep: links planted beside sweep.json or at sweep.sbatch are replaced, never written through") {
  const TempDir dir("writers_sweep_links");
  const fs::path index_victim = dir / "index_victim", victim = dir / "victim";
  write_file(index_victim, "victim\n");
  write_file(victim, "victim\n");
  const fs::perms perms = fs::status(victim).permissions();
  fs::create_directories(dir / "s1");
  fs::create_symlink(index_victim, dir / "s1" / "sweep.json.tmp");
  const ProcessResult local = run_xgrad(sweep_args(dir / "s1"));
  REQUIRE_MESSAGE(local.exit_code == 0, local.err);
  CHECK(fs::is_regular_file(fs::symlink_status(dir / "s1" / "sweep.json")));
  CHECK(read_text(index_victim) == "victim\n");

  fs::create_directories(dir / "s2");
  fs::create_symlink(victim, dir / "s2" / "sweep.sbatch");
  std::vector<std::string> slurm = sweep_args(dir / "s2");
  slurm.insert(slurm.end(), {"--launcher", "slurm"});
  const ProcessResult script = run_xgrad(slurm);
  REQUIRE_MESSAGE(script.exit_code == 0, script.err);
  const fs::file_status written = fs::symlink_status(dir / "s2" / "sweep.sbatch");
  CHECK(fs::is_regular_file(written));
  CHECK((written.permissions() & fs::perms::owner_exec) != fs::perms::none);
  CHECK(read_text(victim) == "victim\n");
  CHECK(fs::status(victim).permissions() == perms);
  CHECK(temporaries(dir / "s1").empty());
  CHECK(temporaries(dir / "s2").empty());
}

TEST_CASE("experiment: a linked explain/ in its directory is refused before anything is written") {
  const TempDir dir("writers_experiment_explain_link");
  const fs::path out = dir / "x", victim = dir / "victim";
  fs::create_directories(out);
  fs::create_directories(victim);
  write_file(victim / "explain.md", "victim\n");
  fs::create_symlink(victim, out / "explain");
  const ProcessResult r =
      run_xgrad({"experiment", "--preset", "lr", "--quick", "--steps", "10", "--d-model", "16", "--out", out.string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find((out / "explain").string()) != std::string::npos);
  CHECK(tree(victim) == std::map<std::string, std::string>{{"explain.md", "victim\n"}});
  CHECK(!fs::exists(out / "runs"));
}

TEST_CASE("compare: a full disk names report.md or report.html and the cause, and leaves nothing behind") {
  const TempDir dir("writers_compare_full");
  trained_tiny_run(dir / "runs" / "r1");
  SmallDisk disk(dir / "disk", 1 << 20);
  REQUIRE_MESSAGE(disk.ok(), disk.why());
  const fs::path out = dir / "disk" / "out";
  const std::vector<std::string> args{"compare", (dir / "runs").string(), "--out", out.string(), "--plots", "false"};
  const ProcessResult first = run_xgrad(args);
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  const auto old = tree(out);
  for (std::size_t left : {std::size_t{0}, read_text(out / "report.md").size() + 4096}) {
    CAPTURE(left);
    disk.fill_leaving(left);
    const ProcessResult r = run_xgrad(args);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("No space left on device") != std::string::npos);
    CHECK((r.err.find(out.string() + "/report.md ") != std::string::npos ||
           r.err.find(out.string() + "/report.html ") != std::string::npos));
    CHECK(tree(out) == old);
  }
}

TEST_CASE("compare and explain: a directory where a file goes is refused before any rename; the old outputs stay") {
  const TempDir dir("writers_directory_in_place");
  trained_tiny_run(dir / "runs" / "r1");
  const fs::path report = dir / "report";
  const std::vector<std::string> args{"compare", (dir / "runs").string(), "--out", report.string()};
  REQUIRE(run_xgrad(args).exit_code == 0);
  fs::remove(report / "report.html");
  fs::create_directories(report / "report.html" / "kept");
  const auto compared = tree(report);
  const ProcessResult c = run_xgrad(args);
  CHECK(c.exit_code == 1);
  CHECK(c.err.find((report / "report.html").string()) != std::string::npos);
  CHECK(tree(report) == compared);

  const fs::path out = dir / "explain";
  REQUIRE(run_xgrad(explain_args(out)).exit_code == 0);
  fs::remove(out / "explain.html");
  fs::create_directories(out / "explain.html" / "kept");
  const auto explained = tree(out);
  std::vector<std::string> larger = explain_args(out);
  larger[2] = "4,8,16";
  const ProcessResult e = run_xgrad(larger);
  CHECK(e.exit_code == 1);
  CHECK(e.err.find((out / "explain.html").string()) != std::string::npos);
  CHECK(tree(out) == explained);
}

TEST_CASE("platform::StagedDirectory::undo puts the old directory back") {
  const TempDir dir("writers_staged_undo");
  fs::create_directories(dir / "figures");
  write_file(dir / "figures" / "old", "old");
  {
    xgrad::platform::StagedDirectory figures(dir / "figures");
    write_file(figures.path() / "new", "new");
    figures.commit();
    CHECK(fs::exists(dir / "figures" / "new"));
    figures.undo();
  }
  CHECK(tree(dir) == std::map<std::string, std::string>{{"figures", "dir"}, {"figures/old", "old"}});
}

namespace {

// Whether `dir` holds explain.html under a temporary name, written whole: the run is about to commit.
bool staged_page_written(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind(".explain.html.tmp-", 0) == 0 &&
        read_text(entry.path()).find("</html>") != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("explain: a second explain into one directory waits for the first's commit") {
  const TempDir dir("writers_explain_lock");
  const fs::path out = dir / "out";
  REQUIRE(run_xgrad(explain_args(out)).exit_code == 0);
  const std::string old_md = read_text(out / "explain.md");
  const auto old_figures = tree(out / "figures");
  std::vector<std::string> larger = explain_args(out);
  larger[2] = "4,8,16";
  // Another explain's commit, as the lock on the directory shows it.
  std::optional<xgrad::platform::DirectoryLock> other(std::in_place, out);
  Process p(xgrad_command(larger));
  REQUIRE(xgrad::testing::eventually([&] { return staged_page_written(out); }));
  const std::optional<ProcessResult> early = p.wait_for(std::chrono::milliseconds(1500));
  CHECK(!early);
  CHECK(read_text(out / "explain.md") == old_md);
  CHECK(tree(out / "figures") == old_figures);
  other.reset();
  const ProcessResult r = early ? *early : p.wait();
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(whole_outputs(out) == "");
  CHECK(read_text(out / "explain.md").find("\n| 16 |") != std::string::npos);
}
