#include "report/preset_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_name.h"
#include "train/config.h"
#include "train/json_file.h"

namespace xgrad::report {

namespace fs = std::filesystem;

LineLabels::LineLabels(const Comparison& c, const std::vector<std::string>& shown) {
  std::vector<const nlohmann::json*> settings;
  for (const ArmStats& arm : c.arms) settings.push_back(&arm.settings);
  for (const std::string& key : settings_differing(settings))
    if (std::find(shown.begin(), shown.end(), key) == shown.end()) keys_.push_back(key);
}

std::string LineLabels::extras(const nlohmann::json& settings) const {
  std::string out;
  for (const std::string& key : keys_) out += (out.empty() ? "" : " ") + key + "=" + setting_text(settings, key);
  return out;
}

std::string LineLabels::operator()(const std::string& name, const nlohmann::json& settings) const {
  const std::string more = extras(settings);
  return more.empty() ? name : name + " " + more;
}

std::vector<const ArmStats*> arm_pointers(const Comparison& c) {
  std::vector<const ArmStats*> out;
  for (const ArmStats& arm : c.arms) out.push_back(&arm);
  return out;
}

std::string join_and(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

std::string preset_text(const std::string& key, const Fields& fields) { return text("presets", key, fields); }

std::string unique_stem(std::set<std::string>& taken, const std::string& name) {
  const std::string base = safe_file_stem(name);
  std::string stem = base;
  for (int k = 2; !taken.insert(stem).second; ++k) stem = fmt::format("{}-{}", base, k);
  return stem;
}

std::vector<SummaryPoint> logit_points(const Comparison& c, const std::vector<std::size_t>& runs, std::size_t n) {
  std::map<double, std::pair<double, std::size_t>> at;  // step -> (sum, n)
  for (std::size_t r : runs)
    for (std::size_t i = 0; i < c.runs[r].series.max_logit.size(); ++i)
      if (std::isfinite(c.runs[r].series.max_logit[i]))
        at[c.runs[r].series.step[i]].first += c.runs[r].series.max_logit[i], ++at[c.runs[r].series.step[i]].second;
  std::vector<SummaryPoint> out;
  for (const auto& [step, sum_n] : at)
    if (sum_n.second == n) out.push_back(SummaryPoint{step, sum_n.first / n, kNoValue, kNoValue, n, 0});
  return out;
}

std::string outcome_key(Outcome o) {
  std::string key = outcome_name(o);
  std::replace(key.begin(), key.end(), ' ', '_');
  return key;
}

void Tally::add(Outcome o) {
  ++(o == Outcome::better ? better : o == Outcome::worse ? worse : o == Outcome::same ? same : not_decided);
}

std::string Tally::agreement() const {
  const std::size_t all = n();
  return all == 0 ? "none" : better == all ? "better" : worse == all ? "worse" : same == all ? "same" : "mixed";
}

Fields Tally::fields(Fields more) const {
  more["better"] = better, more["worse"] = worse, more["same"] = same, more["not_decided"] = not_decided;
  more["n"] = n();
  return more;
}

Table preset_table(const std::string& key) {
  return {text_cells("presets", key), {}, {}, true};  // plain cells: rows name arms by their settings
}

PresetSection preset_section(const std::string& anchor, std::string markdown) {
  return {anchor, preset_text(anchor + ".title"), std::move(markdown), {}};
}

SummaryFigure lines_figure(const std::string& name, const std::string& key, Axis x, Axis y,
                           const std::vector<LinePoint>& points, const Fields& fields) {
  const auto part = [&](const char* p) { return preset_text(key + p, fields); };
  SummaryFigure f = summary_figure(name, part(".title"), part(".caption"), part(".x"), x, part(".y"), y);
  for (const auto& [label, members] : group_by(points, [](const LinePoint& p) { return p.label; })) {
    SummaryLine& line = f.lines.emplace_back(summary_line(label, members.front().scale));
    for (const LinePoint& p : members)
      if (!std::isnan(p.point.x)) line.points.push_back(p.point);
    std::stable_sort(line.points.begin(), line.points.end(),
                     [](const SummaryPoint& a, const SummaryPoint& b) { return a.x < b.x; });
  }
  return f;
}

void add_line(std::vector<LinePoint>& out, const std::string& label, const std::string& scale,
              const std::vector<SummaryPoint>& points) {
  out.push_back({label, scale, SummaryPoint{}});
  for (const SummaryPoint& p : points) out.push_back({label, scale, p});
}

std::string number_or_dash(double v, const char* spec) {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : "—";
}

PresetRecord read_preset_record(const std::string& sweep_dir) {
  PresetRecord record;
  std::ifstream in(fs::path(sweep_dir) / "sweep.json");
  if (!in) return record;
  try {
    const nlohmann::json j = train::parse_json(in, (fs::path(sweep_dir) / "sweep.json").string());
    const auto preset = j.find("preset");
    if (preset == j.end()) return record;
    const bool well_formed = preset->is_object() && preset->contains("name") && preset->at("name").is_string() &&
                             !preset->at("name").get<std::string>().empty() &&
                             (!preset->contains("quick") || preset->at("quick").is_boolean());
    if (!well_formed) {
      record.problem = (fs::path(sweep_dir) / "sweep.json").string() + " records the preset as " + preset->dump() +
                       " (expected {\"name\": a preset's name, \"quick\": true or false})";
      return record;
    }
    record.name = preset->at("name").get<std::string>();
    record.quick = preset->value("quick", false);
  } catch (const nlohmann::json::exception&) {
    // An unreadable index names no preset: the usual report is written.
  } catch (const train::ConfigError& e) {  // a repeated key or too deep: which preset it names is not clear
    record.problem = e.what();
  }
  return record;
}

}  // namespace xgrad::report
