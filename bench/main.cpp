// xgrad_bench: time the full training step at three sizes (step), the single-thread sgemm floor of the largest
// (sgemm), check that memory stays flat over 1,000 steps (memory), and put a sweep's wall time next to its floor
// (floor). See bench/README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "autograd/blas.h"
#include "autograd/kernels/parallel.h"
#include "bench/bench_configs.h"
#include "bench/process_memory.h"
#include "bench/sgemm_floor.h"
#include "bench/step_timing.h"
#include "bench/sweep_floor.h"
#include "common/whole_number.h"
#include "platform/environment.h"

using namespace xgrad;
using namespace xgrad::bench;

namespace {

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

void print_environment(bool csv) {
  if (csv) return;
  std::printf("OpenBLAS core %s, %d thread(s), load average %s\n", blas::core_name().c_str(), xgrad::num_threads(),
              load_average().c_str());
}

// The step's floor on `threads` cores: its counted GEMMs timed alone on one BLAS thread, divided by the threads
// (what two cores allow at best). {floor ms, one-thread GFLOP/s at the step's shapes}.
std::pair<double, double> step_floor(const std::vector<GemmShape>& gemms, int threads) {
  const int before = xgrad::num_threads();  // blas::gemm splits a product over xgrad's threads
  xgrad::set_num_threads(1);
  const SgemmFloor f = measure_gemm_shapes(gemms);
  xgrad::set_num_threads(before);
  return {f.total_ms / threads, f.gflops()};
}

int run_step(const std::vector<BenchConfig>& sizes, long steps, long warmup, bool csv, bool floor) {
  if (!csv)
    std::printf("%-3s %7s %7s %6s %5s %6s %10s %10s %10s %9s %12s %9s %9s %9s %8s\n", "cfg", "d_model", "n_heads",
                "batch", "seq", "steps", "median_ms", "min_ms", "cpu_ms", "GFLOP/s", "peak_rss_MiB", "GFLOP",
                "floor_ms", "sgemm_GF", "x_floor");
  for (const BenchConfig& c : sizes) {
    const std::size_t w = warmup >= 0 ? static_cast<std::size_t>(warmup) : c.warmup;
    const std::size_t n = steps > 0 ? static_cast<std::size_t>(steps) : c.steps;
    const StepTiming t = time_training_steps(c, w, n);
    const auto f = floor ? step_floor(t.gemms, xgrad::num_threads()) : std::pair<double, double>{0, 0};
    const double x_floor = f.first > 0 ? t.median_ms / f.first : 0;
    if (csv)
      std::printf("step,%s,%.4f,%.4f,%.4f,%.3f,%.1f,%s,%d,%.6f,%.4f,%.3f\n", c.name.c_str(), t.median_ms, t.min_ms,
                  t.median_cpu_ms, t.gflops, t.peak_rss_mib, blas::core_name().c_str(), xgrad::num_threads(),
                  t.counted_gflop, f.first, f.second);
    else
      std::printf("%-3s %7zu %7zu %6zu %5zu %6zu %10.3f %10.3f %10.3f %9.2f %12.1f %9.4f %9.3f %9.2f %8.3f\n",
                  c.name.c_str(), c.d_model, c.n_heads, c.batch, c.seq_len, t.steps, t.median_ms, t.min_ms,
                  t.median_cpu_ms, t.gflops, t.peak_rss_mib, t.counted_gflop, f.first, f.second, x_floor);
    std::fflush(stdout);
  }
  return 0;
}

int run_sgemm(const BenchConfig& c, const std::string& counts, bool csv) {
  const SgemmFloor floor = counts.empty() ? measure_sgemm_floor(c) : measure_gemm_shapes(read_gemm_counts(counts));
  const double cpu_gflops = floor.total_cpu_ms > 0 ? floor.total_flops / (floor.total_cpu_ms * 1e6) : 0;
  if (csv) {
    std::printf("sgemm,%s,%.4f,%.4f,%.3f,%.3f,%.3f,%s,%d\n", counts.empty() ? c.name.c_str() : "counted",
                floor.total_ms, floor.total_cpu_ms, floor.gflops(), cpu_gflops, floor.peak_gflops(),
                blas::core_name().c_str(), xgrad::num_threads());
    return 0;
  }
  std::printf("Every GEMM of one %s training step, as the engine issues it (C[m,n] = op(A)[m,k] op(B)[k,n]):\n",
              counts.empty() ? c.name.c_str() : ("counted (" + counts + ")").c_str());
  std::printf("%3s %3s %6s %6s %6s %6s %10s %10s %9s\n", "tA", "tB", "m", "n", "k", "count", "ms", "cpu_ms", "GFLOP/s");
  for (const auto& g : floor.gemms)
    std::printf("%3s %3s %6zu %6zu %6zu %6zu %10.3f %10.3f %9.2f\n", g.shape.trans_a ? "T" : "N",
                g.shape.trans_b ? "T" : "N", g.shape.m, g.shape.n, g.shape.k, g.shape.count, g.ms, g.cpu_ms,
                g.gflops());
  std::printf(
      "total: %.3f GFLOP in %.3f ms (%.3f ms CPU) = %.2f GFLOP/s (%.2f by CPU time); best shape %.2f "
      "GFLOP/s\n",
      floor.total_flops / 1e9, floor.total_ms, floor.total_cpu_ms, floor.gflops(), cpu_gflops, floor.peak_gflops());
  if (blas::own_kernel_active()) {  // what the step's own products run on, beside the library's floor
    const SgemmFloor own =
        counts.empty() ? measure_sgemm_floor(c, 7, true) : measure_gemm_shapes(read_gemm_counts(counts), 7, true);
    std::printf("xgrad's own kernel (the CPU has AVX-512, OpenBLAS runs %s): %.3f ms = %.2f GFLOP/s\n",
                blas::core_name().c_str(), own.total_ms, own.gflops());
  }
  return 0;
}

int run_memory(const std::string& name, long steps) {
  const BenchConfig& c = bench_config(name);
  const std::size_t n = steps > 0 ? static_cast<std::size_t>(steps) : 1000;
  StepRunner runner(c, 1);
  double rss_at_100 = -1, rss_last = -1;
  std::printf("%s: RSS over %zu training steps\n", c.name.c_str(), n);
  for (std::size_t i = 1; i <= n; ++i) {
    runner.step(i);
    if (i % 100 == 0 || i == n) {
      rss_last = current_rss_mib();
      if (i == 100) rss_at_100 = rss_last;
      std::printf("step %5zu  RSS %8.1f MiB  loss %.4f\n", i, rss_last, runner.last_loss());
      std::fflush(stdout);
    }
  }
  if (rss_at_100 < 0) return 0;
  const double growth = rss_last - rss_at_100;
  const bool flat = growth <= 0.05 * rss_at_100;
  std::printf("RSS step 100 -> %zu: %+.1f MiB (%s)\n", n, growth, flat ? "flat" : "GROWING: the graph leaks");
  return flat ? 0 : 1;
}

// The sweep's GEMM FLOPs over the single-thread sgemm rate of L times the cores used (the issue's floor), and over
// the rate its own GEMM shapes reach (a floor these small matrices can actually meet).
int run_floor(const std::string& dir, double wall_seconds, int cores) {
  const SweepWork work = read_sweep_work(dir);
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  const SgemmFloor l = measure_sgemm_floor(bench_config("L"));
  double shape_seconds = 0;
  std::printf("%zu runs, %.1f GFLOP of GEMMs in all; the runs' own times sum to %.1f s\n", work.runs, work.flops / 1e9,
              work.run_seconds);
  std::printf("%-28s %10s %12s %10s\n", "model shape", "steps", "GFLOP", "GFLOP/s");
  for (const auto& [key, flops] : work.flops_by_shape) {
    const SgemmFloor f = measure_sgemm_floor(parse_shape(key));
    shape_seconds += flops / (f.gflops() * 1e9);
    std::printf("%-28s %10zu %12.1f %10.2f\n", key.c_str(), work.steps_by_shape.at(key), flops / 1e9, f.gflops());
  }
  const double floor_l = work.flops / (l.gflops() * 1e9) / cores;
  const double floor_shapes = shape_seconds / cores;
  std::printf("sgemm rate of L (one thread): %.2f GFLOP/s; cores used: %d\n", l.gflops(), cores);
  std::printf("floor at the L rate:          %8.1f s\n", floor_l);
  std::printf("floor at the sweep's shapes:  %8.1f s (its GEMMs alone, at the rate those shapes reach)\n",
              floor_shapes);
  const double wall = wall_seconds > 0 ? wall_seconds : work.run_seconds / cores;
  std::printf(
      "wall time:                    %8.1f s (%s) = %.2fx the L-rate floor (the figure judged: aim <= 1.3x), "
      "%.2fx the shape floor\n",
      wall, wall_seconds > 0 ? "given" : "runs' times / cores", wall / floor_l, wall / floor_shapes);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0 && load > static_cast<double>(online) + 0.5)
    std::printf(
        "warning: load average %.2f on %ld cores when this started: other work slowed the sgemm timings, so "
        "the floors are too long and the ratios too small; measure on an otherwise idle machine\n",
        load, online);
  return 0;
}

// A plain decimal whole number in [lo, hi], naming the range (CLI11's own conversion error names neither).
CLI::Validator whole_number(long lo, long hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        if (s.size() > 18) return "must be a whole number in " + range + ", got '" + s + "'";  // not read as one
        return whole_number_text_error(s, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi));
      },
      "INT in " + range);
}

// A finite decimal number > 0 (no nan, inf, hex or empty string).
CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        static const std::regex number(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
        if (!std::regex_match(s, number)) return "must be a decimal number > 0 (seconds), got '" + s + "'";
        const double v = std::strtod(s.c_str(), nullptr);
        if (!std::isfinite(v) || !(v > 0)) return "must be a finite number > 0 (seconds), got " + s;
        return "";
      },
      "SECONDS > 0");
}

const std::vector<std::string> kConfigNames{"S", "M", "L"};

}  // namespace

// "step " for the subcommand being parsed, "" before one is known: the --help to point a usage error at.
std::string help_of(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? std::string() : subs.front()->get_name() + " ";
}

// Every subcommand's flags and what they fill in; main parses into these, then runs the one given.
struct Commands {
  CLI::App app{"xgrad_bench: training-step time, sgemm floor and memory check"};
  int threads = 1;
  bool csv = false;
  std::vector<std::string> configs{"S", "M", "L"};
  long steps = 0, warmup = -1;
  std::string step_shape, step_targets = "all", step_readout = "targets";
  bool step_floor = false;
  CLI::App* step_cmd = nullptr;
  std::string sgemm_config = "L", sgemm_shape, sgemm_counts;
  CLI::App* sgemm_cmd = nullptr;
  std::string memory_config = "M";
  long memory_steps = 1000;
  CLI::App* memory_cmd = nullptr;
  std::string floor_dir;
  double floor_wall = 0;
  int floor_cores = 2;
  CLI::App* floor_cmd = nullptr;
};

void add_step_command(Commands& c) {
  c.step_cmd = c.app.add_subcommand("step", "median ms per training step (forward, backward, AdamW)");
  c.step_cmd->add_option("--config", c.configs, "sizes, e.g. --config S,M")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember(kConfigNames));
  // Left out: the per-size default of bench_configs.cpp. Given: at least 1 timed step, at least 0 warmup steps.
  c.step_cmd->add_option("--steps", c.steps, "timed steps per size (default: per size, see bench_configs.cpp)")
      ->check(whole_number(1, 1000000000));
  c.step_cmd->add_option("--warmup", c.warmup, "untimed steps first (default: per size)")
      ->check(whole_number(0, 1000000000));
  c.step_cmd
      ->add_option("--shape", c.step_shape,
                   "another model instead of --config: d_model,n_heads,d_k,batch,seq_len,vocab (as sgemm --shape)")
      ->excludes(c.step_cmd->get_option("--config"));
  c.step_cmd
      ->add_option("--targets", c.step_targets,
                   "positions with a target: all, or last (one per sequence, as kv_recall)")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "last"}));
  c.step_cmd
      ->add_option("--readout", c.step_readout,
                   "targets: readout and cross-entropy at the target positions only (as the trainer); full: at "
                   "every position")
      ->capture_default_str()
      ->check(CLI::IsMember({"targets", "full"}));
  c.step_cmd->add_flag("--floor", c.step_floor,
                       "also time the counted GEMMs of a step alone on one BLAS thread: the floor (/ --threads)");
}

void add_sgemm_command(Commands& c) {
  c.sgemm_cmd = c.app.add_subcommand("sgemm", "time the GEMMs of one training step alone (the floor)");
  CLI::Option* sgemm_config_opt = c.sgemm_cmd->add_option("--config", c.sgemm_config, "size")
                                      ->capture_default_str()
                                      ->check(CLI::IsMember(kConfigNames));
  c.sgemm_cmd
      ->add_option(
          "--shape", c.sgemm_shape,
          "another model instead of --config: d_model,n_heads,d_k,batch,seq_len,vocab (d_model <= 16384, d_k <= 8192; "
          "batch * seq_len <= 1048576; vocab <= 16777216)")
      ->excludes(sgemm_config_opt);
  c.sgemm_cmd
      ->add_option("--counts", c.sgemm_counts,
                   "the shapes counted by xgrad train under XGRAD_SGEMM_COUNT=FILE instead of --config (per step)")
      ->excludes(sgemm_config_opt)
      ->excludes(c.sgemm_cmd->get_option("--shape"));
}

void add_memory_command(Commands& c) {
  c.memory_cmd = c.app.add_subcommand("memory", "RSS every 100 steps; exit 1 if it grows more than 5%");
  c.memory_cmd->add_option("--config", c.memory_config, "size")
      ->capture_default_str()
      ->check(CLI::IsMember(kConfigNames));
  c.memory_cmd->add_option("--steps", c.memory_steps, "steps")
      ->capture_default_str()
      ->check(whole_number(1, 1000000000));
}

void add_floor_command(Commands& c) {
  c.floor_cmd = c.app.add_subcommand("floor", "a sweep's wall time next to its FLOP floor (bench/README.md)");
  c.floor_cmd->add_option("dir", c.floor_dir, "a sweep directory (xgrad sweep / experiment --out)")->required();
  c.floor_cmd->add_option("--wall", c.floor_wall, "the sweep's wall time in seconds (default: runs' times / cores)")
      ->check(positive_seconds());
  c.floor_cmd->add_option("--cores", c.floor_cores, "cores the sweep used (its --jobs)")
      ->check(whole_number(1, 1024))
      ->capture_default_str();
}

// Parses the command line into `c`. Returns the exit code when the program must end here (help, a missing,
// unknown or misused command), else -1.
int parse_command_line(Commands& c, int argc, char** argv) {
  CLI::App& app = c.app;
  // CLI11 would say "A subcommand is required" for a misspelt command, or take it for an extra argument.
  std::string commands;
  std::vector<std::string> command_names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    command_names.push_back(sub->get_name());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads") {  // the only option before the command that takes a value
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    if (std::find(command_names.begin(), command_names.end(), arg) == command_names.end()) {
      std::cerr << "xgrad_bench: unknown command '" << arg << "' (allowed: " << commands
                << "; see 'xgrad_bench --help')\n";
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    if (app.get_subcommands().empty()) {
      std::cerr << "xgrad_bench: a command is required (allowed: " << commands << "; see 'xgrad_bench --help')\n";
      return 2;
    }
    std::cerr << "xgrad_bench: " << e.what() << " (see 'xgrad_bench " << help_of(app) << "--help')\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << "xgrad_bench: " << e.what() << " (see 'xgrad_bench " << help_of(app)
              << "--help')\n";  // bad usage: 2, as xgrad
    return 2;
  }
  return -1;
}

// Runs the parsed command.
int run_command(Commands& c) {
  try {
    // A bad --shape is refused before anything is printed.
    const BenchConfig sgemm_size =
        *c.sgemm_cmd && c.sgemm_cmd->count("--shape") ? parse_shape(c.sgemm_shape) : bench_config(c.sgemm_config);
    std::vector<BenchConfig> step_sizes;
    if (*c.step_cmd && c.step_cmd->count("--shape"))
      step_sizes.push_back(parse_shape(c.step_shape));
    else if (*c.step_cmd)
      for (const auto& name : c.configs) step_sizes.push_back(bench_config(name));
    for (BenchConfig& size : step_sizes) {
      size.targets = c.step_targets;
      size.full_readout = c.step_readout == "full";
    }
    platform::set_threads(c.threads);
    print_environment(c.csv);
    if (*c.step_cmd) return run_step(step_sizes, c.steps, c.warmup, c.csv, c.step_floor);
    if (*c.sgemm_cmd) return run_sgemm(sgemm_size, c.sgemm_counts, c.csv);
    if (*c.memory_cmd) return run_memory(c.memory_config, c.memory_steps);
    if (*c.floor_cmd) return run_floor(c.floor_dir, c.floor_wall, c.floor_cores);
  } catch (const std::exception& e) {
    std::cerr << "xgrad_bench: " << e.what() << "\n";
    return 2;
  }
  return 2;
}

int main(int argc, char** argv) {
  platform::select_blas_core(argc, argv);
  platform::tune_allocator();
  platform::set_flush_denormals(true);

  Commands c;
  c.app.require_subcommand(1);
  c.app.fallthrough();  // --threads and --csv also after the subcommand
  c.app.add_option("--threads", c.threads, "threads for BLAS and xgrad's own loops")
      ->capture_default_str()
      ->check(whole_number(1, 64));
  c.app.add_flag("--csv", c.csv, "machine-readable lines (for bench/compare.sh)");
  add_step_command(c);
  add_sgemm_command(c);
  add_memory_command(c);
  add_floor_command(c);
  if (const int code = parse_command_line(c, argc, argv); code >= 0) return code;
  return run_command(c);
}
