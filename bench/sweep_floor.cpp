#include "bench/sweep_floor.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/registry.h"

namespace xgrad::bench {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open (is the directory a sweep's --out?)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// What the loss of a run needs (step_gemms' NeededRows): the task's first training batch gives the sequence
// positions that carry a target and how many rows do, as nn::loss_at_targets computes them. A task that cannot be
// built here (a data file moved away) counts every position, with a warning naming the run.
NeededRows needed_rows(const nlohmann::json& c, std::size_t batch, std::size_t seq_len, const fs::path& config_path) {
  NeededRows needed;
  needed.out_proj = c.value("attn_out_proj", true);
  std::unique_ptr<data::Task> task;
  try {
    task = data::make_task(c.at("task").get<std::string>(), SettingValues(c));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xgrad_bench floor: %s: cannot build its task (%s); counting every position\n",
                 config_path.string().c_str(), e.what());
    return needed;
  }
  const data::Batch b = task->batch(c.value("data_seed", std::uint64_t{0}), 0, batch);
  std::vector<bool> position(seq_len, false);
  std::size_t rows = 0;
  for (std::size_t i = 0; i < b.targets.size(); ++i)
    if (b.targets.data()[i] != -1) {
      ++rows;
      position[i % seq_len] = true;
    }
  if (rows == 0 || rows == b.targets.size()) return needed;  // the trainer's full path
  needed.readout_rows = rows;
  for (bool p : position) needed.positions += p;
  return needed;
}

}  // namespace

SweepWork read_sweep_work(const std::string& dir) {
  const nlohmann::json sweep = read_json(fs::path(dir) / "sweep.json");
  if (!sweep.contains("runs") || !sweep.at("runs").is_array())
    throw std::runtime_error((fs::path(dir) / "sweep.json").string() + ": no \"runs\" array");
  SweepWork work;
  for (const auto& run : sweep.at("runs")) {
    try {
      const fs::path config_path = fs::path(dir) / run.at("dir").get<std::string>() / "config.json";
      const nlohmann::json c = read_json(config_path);
      nn::ModelConfig mc;
      mc.d_model = c.at("d_model").get<std::size_t>();
      mc.n_heads = c.at("n_heads").get<std::size_t>();
      mc.d_k = c.at("d_k").get<std::size_t>();
      mc.n_layers = c.at("n_layers").get<std::size_t>();
      mc.d_ff = c.at("d_ff").get<std::size_t>();
      mc.mlp = c.at("mlp").get<bool>();
      // config_version 2 keeps the sizes the task decides under "derived".
      // (a task's own setting of the same name, e.g. --task data's --vocab-size 0 = from the files, stays on top).
      auto derived = [&c](const char* key) {
        const bool v2 = c.contains("derived") && c.at("derived").contains(key);
        return (v2 ? c.at("derived").at(key) : c.at(key)).get<std::size_t>();
      };
      mc.vocab_size = derived("vocab_size");
      const std::size_t batch = c.at("batch_size").get<std::size_t>(), seq_len = derived("seq_len");
      const std::size_t steps = c.at("steps").get<std::size_t>();
      const double flops =
          step_flops(mc, batch, seq_len, needed_rows(c, batch, seq_len, config_path)) * static_cast<double>(steps);
      const std::string key = std::to_string(mc.d_model) + "," + std::to_string(mc.n_heads) + "," +
                              std::to_string(mc.d_k) + "," + std::to_string(batch) + "," + std::to_string(seq_len) +
                              "," + std::to_string(mc.vocab_size);
      work.flops += flops;
      work.flops_by_shape[key] += flops;
      work.steps_by_shape[key] += steps;
      work.run_seconds += run.value("seconds", 0.0);
      ++work.runs;
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(dir + ": run " + run.dump() + " has an unexpected config.json (" + e.what() + ")");
    }
  }
  if (work.runs == 0) throw std::runtime_error((fs::path(dir) / "sweep.json").string() + ": the sweep has no runs");
  return work;
}

}  // namespace xgrad::bench
