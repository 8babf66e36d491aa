#include "report/stats.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "nn/scaling.h"
#include "report/claims.h"
#include "train/config.h"
#include "train/run_files.h"
#include "train/settings.h"

namespace xgrad::report {

namespace {

// Mean over [begin, end); NaN if empty or any is not finite: a window touching a diverged step reaches nothing.
double strict_mean(const std::vector<double>& v, std::size_t begin, std::size_t end) {
  if (begin >= end) return kNoValue;
  double s = 0;  // in units of 2^64 (exact above 1e-288, as mean_sd's unit): a finite sum does not overflow
  for (std::size_t i = begin; i < end; ++i) {
    if (!std::isfinite(v[i])) return kNoValue;
    s += std::ldexp(v[i], -64);
  }
  return std::ldexp(s / static_cast<double>(end - begin), 64);
}

double finite_mean(const std::vector<double>& v) { return mean_sd(v).mean; }

// First step whose trailing mean over `window` rows passes `reached`; -1 if none does.
template <class Pred>
long first_step(const std::vector<double>& values, const std::vector<double>& steps, std::size_t window, Pred reached) {
  for (std::size_t i = window - 1; i < values.size(); ++i) {
    const double m = strict_mean(values, i + 1 - window, i + 1);
    if (std::isfinite(m) && reached(m)) return static_cast<long>(steps[i]);
  }
  return -1;
}

// The unscaled reference first (the others are compared with it), then registry order, then unknown names.
std::size_t scale_rank(const std::string& scale) {
  if (is_reference_scale(scale)) return 0;
  return 1 + Registry<nn::ScalingEntry>::instance().rank(scale);
}

double number_or_nan(const nlohmann::json& j, const std::string& key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNoValue;
}

// True when the arm's `key` holds the value it takes when not given: a value that follows from the others.
bool holds_derived_default(const nlohmann::json& settings, const std::string& key) {
  const auto it = settings.find(key);
  if (it == settings.end()) return false;
  nlohmann::json given = settings;
  given.erase(key);
  given.erase("chance_loss");  // added by arm_settings, not a setting
  given["config_version"] = train::kConfigVersion;
  try {
    return train::TrainConfig::from_json(given, "compare").to_json().value(key, nlohmann::json()) == *it;
  } catch (const std::exception&) {
    return false;  // settings of a build this one cannot read: the value is shown
  }
}

// A derived setting in which the arms differ only through what it follows from: every arm holds its default.
bool follows_in_every_arm(const std::vector<const nlohmann::json*>& settings, const std::string& key) {
  if (key != "d_ff") return false;  // follows from d_model; d_k does too, but every table shows it
  for (const nlohmann::json* s : settings)
    if (s->contains(key) && !holds_derived_default(*s, key)) return false;
  return true;
}

// Every key of `settings` in table order: what changes what is learned first, then alphabetically; no chance_loss.
std::vector<std::string> ordered_keys(const std::vector<const nlohmann::json*>& settings) {
  static const std::vector<std::string> priority{"task", "d_model",    "d_k",      "scale", "optimizer",
                                                 "lr",   "n_heads",    "n_layers", "steps", "batch_size",
                                                 "mlp",  "layer_norm", "residual"};
  std::set<std::string> rest;
  for (const nlohmann::json* s : settings)
    for (const auto& item : s->items())
      if (item.key() != "chance_loss" && std::find(priority.begin(), priority.end(), item.key()) == priority.end())
        rest.insert(item.key());
  std::vector<std::string> keys = priority;
  keys.insert(keys.end(), rest.begin(), rest.end());
  return keys;
}

// The keys (ordered_keys) whose values differ; one only some arms read (momentum) differs where those arms disagree.
std::vector<std::string> differing_keys(const std::vector<const nlohmann::json*>& settings) {
  std::vector<std::string> out;
  for (const auto& k : ordered_keys(settings)) {
    std::set<std::string> values;
    for (const nlohmann::json* s : settings) {
      const auto it = s->find(k);
      if (it != s->end()) values.insert(it->dump());
    }
    if (values.size() > 1 && !follows_in_every_arm(settings, k)) out.push_back(k);
  }
  return out;
}

std::vector<const nlohmann::json*> settings_of(const std::vector<ArmStats>& arms) {
  std::vector<const nlohmann::json*> out;
  for (const ArmStats& arm : arms) out.push_back(&arm.settings);
  return out;
}

// `series` over the finite steps (is_finite_step, as GradientStats) up to step `until` (NaN: all); per_loss: divided
// by a positive loss.
std::vector<double> rows_until(const RunSeries& s, const std::vector<double>& series, double until, bool per_loss) {
  std::vector<double> values;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (std::isfinite(until) && s.step[i] > until) break;
    if (!train::is_finite_step(s.loss[i], s.grad_norm[i]) || !std::isfinite(series[i]) ||
        (per_loss && !(s.loss[i] > 0)))
      continue;
    values.push_back(per_loss ? series[i] / s.loss[i] : series[i]);
  }
  return values;
}

// The loss and accuracy over a run's last min(20, rows) rows (as summary.json); NaN if the run diverged.
double tail_mean(const RunRecord& run, const std::vector<double>& v) {
  if (run.diverged || v.empty()) return kNoValue;
  const std::size_t tail = std::min<std::size_t>(20, v.size());
  return finite_mean(std::vector<double>(v.end() - static_cast<long>(tail), v.end()));
}

// The first finite value of `v` (NaN if none); `last` gives the last one.
double first_finite(const std::vector<double>& v, bool last = false) {
  double out = kNoValue;
  for (double x : v)
    if (std::isfinite(x)) {
      out = x;
      if (!last) break;
    }
  return out;
}

double step_or_nan(long step) { return step >= 0 ? static_cast<double>(step) : kNoValue; }

const std::vector<double>& grad_norm_series(const RunSeries& s, const std::string& w) {
  return w == "w_q" ? s.grad_norm_w_q : s.grad_norm_w_k;
}

bool logs_weight(const RunRecord& run, const std::string& w) { return w == "w_q" ? run.has_w_q : run.has_w_k; }

using C = const RunContext&;
using W = const std::string&;
const RunSeries& series(C x) { return x.run.series; }

// A GradientStats number of one attention weight, NaN when metrics.csv has no column of it.
using Of = double (train::GradientStats::*)() const;
Statistic gradients_of(const std::string& name, Of of_q, Of of_k) {
  return {name, [of_q, of_k](C x, W w) {
            return logs_weight(x.run, w) ? (x.run.gradients.*(w == "w_q" ? of_q : of_k))() : kNoValue;
          }};
}

// The mean norm over the finite steps (up to statistic `until`'s step, if named) by mean_sd, whose sum cannot overflow.
Statistic mean_grad_norm(const std::string& name, const std::string& until) {
  return {name, [until](C x, W w) {
            const double last = until.empty() ? kNoValue : x.so_far[until];
            return logs_weight(x.run, w)
                       ? finite_mean(rows_until(series(x), grad_norm_series(series(x), w), last, false))
                       : kNoValue;
          }};
}

std::vector<Statistic> curve_statistics() {
  return {
      {"initial_loss", [](C x, W) { return series(x).loss.front(); }},
      {"final_loss", [](C x, W) { return tail_mean(x.run, series(x).loss); }},
      {"final_accuracy", [](C x, W) { return tail_mean(x.run, series(x).accuracy); }},
      {"auc_loss", [](C x, W) { return x.run.diverged ? kNoValue : finite_mean(series(x).loss); }},
      {"step_to_loss",
       [](C x, W) {
         if (!std::isfinite(x.loss_threshold)) return kNoValue;
         return step_or_nan(
             first_step(series(x).loss, series(x).step, x.window, [&](double m) { return m <= x.loss_threshold; }));
       }},
      {"step_to_accuracy",
       [](C x, W) {
         return step_or_nan(first_step(series(x).accuracy, series(x).step, x.window,
                                       [&](double m) { return m >= x.accuracy_threshold; }));
       }},
      {"diverged", [](C x, W) { return x.run.diverged ? 1.0 : 0.0; }, true},
      {"lr_objective",
       [](C x, W) {
         const double initial = x.so_far["initial_loss"], final = x.so_far["final_loss"];
         return !x.run.diverged && std::isfinite(final) && !(final > initial) ? final : initial;
       },
       true},
      {"final_eval_loss", [](C x, W) { return first_finite(series(x).eval_loss, true); }},
  };
}

std::vector<Statistic> attention_statistics() {
  using G = train::GradientStats;
  return {{"grad_norm_step0_{w}",
           [](C x, W w) {
             return !logs_weight(x.run, w) ? kNoValue
                    : w == "w_q"           ? x.run.gradients.first_grad_norm_w_q
                                           : x.run.gradients.first_grad_norm_w_k;
           }},
          // The gradient while the task is being learned, not diluted by steps on a loss near zero after solving it.
          mean_grad_norm("mean_grad_norm_before_loss_{w}", "step_to_loss"),
          mean_grad_norm("mean_grad_norm_{w}", ""),
          gradients_of("frac_zero_grad_{w}", &G::frac_zero_grad_w_q, &G::frac_zero_grad_w_k),
          gradients_of("frac_near_zero_grad_{w}", &G::frac_near_zero_grad_w_q, &G::frac_near_zero_grad_w_k),
          {"first_measured_step",
           [](C x, W) {
             for (std::size_t i = 0; i < series(x).size(); ++i)
               if (std::isfinite(series(x).entropy[i])) return series(x).step[i];
             return kNoValue;
           }},
          {"entropy_first", [](C x, W) { return first_finite(series(x).entropy); }},
          {"entropy_last", [](C x, W) { return first_finite(series(x).entropy, true); }},
          {"score_std_first", [](C x, W) { return first_finite(series(x).score_std); }},
          {"score_std_last", [](C x, W) { return first_finite(series(x).score_std, true); }},
          {"saturated_first", [](C x, W) { return first_finite(series(x).saturated); }},
          {"saturated_last", [](C x, W) { return first_finite(series(x).saturated, true); }},
          {"max_logit_first", [](C x, W) { return first_finite(series(x).max_logit); }},
          {"max_logit_last", [](C x, W) { return first_finite(series(x).max_logit, true); }},
          {"max_logit_max", [](C x, W) { return mean_sd(series(x).max_logit).max; }},
          {"step_max_logit_large",
           [](C x, W) {
             for (std::size_t i = 0; i < series(x).size(); ++i)
               if (series(x).max_logit[i] > kLargeLogit) return series(x).step[i];
             return kNoValue;
           }},
          {"score_grad_median", [](C x, W) { return median(series(x).score_grad_median); }},
          // Per unit of loss and before the threshold: tells a saturated softmax from a solved task.
          {"score_grad_relative", [](C x, W) {
             return median(rows_until(series(x), series(x).score_grad_median, x.so_far["step_to_loss"], true));
           }}};
}

// The arms: runs with the same settings but seeds, sorted by d_k, scaling (registry order), optimizer, lr, rest.
void group_into_arms(Comparison& c) {
  for (const auto& runs :
       group_indices(c.runs.size(), [&](std::size_t i) { return arm_settings(c.runs[i].config).dump(); })) {
    c.arms.emplace_back().settings = arm_settings(c.runs[runs.front()].config);
    c.arms.back().runs = runs;
  }
  const auto key = [](const ArmStats& a) {
    const double lr = a.lr();  // NaN (no lr) last: a NaN inside the key would break the sort's ordering
    return std::make_tuple(a.d_k(), scale_rank(a.scale()), a.scale(), a.optimizer(), std::isnan(lr),
                           std::isnan(lr) ? 0.0 : lr, a.settings.dump());
  };
  std::sort(c.arms.begin(), c.arms.end(), [&](const ArmStats& a, const ArmStats& b) { return key(a) < key(b); });
}

// The same (seed, data_seed) twice is the same run twice (a copied or re-run directory), not another seed.
void count_seeds(const Comparison& c, ArmStats& arm) {
  const auto pairs = [&](std::size_t k) { return seed_key(c.runs[arm.used[k]].config).dump(); };
  for (const auto& group : group_indices(arm.used.size(), pairs)) {
    ++arm.n_seeds;
    std::vector<std::size_t> runs;
    for (auto k : group) runs.push_back(arm.used[k]);
    if (runs.size() > 1) arm.duplicate_seeds.push_back(runs);
  }
}

void summarise_kept_runs(const Comparison& c, ArmStats& arm) {
  for (const Statistic& s : statistics()) {
    const bool per_weight = s.name.find("{w}") != std::string::npos;
    for (const std::string& w : per_weight ? attention_weights() : std::vector<std::string>{""}) {
      const std::string name = statistic_name(s.name, w);
      std::vector<double> values;
      for (auto i : s.over_used_runs ? arm.used : arm.kept) values.push_back(c.stats[i][name]);
      arm.stats[name] = mean_sd(values);
    }
  }
  for (auto i : arm.kept) {
    const double first = c.stats[i]["first_measured_step"];
    if (std::isfinite(first) && first != 0) arm.measured_from_step_0 = false;
  }
}

// Each run's statistics, the runs used (complete ones, or all when none is), the seeds, the kept runs, summaries.
void analyse_arm(Comparison& c, ArmStats& arm, double loss_threshold, double accuracy_threshold) {
  arm.loss_threshold = loss_threshold >= 0 ? loss_threshold : 0.5 * number_or_nan(arm.settings, "chance_loss");
  for (auto i : arm.runs) {
    c.stats[i] = run_stats(c.runs[i], arm.loss_threshold, accuracy_threshold, c.window);
    if (c.runs[i].incomplete)
      ++arm.n_incomplete;
    else
      arm.used.push_back(i);
  }
  if (arm.used.empty()) arm.used = arm.runs;
  count_seeds(c, arm);
  for (auto i : arm.used) {
    if (c.runs[i].diverged)
      arm.diverged_steps.push_back(c.runs[i].diverged_step);
    else
      arm.kept.push_back(i);
  }
  summarise_kept_runs(c, arm);
}

// Two or more arms that differ only in lr (sorted by it), with a finite objective.
std::vector<LrGroup> lr_groups_of(const Comparison& c) {
  std::vector<LrGroup> groups;
  for (const auto& members :
       group_indices(c.arms.size(), [&](std::size_t a) { return key_without(c.arms[a].settings, {"lr"}); })) {
    if (members.size() < 2) continue;
    LrGroup g;
    g.arms = members;
    std::vector<double> objective;
    for (auto a : members) objective.push_back(c.arms[a].stat("lr_objective").mean);
    g.sensitivity = lr_sensitivity(objective);
    if (!std::isfinite(g.sensitivity)) continue;
    // Every run diverged: each objective is an initial loss, whatever the lr, and their spread no sensitivity.
    if (std::all_of(members.begin(), members.end(), [&c](std::size_t a) { return c.arms[a].kept.empty(); }))
      g.sensitivity = kNoValue;
    g.best_arm = *std::min_element(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      return c.arms[a].stat("lr_objective").mean < c.arms[b].stat("lr_objective").mean;
    });
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace

const std::vector<Statistic>& statistics() {
  static const std::vector<Statistic> declared = [] {
    std::vector<Statistic> all = curve_statistics();
    for (Statistic& s : attention_statistics()) all.push_back(std::move(s));
    for (Statistic& s : all) s.description = text_template("glossary", s.name);
    return all;
  }();
  return declared;
}

std::string statistic_name(const std::string& declared, const std::string& w) {
  const auto at = declared.find("{w}");
  return at == std::string::npos ? declared : declared.substr(0, at) + w + declared.substr(at + 3);
}

double RunStats::operator[](const std::string& name) const {
  const auto it = values.find(name);
  if (it == values.end()) throw std::out_of_range("no run statistic is named '" + name + "'");
  return it->second;
}

const MeanSd& ArmStats::stat(const std::string& name) const {
  const auto it = stats.find(name);
  if (it == stats.end()) throw std::out_of_range("no arm statistic is named '" + name + "'");
  return it->second;
}

bool is_reference_scale(const std::string& scale) {
  const nn::ScalingEntry* entry = Registry<nn::ScalingEntry>::instance().find(scale);
  return entry && entry->is_reference;
}

RunStats run_stats(const RunRecord& run, double loss_threshold, double accuracy_threshold, std::size_t window) {
  RunStats r;
  const RunContext context{run, loss_threshold, accuracy_threshold, std::max<std::size_t>(window, 1), r};
  for (const Statistic& s : statistics()) {
    const bool per_weight = s.name.find("{w}") != std::string::npos;
    for (const std::string& w : per_weight ? attention_weights() : std::vector<std::string>{""})
      r.values[statistic_name(s.name, w)] = run.series.size() ? s.of_run(context, w) : kNoValue;
  }
  return r;
}

MeanSd mean_sd(const std::vector<double>& values) {
  MeanSd m;
  for (double v : values)
    if (std::isfinite(v)) {
      m.min = ++m.n == 1 ? v : std::min(m.min, v);
      m.max = m.n == 1 ? v : std::max(m.max, v);
    }
  if (m.n == 0) return m;
  // In units of a power of two (exact) near the largest |value|: a sum of finite values does not overflow.
  const double largest = std::max(-m.min, m.max), unit = largest > 0 ? std::scalbn(1.0, std::ilogb(largest)) : 1.0;
  double sum = 0, sq = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v / unit;
  const double mean = sum / static_cast<double>(m.n);
  for (double v : values)
    if (std::isfinite(v)) sq += (v / unit - mean) * (v / unit - mean);
  m.mean = mean * unit;
  m.sd = m.n > 1 ? std::sqrt(sq / static_cast<double>(m.n - 1)) * unit : 0.0;
  m.median = median(values);
  return m;
}

double median(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  if (values.empty()) return kNoValue;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::size_t ArmStats::d_k() const {
  const auto it = settings.find("d_k");
  return it != settings.end() && it->is_number_unsigned() ? it->get<std::size_t>() : 0;
}

std::string ArmStats::scale() const { return setting_text(settings, "scale"); }

std::string ArmStats::optimizer() const { return setting_text(settings, "optimizer"); }

double ArmStats::lr() const { return number_or_nan(settings, "lr"); }

bool ArmStats::learned() const {
  const MeanSd& final_loss = stat("final_loss");
  if (final_loss.n == 0) return false;
  // A loss that fell from a bad start but stays above a uniform guess has learned nothing about the task.
  const double chance = number_or_nan(settings, "chance_loss");
  const MeanSd reference =
      std::isfinite(chance) ? MeanSd{chance, 0.0, 1, chance, chance, chance} : stat("initial_loss");
  // Within the larger seed sd, or 2% (tolerance "loss") when one seed has no spread, is no difference.
  double tol = tolerance("loss").between(reference.mean, final_loss.mean);
  for (double sd : {reference.sd, final_loss.sd})
    if (std::isfinite(sd)) tol = std::max(tol, sd);
  return reference.n > 0 && reference.mean - final_loss.mean > tol;
}

nlohmann::json arm_settings(const nlohmann::json& config) {
  // Seeds and record settings (output, logging, threads) change no number; an unknown key counts as an arm's.
  nlohmann::json s = nlohmann::json::object();
  for (const auto& [key, value] : config.items()) {
    if (train::is_record_key(key)) continue;
    const Setting* declared = train::find_setting(key);
    if (declared && declared->role != Setting::Role::arm) continue;
    s[key] = value;
  }
  // Runs of one path on other contents are other arms, never compared as if only their scaling differed.
  const auto inputs = config.find("inputs");
  if (inputs != config.end() && inputs->is_array() && !inputs->empty()) {
    std::string text;
    for (const nlohmann::json& f : *inputs)
      if (f.is_object() && f.contains("path") && f.at("path").is_string() && f.contains("xxh3") &&
          f.at("xxh3").is_string())
        text += (text.empty() ? "" : ", ") +
                std::filesystem::path(f.at("path").get<std::string>()).filename().string() + " " +
                f.at("xxh3").get<std::string>().substr(0, 8);
    s["inputs"] = text;
  }
  const auto derived = config.find("derived");
  if (derived != config.end() && derived->is_object() && derived->contains("chance_loss"))
    s["chance_loss"] = derived->at("chance_loss");
  return s;
}

std::string key_without(const nlohmann::json& settings, const std::vector<std::string>& keys) {
  nlohmann::json s = settings;
  for (const auto& key : keys) s.erase(key);
  return s.dump();
}

std::string setting_text(const nlohmann::json& settings, const std::string& key) {
  const auto it = settings.find(key);
  if (it == settings.end()) return "\u2013";  // an en dash: the run does not read this setting
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_float()) return fmt::format("{:g}", it->get<double>());
  return it->dump();
}

double lr_sensitivity(const std::vector<double>& objective) {
  const MeanSd m = mean_sd(objective);
  if (m.n < 2) return kNoValue;
  double best = m.mean;
  for (double v : objective)
    if (std::isfinite(v)) best = std::min(best, v);
  return m.mean - best;
}

Comparison analyse_runs(std::vector<RunRecord> runs, double loss_threshold, double accuracy_threshold,
                        std::size_t window) {
  Comparison c;
  c.runs = std::move(runs);
  c.accuracy_threshold = accuracy_threshold;
  c.window = std::max<std::size_t>(window, 1);
  group_into_arms(c);
  c.stats.resize(c.runs.size());
  for (ArmStats& arm : c.arms) analyse_arm(c, arm, loss_threshold, accuracy_threshold);
  c.lr_groups = lr_groups_of(c);
  return c;
}

bool solved(const ArmStats& arm, const Comparison& c) {
  if (arm.kept.empty()) return false;
  // A NaN final loss or accuracy (every row skipped under --on-nan skip) fails both comparisons: not solved.
  return std::all_of(arm.kept.begin(), arm.kept.end(), [&](std::size_t i) {
    return c.stats[i]["final_accuracy"] >= c.accuracy_threshold && c.stats[i]["final_loss"] <= kSolvedLoss;
  });
}

std::vector<std::string> distinguishing_keys(const std::vector<ArmStats>& arms) {
  static const std::vector<std::string> fixed{"d_k", "scale", "optimizer", "lr"};
  std::vector<std::string> extra;
  for (const auto& k : differing_keys(settings_of(arms)))
    if (std::find(fixed.begin(), fixed.end(), k) == fixed.end()) extra.push_back(k);
  return extra;
}

std::vector<std::string> settings_differing(const nlohmann::json& a, const nlohmann::json& b) {
  return differing_keys({&a, &b});
}

std::vector<std::string> settings_differing(const std::vector<const nlohmann::json*>& settings) {
  return differing_keys(settings);
}

std::vector<std::string> in_setting_order(const std::vector<ArmStats>& arms, const std::set<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : ordered_keys(settings_of(arms)))
    if (keys.count(k)) out.push_back(k);
  return out;
}

std::vector<std::string> own_settings(const nlohmann::json& settings, const std::string& component) {
  std::vector<std::string> out;
  const train::Component* owner = train::find_component(component);
  const auto name = settings.find(component);
  if (!owner || name == settings.end() || !name->is_string()) return out;
  if (const std::vector<Setting>* declared = owner->settings_of(name->get<std::string>())) {
    // A setting several entries declare (n_pairs of two tasks) means the same in each: it still tells arms apart.
    const auto declarers = [&](const std::string& key) {
      std::size_t n = 0;
      for (const std::string& other : owner->names())
        if (const auto* s = owner->settings_of(other))
          n += std::any_of(s->begin(), s->end(), [&](const Setting& d) { return d.key == key; });
      return n;
    };
    for (const auto& item : settings.items())
      if (std::any_of(declared->begin(), declared->end(), [&](const Setting& d) { return d.key == item.key(); }) &&
          declarers(item.key()) == 1)
        out.push_back(item.key());
    return out;
  }
  for (const train::Component& other : train::components()) {
    const auto it = settings.find(other.key);
    if (other.key != component && it != settings.end() && it->is_string() && !other.settings_of(it->get<std::string>()))
      return out;  // two unknown entries: which one reads an unknown key is not known
  }
  for (const auto& item : settings.items())
    if (item.key() != "chance_loss" && item.key() != "inputs" && !train::find_setting(item.key()))
      out.push_back(item.key());
  return out;
}

std::string scale_label(const ArmStats& arm) {
  std::vector<std::string> parts;
  for (const auto& key : own_settings(arm.settings, "scale"))
    parts.push_back(key + "=" + setting_text(arm.settings, key));
  return parts.empty() ? arm.scale() : fmt::format("{} ({})", arm.scale(), fmt::join(parts, ", "));
}

}  // namespace xgrad::report
