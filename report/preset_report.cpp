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

std::map<nlohmann::json, double> by_seed(const Comparison& c, const std::vector<std::size_t>& runs,
                                         const std::string& statistic) {
  std::map<nlohmann::json, double> out;
  for (std::size_t r : runs)
    if (std::isfinite(c.stats[r][statistic])) out[seed_key(c.runs[r].config)] = c.stats[r][statistic];
  return out;
}

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

Fields outcome_fields(const std::map<Outcome, std::size_t>& count) {
  Fields f;
  std::size_t n = 0;
  for (Outcome o : {Outcome::better, Outcome::worse, Outcome::same, Outcome::not_decided}) {
    const std::size_t k = count.count(o) ? count.at(o) : 0;
    f[outcome_key(o)] = k, n += k;
  }
  f["n"] = n;
  return f;
}

std::string agreement(std::size_t better, std::size_t worse, std::size_t same, std::size_t n) {
  return n == 0 ? "none" : better == n ? "better" : worse == n ? "worse" : same == n ? "same" : "mixed";
}

Fields verdict_fields(const Verdict& v, Fields more) {
  more["better"] = v.seeds_better, more["worse"] = v.seeds_worse, more["same"] = v.seeds_same, more["n"] = v.n_shared;
  return more;
}

Table preset_table(const std::string& key) {
  Table t;
  t.header = text_cells("presets", key);
  return t;
}

PresetSection preset_section(const std::string& anchor, std::string markdown) {
  return {anchor, preset_text(anchor + ".title"), std::move(markdown), {}};
}

SummaryFigure preset_figure(const std::string& name, const std::string& key, Axis x, Axis y, const Fields& fields) {
  const auto part = [&](const char* p) { return preset_text(key + p, fields); };
  return summary_figure(name, part(".title"), part(".caption"), part(".x"), x, part(".y"), y);
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
