#include "cli/presets/preset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cli/flags.h"
#include "common/registry.h"
#include "nn/scaling.h"

namespace xgrad::cli {

PresetRegistration::PresetRegistration(Preset preset) { Registry<Preset>::instance().add(std::move(preset)); }

cli::SweepConfig preset_defaults() { return cli::experiment_defaults(); }

std::size_t grid_points(const cli::SweepConfig& grid) {
  std::size_t n = grid.scales.size() * grid.d_ks.size() * grid.arms.size() * grid.seeds.size();
  for (const cli::GridAxis& axis : grid.grid) n *= axis.values.size();
  const bool only_readers =
      std::any_of(grid.grid.begin(), grid.grid.end(), [](const GridAxis& a) { return a.only_readers; });
  if (!grid.keep && !only_readers) return n;
  // A filtered grid: count the points it keeps, as plan_sweep forms them (each with its grid values).
  std::vector<std::pair<train::TrainConfig, nlohmann::json>> points{{grid.base, nlohmann::json::object()}};
  for (const cli::GridAxis& axis : grid.grid) {
    std::vector<std::pair<train::TrainConfig, nlohmann::json>> next;
    for (const auto& p : points)
      for (const auto& value : axis.values) {
        auto q = p;
        train::set_setting(q.first, axis.key, value);
        q.second[axis.key] = value;
        next.push_back(q);
      }
    points = std::move(next);
  }
  std::size_t kept = 0;
  for (const auto& p : points)
    for (std::size_t d_k : grid.d_ks)
      for (const std::string& scale : grid.scales)
        for (const cli::Arm& arm : grid.arms)
          for (std::uint64_t seed : grid.seeds) {
            train::TrainConfig q = p.first;
            train::set_setting(q, "scale", scale);
            train::set_setting(q, "optimizer", arm.optimizer);
            q.model.d_k = d_k;
            q.lr = arm.lr;
            q.seed = seed;
            kept += cli::keeps_point(grid, q, p.second) ? 1 : 0;
          }
  return kept;
}

std::vector<std::string> all_scalings() { return Registry<nn::ScalingEntry>::instance().names(); }

std::vector<double> log_spaced(double lo, double hi, std::size_t n) {
  if (n < 2 || !(lo > 0) || !(hi > lo) || !std::isfinite(hi))
    throw std::invalid_argument("log_spaced: needs n >= 2 and 0 < lo < hi");
  std::vector<double> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * static_cast<double>(i) / (n - 1));
    const double scale = std::pow(10.0, std::floor(std::log10(v)) - 2);
    out.push_back(std::round(v / scale) * scale);
  }
  return out;
}

}  // namespace xgrad::cli
