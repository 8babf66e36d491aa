// The files a run reads (--text, --data) are recorded in config.json with their absolute path, size and content
// hash, and a resumed run refuses (exit 2, naming the file and what changed) to read other bytes: an edited file, one
// of another size, one moved away, or a relative path that would resolve against another working directory.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "train/config.h"
#include "train/json_file.h"

namespace fs = std::filesystem;
using namespace xgrad::testing;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// 3000 bytes of text: long enough for --seq-len 8 in both splits.
std::string some_text(char first) {
  std::string s;
  for (int i = 0; s.size() < 3000; ++i) s += std::string(1, static_cast<char>(first + i % 7)) + "abc defg hij. ";
  return s.substr(0, 3000);
}

const std::string kTiny =
    "--task char_lm --seq-len 8 --d-model 8 --batch-size 2 --checkpoint-every 2 --print-every 100";

}  // namespace

TEST_CASE("config.json records each input file; --resume refuses one whose content or size changed, or that moved") {
  const TempDir root("inputs_changed");
  const fs::path text = root / "text.txt", run = root / "run";
  const std::string original = some_text('A');
  write_file(text, original);
  REQUIRE(run_xgrad(words("train " + kTiny + " --text text.txt --steps 4 --out run"), in_directory(root)).exit_code ==
          0);
  const nlohmann::json inputs = read_json(run / "config.json").at("inputs");
  REQUIRE(inputs.size() == 1);
  CHECK(inputs.at(0).at("setting") == "text");
  CHECK(inputs.at(0).at("path") == text.string());
  CHECK(inputs.at(0).at("size") == 3000);
  CHECK(inputs.at(0).at("xxh3").get<std::string>().size() == 16);

  const std::string resume = "train --resume " + run.string() + " --steps 6";
  // Same size, one byte different.
  std::string edited = original;
  edited[1500] = edited[1500] == 'x' ? 'y' : 'x';
  write_file(text, edited);
  ProcessResult r = run_xgrad(words(resume), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("xgrad: --text: " + text.string() + " has changed since the run in " + run.string() +
                   " started: same size (3000 bytes), other content") == 0);
  // Longer.
  write_file(text, original + "more");
  r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--text: " + text.string() + " has changed since the run in " + run.string() +
                   " started: 3004 bytes now, 3000 then") != std::string::npos);
  // Moved away.
  write_file(text, original);
  fs::rename(text, root / "moved.txt");
  r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--text: " + text.string() + ", which the run in " + run.string() +
                   " was trained on, is not there now (moved or deleted?)") != std::string::npos);
  // Put back as it was: the run continues.
  fs::rename(root / "moved.txt", text);
  r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 0);
  CHECK(read_json(run / "config.json").at("inputs") == inputs);
}

TEST_CASE(
    "a relative --text path given in a --config file is stored absolute: a resume from elsewhere reads the same file") {
  const TempDir root("inputs_relative");
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  write_file(root / "a" / "text.txt", some_text('A'));
  write_file(root / "b" / "text.txt", some_text('K'));  // same name and size, other bytes
  write_file(root / "a" / "run.json",
             R"({"task": "char_lm", "text": "text.txt", "seq_len": 8, "d_model": 8, "batch_size": 2, "steps": 4,
                 "checkpoint_every": 2, "print_every": 100})");
  const fs::path run = root / "a" / "run";
  REQUIRE(run_xgrad(words("train --config run.json --out run"), in_directory(root / "a")).exit_code == 0);
  CHECK(read_json(run / "config.json").at("text") == (root / "a" / "text.txt").string());
  // From b, whose text.txt has other bytes: the run goes on with a/text.txt.
  const ProcessResult r = run_xgrad(words("train --resume " + run.string() + " --steps 6"), in_directory(root / "b"));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_json(run / "config.json").at("inputs").at(0).at("path") == (root / "a" / "text.txt").string());

  // A config.json of an older xgrad: a relative path and no fingerprint. Which file the run read cannot be known,
  // so the resume is refused instead of reading b/text.txt.
  nlohmann::json old = read_json(run / "config.json");
  old["text"] = "text.txt";
  old.erase("inputs");
  write_file(run / "config.json", old.dump(2));
  const ProcessResult refused =
      run_xgrad(words("train --resume " + run.string() + " --steps 8"), in_directory(root / "b"));
  INFO("stderr: " << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--text: " + (run / "config.json").string() +
                         " names the file by the relative path 'text.txt'") != std::string::npos);
  // Written with the absolute path, the same config.json (still without a fingerprint) resumes, with a warning.
  old["text"] = (root / "a" / "text.txt").string();
  write_file(run / "config.json", old.dump(2));
  const ProcessResult accepted =
      run_xgrad(words("train --resume " + run.string() + " --steps 8"), in_directory(root / "b"));
  CHECK(accepted.exit_code == 0);
  CHECK(accepted.out.find("records no fingerprint of --text") != std::string::npos);
  CHECK(read_json(run / "config.json").at("inputs").size() == 1);
}

TEST_CASE("--task data: every array file of the directory is recorded and checked on resume") {
  const TempDir root("inputs_data");
  fs::create_directories(root / "d");
  // 16 rows of 4 tokens, int64, written as numpy does.
  auto write_npy = [&](const fs::path& path, std::int64_t offset) {
    std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (16, 4), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
    for (std::int64_t i = 0; i < 64; ++i) {
      const std::int64_t v = (i + offset) % 10;
      bytes.append(reinterpret_cast<const char*>(&v), 8);
    }
    write_file(path, bytes);
  };
  write_npy(root / "d" / "inputs.npy", 0);
  write_npy(root / "d" / "targets.npy", 1);
  const fs::path run = root / "run";
  REQUIRE(run_xgrad(words("train --task data --data d --d-model 8 --batch-size 2 --steps 4 --checkpoint-every 2 "
                          "--print-every 100 --out run"),
                    in_directory(root))
              .exit_code == 0);
  const nlohmann::json inputs = read_json(run / "config.json").at("inputs");
  REQUIRE(inputs.size() == 2);
  CHECK(inputs.at(0).at("path") == (root / "d" / "inputs.npy").string());
  CHECK(inputs.at(1).at("path") == (root / "d" / "targets.npy").string());
  CHECK(inputs.at(1).at("setting") == "data");
  const std::string resume = "train --resume " + run.string() + " --steps 6";
  write_npy(root / "d" / "targets.npy", 2);  // same size, other targets
  ProcessResult r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--data: " + (root / "d" / "targets.npy").string() + " has changed since the run") !=
        std::string::npos);
  write_npy(root / "d" / "targets.npy", 1);
  // A held-out split added since: the task would now read files the run did not.
  write_npy(root / "d" / "eval_inputs.npy", 0);
  write_npy(root / "d" / "eval_targets.npy", 1);
  r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--data: " + (root / "d" / "eval_inputs.npy").string() + " is read now but was not when") !=
        std::string::npos);
  fs::remove(root / "d" / "eval_inputs.npy");
  fs::remove(root / "d" / "eval_targets.npy");
  // A damaged record is refused, not skipped.
  nlohmann::json config = read_json(run / "config.json");
  config["inputs"][0]["xxh3"] = "not a hash";
  write_file(run / "config.json", config.dump(2));
  r = run_xgrad(words(resume), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("'inputs' is not what xgrad writes (xxh3 is not 16 hex digits)") != std::string::npos);
  config["inputs"] = inputs;
  write_file(run / "config.json", config.dump(2));
  CHECK(run_xgrad(words(resume), in_directory(root)).exit_code == 0);
}

namespace {

// A .npy file of shape [rows, cols] whose data is a hole: the header, then ftruncate to the full size, so that a
// file of many GiB takes no disk and reading it would cost only memory (which the tests below must never spend).
void write_sparse_npy(const fs::path& path, std::size_t rows, std::size_t cols, const std::string& descr = "<i4") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  write_file(path, std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header);
  const std::size_t itemsize = descr == "<i4" ? 4 : 8;
  fs::resize_file(path, 10 + header.size() + rows * cols * itemsize);
}

}  // namespace

TEST_CASE("--task data: arrays too large for memory, or of too long sequences, are refused from their headers alone") {
  const TempDir root("inputs_too_large");
  const long long limit = address_space_limit(4000000);  // 4 GB: the binary runs, no array below fits
  const std::string run = "train --task data --d-model 8 --batch-size 2 --steps 2 --print-every 100 --out run --data ";
  // 2 x 28 GiB of int32: far above the memory limit, refused before any of it is read.
  fs::create_directories(root / "huge");
  write_sparse_npy(root / "huge" / "inputs.npy", std::size_t(7) << 26, 16);
  write_sparse_npy(root / "huge" / "targets.npy", std::size_t(7) << 26, 16);
  const auto xgrad_limited = [&](const std::string& args) {
    ProcessOptions options = in_directory(root);
    options.address_space_kib = limit;
    return run_xgrad(words(args), options);
  };
  ProcessResult r = xgrad_limited(run + "huge");
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("xgrad: --data: ", 0) == 0);
  CHECK(r.err.find((root / "huge" / "inputs.npy").string() + " [469762048, 16] int32 (28.0 GiB)") != std::string::npos);
  CHECK(r.err.find("56.0 GiB") != std::string::npos);
  CHECK(r.err.find("limit 12") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "run"));
  // probe builds the task the same way.
  r = xgrad_limited("probe --task data --d-model 8 --batch-size 2 --data huge");
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("xgrad: --data: the task's data takes 56.0 GiB in memory", 0) == 0);

  // A --text file is held whole: its size alone decides.
  write_file(root / "big.txt", "");
  fs::resize_file(root / "big.txt", std::uintmax_t(13) << 30);
  r = xgrad_limited("train --task char_lm --seq-len 8 --d-model 8 --batch-size 2 --steps 2 --out run --text big.txt");
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind(
            "xgrad: --text: the task's data takes 13.0 GiB in memory (" + (root / "big.txt").string() + " (13.0 GiB))",
            0) == 0);

  // Sequences of 100000 tokens (4 GB per file, under the memory limit by their bytes): refused for T first.
  fs::create_directories(root / "long");
  write_sparse_npy(root / "long" / "inputs.npy", 10000, 100000);
  write_sparse_npy(root / "long" / "targets.npy", 10000, 100000);
  r = xgrad_limited(run + "long");
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("xgrad: --data: ", 0) == 0);
  CHECK(r.err.find("sequence length T") != std::string::npos);
  CHECK(r.err.find("100000") != std::string::npos);

#if !defined(__SANITIZE_ADDRESS__)
  // 2 x 4 GiB: within the memory limit, but not within this process's address space: the failed allocation is
  // reported as the data's size, naming --data, not as the model's.
  if (limit > 0) {
    fs::create_directories(root / "big");
    write_sparse_npy(root / "big" / "inputs.npy", std::size_t(1) << 24, 64);
    write_sparse_npy(root / "big" / "targets.npy", std::size_t(1) << 24, 64);
    r = xgrad_limited(run + "big");
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("xgrad: --data: ", 0) == 0);
    CHECK(r.err.find("cannot allocate 4.0 GiB for " + (root / "big" / "inputs.npy").string()) != std::string::npos);
    CHECK(r.err.find("--d-model") == std::string::npos);
  }
#endif
}

TEST_CASE("a sweep rerun refuses run directories trained on input files that have changed since") {
  const TempDir root("inputs_sweep");
  const fs::path text = root / "text.txt";
  const std::string original = some_text('A');
  write_file(text, original);
  const std::string sweep =
      "sweep --out sw --task char_lm --text text.txt --seq-len 8 --d-model 8 --batch-size 2 "
      "--steps 3 --print-every 100 --d-k 4 --scale none,sqrt_dk --seeds 0 --arms adamw@0.001";
  ProcessResult r = run_xgrad(words(sweep), in_directory(root));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = root / "sw" / "runs" / "dk4-none-adamw-lr0.001-s0";
  const std::string config_before = read_text(run / "config.json");
  // The same size, other bytes; one run made pending again (no summary, no checkpoint): it must not be restarted
  // on the new bytes beside a run on the old ones.
  std::string edited = original;
  edited[10] = edited[10] == 'x' ? 'y' : 'x';
  write_file(text, edited);
  fs::remove(run / "summary.json");
  fs::remove(run / "checkpoint.safetensors");
  r = run_xgrad(words(sweep), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--text: " + text.string() + " has changed since the run in ") != std::string::npos);
  CHECK(r.err.find("same size (3000 bytes), other content") != std::string::npos);
  CHECK(read_text(run / "config.json") == config_before);
  // A damaged record is refused by the sweep's flag, not by --resume, which the user did not give.
  nlohmann::json damaged = read_json(run / "config.json");
  damaged["inputs"][0]["size"] = "many";
  write_file(run / "config.json", damaged.dump(2));
  r = run_xgrad(words(sweep), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("xgrad: --out: " + (run / "config.json").string() + ": 'inputs' is not what xgrad writes") == 0);
  write_file(run / "config.json", config_before);
  // Put back: the rerun completes the run.
  write_file(text, original);
  r = run_xgrad(words(sweep), in_directory(root));
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(run / "summary.json"));
  // Another file for the same sweep directory: refused, naming the setting with both values.
  write_file(root / "other.txt", original);
  std::string other = sweep;
  other.replace(other.find("text.txt"), 8, "other.txt");
  r = run_xgrad(words(other), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("holds a sweep with --text " + text.string() + " (this one: " + (root / "other.txt").string() +
                   ")") != std::string::npos);
}

TEST_CASE("train --config of a run's config.json checks the files it records, unless the file's flag is given") {
  const TempDir root("inputs_config");
  const fs::path text = root / "text.txt";
  const std::string original = some_text('A');
  write_file(text, original);
  REQUIRE(run_xgrad(words("train " + kTiny + " --text text.txt --steps 4 --out run"), in_directory(root)).exit_code ==
          0);
  write_file(text, original + "more");
  ProcessResult r = run_xgrad(words("train --config run/config.json --out again"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--text: " + text.string() +
                   " has changed since the run of run/config.json read it: 3004 bytes now, 3000 then") !=
        std::string::npos);
  CHECK(r.err.find("pass --text") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "again"));
  // Named on the command line, the file is taken as it is now.
  r = run_xgrad(words("train --config run/config.json --out again --text text.txt"), in_directory(root));
  CHECK(r.exit_code == 0);
  // Unchanged, the config reproduces the run.
  write_file(text, original);
  CHECK(run_xgrad(words("train --config run/config.json --out again2"), in_directory(root)).exit_code == 0);
  CHECK(read_text(root / "again2" / "metrics.csv").size() > 0);
}

TEST_CASE("--init-from is recorded as an input file and checked on --resume") {
  const TempDir root("inputs_init_from");
  const std::string tiny = "--task copy --seq-len 8 --d-model 8 --batch-size 2 --print-every 100";
  REQUIRE(run_xgrad(words("train " + tiny + " --steps 2 --out base"), in_directory(root)).exit_code == 0);
  const fs::path init = root / "base" / "checkpoint.safetensors";
  REQUIRE(run_xgrad(words("train " + tiny +
                          " --steps 4 --checkpoint-every 2 --init-from base/checkpoint.safetensors "
                          "--out run"),
                    in_directory(root))
              .exit_code == 0);
  const nlohmann::json inputs = read_json(root / "run" / "config.json").at("inputs");
  REQUIRE(inputs.size() == 1);
  CHECK(inputs.at(0).at("setting") == "init_from");
  CHECK(inputs.at(0).at("path") == init.string());
  // Another base run of the same shape in its place: same size, other weights.
  REQUIRE(
      run_xgrad(words("train " + tiny + " --steps 2 --seed 5 --out base --overwrite"), in_directory(root)).exit_code ==
      0);
  const ProcessResult r = run_xgrad(words("train --resume run --steps 6"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--init-from: " + init.string() + " has changed since the run in ") != std::string::npos);
}

TEST_CASE("--resume says so when an input file has become a directory or a FIFO") {
  const TempDir root("inputs_not_file");
  const fs::path text = root / "text.txt";
  write_file(text, some_text('A'));
  REQUIRE(run_xgrad(words("train " + kTiny + " --text text.txt --steps 4 --out run"), in_directory(root)).exit_code ==
          0);
  fs::remove(text);
  fs::create_directories(text);
  ProcessResult r = run_xgrad(words("train --resume run --steps 6"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--text: " + text.string() + ", which the run in ") != std::string::npos);
  CHECK(r.err.find("is a directory now") != std::string::npos);
  fs::remove(text);
  REQUIRE(::mkfifo(text.c_str(), 0644) == 0);
  r = run_xgrad(words("train --resume run --steps 6"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("is not a regular file now (a FIFO, socket or device)") != std::string::npos);
}

TEST_CASE("a run directory, or a report directory, that cannot be written is refused with the reason, up front") {
  if (::geteuid() == 0) {  // permissions do not bind root: nothing to observe
    MESSAGE("skipped: running as root");
    return;
  }
  const TempDir root("inputs_read_only");
  write_file(root / "text.txt", some_text('A'));
  REQUIRE(run_xgrad(words("train " + kTiny + " --text text.txt --steps 4 --out run"), in_directory(root)).exit_code ==
          0);
  fs::permissions(root / "run", fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  ProcessResult r = run_xgrad(words("train --resume run --steps 6"), in_directory(root));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--out: run directory run is not writable: Permission denied") != std::string::npos);
  CHECK(r.out.find("resuming from") == std::string::npos);
  r = run_xgrad(words("compare run"), in_directory(root));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("compare: cannot write the report into run: Permission denied; give a writable report "
                   "directory with --out DIR") != std::string::npos);
  fs::permissions(root / "run", fs::perms::owner_write, fs::perm_options::add);
}

TEST_CASE("a relative path in a --config file is relative to the file's directory, not the working directory") {
  const TempDir root("inputs_config_dir");
  fs::create_directories(root / "in");
  write_file(root / "in" / "text.txt", some_text('A'));
  write_file(root / "in" / "cfg.json",
             R"({"task": "char_lm", "text": "text.txt", "seq_len": 8, "d_model": 8, "batch_size": 2, "steps": 2,
                 "print_every": 100})");
  // Run from root, which holds no text.txt: the file beside cfg.json is read; --out stays relative to the cwd.
  const ProcessResult r = run_xgrad(words("train --config in/cfg.json --out run"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_json(root / "run" / "config.json").at("text") == (root / "in" / "text.txt").string());
}

TEST_CASE("a sweep.json that is a FIFO is refused by compare and sweep status instead of waiting for a writer") {
  const TempDir root("inputs_fifo_sweep_json");
  write_file(root / "text.txt", some_text('A'));
  REQUIRE(run_xgrad(words("train " + kTiny + " --text text.txt --steps 2 --out sweep/runs/a"), in_directory(root))
              .exit_code == 0);
  REQUIRE(::mkfifo((root / "sweep" / "sweep.json").c_str(), 0644) == 0);
  ProcessResult r = run_xgrad(words("compare sweep --out report"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("sweep.json is not a regular file (a FIFO, device or directory)") != std::string::npos);
  r = run_xgrad(words("sweep status sweep"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("sweep.json is not a regular file") != std::string::npos);
}

TEST_CASE(
    "an output directory whose name starts with '-' gets its figures: gnuplot's cd does not read it as an option") {
  const TempDir root("inputs_dash_out");
  const ProcessResult r = run_xgrad({"explain", "--d-k", "4,16", "--out=-Lx"}, in_directory(root));
  INFO("stderr: " << r.err << "\nstdout: " << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(root / "-Lx" / "figures" / "score_hist.png"));
  CHECK(fs::exists(root / "-Lx" / "figures" / "saturated_vs_dk.png"));
  CHECK(r.out.find("gnuplot failed") == std::string::npos);
}

TEST_CASE("a run's config.json or summary.json that is a device or a FIFO is refused at once, not read without end") {
  const TempDir root("inputs_special_run_files");
  write_file(root / "text.txt", some_text('A'));
  REQUIRE(
      run_xgrad(words("train " + kTiny + " --text text.txt --steps 2 --out runs/a"), in_directory(root)).exit_code ==
      0);
  fs::copy(root / "runs" / "a", root / "runs" / "urandom", fs::copy_options::recursive);
  fs::remove(root / "runs" / "urandom" / "summary.json");
  fs::create_symlink("/dev/urandom", root / "runs" / "urandom" / "summary.json");
  fs::copy(root / "runs" / "a", root / "runs" / "fifo", fs::copy_options::recursive);
  fs::remove(root / "runs" / "fifo" / "config.json");
  REQUIRE(::mkfifo((root / "runs" / "fifo" / "config.json").c_str(), 0644) == 0);
  ProcessResult r = run_xgrad(words("compare runs --out report --plots false"), in_directory(root));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  // a and urandom (incomplete: its summary.json is not read); fifo is no run (its config.json is not a file).
  CHECK(r.out.find("2 runs in 1 arm") != std::string::npos);
  CHECK(r.out.find("incomplete: runs/urandom") != std::string::npos);
  fs::copy(root / "runs" / "a", root / "runs" / "zero", fs::copy_options::recursive);
  fs::remove(root / "runs" / "zero" / "config.json");
  fs::create_symlink("/dev/zero", root / "runs" / "zero" / "config.json");
  r = run_xgrad(words("train --resume runs/zero"), in_directory(root));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("config.json: not a regular file") != std::string::npos);
  r = run_xgrad(words("train --resume runs/fifo"), in_directory(root));  // the flags' defaults are read first
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("config.json: not a regular file") != std::string::npos);
}

TEST_CASE("parse_json stops at kMaxJsonBytes: a stream without end (/dev/zero) is refused, not read into memory") {
  std::ifstream zero("/dev/zero", std::ios::binary);
  REQUIRE(zero);
  CHECK_THROWS_WITH_AS(xgrad::train::parse_json(zero, "/dev/zero"), doctest::Contains("longer than 64 MiB"),
                       xgrad::train::ConfigError);
}
