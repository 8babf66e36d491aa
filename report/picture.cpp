#include "report/picture.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/registry.h"
#include "nn/scaling.h"

namespace xgrad::report {

const std::vector<std::vector<double>>& line_dashes() {
  // Eight patterns apart from each other, so that eight scalings drawn on one panel differ in dash as well as colour.
  static const std::vector<std::vector<double>> dashes{
      {}, {16, 10}, {2, 6}, {16, 6, 2, 6}, {16, 6, 2, 6, 2, 6}, {24, 10}, {24, 8, 3, 8}, {10, 6, 10, 6, 2, 6}};
  return dashes;
}

LineStyle scaling_style(const std::string& scale, std::vector<std::string>& warnings) {
  if (const nn::ScalingEntry* entry = Registry<nn::ScalingEntry>::instance().find(scale)) {
    // Registering refused a colour that is not #RRGGBB and a dash not in scaling_dash_styles(), and filled both in.
    const auto& dashes = nn::scaling_dash_styles();
    return {entry->colour,
            static_cast<std::size_t>(std::find(dashes.begin(), dashes.end(), entry->dash) - dashes.begin())};
  }
  static const std::vector<std::string> palette{"#E69F00", "#56B4E9", "#009E73", "#D55E00",
                                                "#CC79A7", "#0072B2", "#000000"};
  std::uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char ch : scale) hash = (hash ^ ch) * 16777619u;
  const std::string colour = palette[hash % palette.size()];
  // Every arm and figure of the scale asks again: the reader needs to be told once.
  std::string warning = "scaling '" + scale + "' is not registered in this build; drawn in " + colour;
  if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end()) warnings.push_back(std::move(warning));
  return {colour, 0};
}

std::string scaling_colour(const std::string& scale) {
  std::vector<std::string> warnings;  // the figures report them
  return scaling_style(scale, warnings).colour;
}

std::string lighter(const std::string& colour, double white) {
  std::string out = "#";
  for (std::size_t i = 1; i + 1 < colour.size(); i += 2) {
    const double v = static_cast<double>(std::stoi(colour.substr(i, 2), nullptr, 16));
    out += fmt::format("{:02X}", static_cast<int>(std::lround(v + (255.0 - v) * white)));
  }
  return out;
}

std::vector<LineStyle> summary_styles(const SummaryFigure& figure, std::vector<std::string>& warnings) {
  std::vector<LineStyle> out;
  std::map<std::string, std::size_t> lines_of_scale;
  for (const SummaryLine& line : figure.lines) {
    LineStyle style = scaling_style(line.scale, warnings);
    if (line.theory)
      style = {lighter(style.colour, 0.3), 1};
    else
      style.dash = (style.dash + lines_of_scale[line.scale]++) % line_dashes().size();
    out.push_back(style);
  }
  return out;
}

double smoothing_half_width(const Comparison& c) {
  std::size_t rows = 1;
  for (const auto& run : c.runs) rows = std::max(rows, run.series.size());
  return std::floor(static_cast<double>(rows) / 150.0);
}

std::vector<double> smooth(const std::vector<double>& x, const std::vector<double>& y, double half_width) {
  // Prefix sums over the finite points, in order: page.js sums in the same order, so both give the same doubles.
  std::vector<double> steps, prefix{0.0};
  for (std::size_t i = 0; i < y.size(); ++i)
    if (std::isfinite(y[i])) {
      steps.push_back(x[i]);
      prefix.push_back(prefix.back() + y[i]);
    }
  if (!(half_width > 0) || steps.empty()) return y;
  std::vector<double> out = y;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;
    const double s = x[i], h = std::min({half_width, s - steps.front(), steps.back() - s});
    const auto lo = std::lower_bound(steps.begin(), steps.end(), s - h) - steps.begin();
    const auto hi = std::upper_bound(steps.begin(), steps.end(), s + h) - steps.begin();
    out[i] =
        (prefix[static_cast<std::size_t>(hi)] - prefix[static_cast<std::size_t>(lo)]) / static_cast<double>(hi - lo);
  }
  return out;
}

nlohmann::json picture_json(const Comparison& c) {
  std::vector<std::string> warnings;  // the figures report them
  nlohmann::json scalings = nlohmann::json::object();
  for (const ArmStats& arm : c.arms) {
    const LineStyle style = scaling_style(arm.scale(), warnings);
    scalings[arm.scale()] = {{"colour", style.colour}, {"dash", style.dash}};
  }
  std::vector<nlohmann::json> settings;
  for (const RunRecord& run : c.runs) settings.push_back(arm_settings(run.config));
  std::vector<const nlohmann::json*> of_runs;
  for (const auto& s : settings) of_runs.push_back(&s);
  const std::vector<std::string> group_by = settings_differing(of_runs);
  std::string facet_by;
  std::size_t most = 1;
  for (const auto& key : group_by) {
    std::set<std::string> values;
    for (const auto& s : settings) values.insert(s.contains(key) ? setting_text(s, key) : "—");
    if (key != "scale" && values.size() > most && values.size() <= 12) {
      facet_by = key;
      most = values.size();
    }
  }
  return {{"smoothing", {{"method", "centred_mean"}, {"half_width", smoothing_half_width(c)}}},
          {"dashes", line_dashes()},
          {"scalings", scalings},
          {"group_by", group_by},
          {"facet_by", facet_by}};
}

}  // namespace xgrad::report
