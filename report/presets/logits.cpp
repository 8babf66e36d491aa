// The report of preset `logits` (its grid and question: cli/presets/logits.cpp): the largest attention logit against
// step per task, optimizer and d_k; final loss and last entropy against d_k; and four verdicts, each a set of
// seed-by-seed comparisons (compare_values) counted per question: (a) Muon's largest logit against AdamW's, (b)
// sqrt_dk's against tau, (c) QK-Clip's final loss against sqrt_dk's where the clip acts, (d) qk_norm at scale 1
// against qk_norm at 1/sqrt(d_k): entropy at step 0 and at the end, and final loss.
#include <tuple>

#include "common/setting.h"
#include "report/preset_report.h"

namespace xgrad::report::presets::logits {
namespace {

// An arm's place: task, optimizer, d_k, the settings beyond the preset's axes (LineLabels::extras), its role (its
// scaling; for qk_norm its multiplier as its shortest text, "qk_norm:1"), and its qk_clip_tau ("" for none): arms
// at two taus are two arms, each compared at its own.
using Key = std::tuple<std::string, std::string, std::size_t, std::string, std::string, std::string>;

Key key_of(const ArmStats& a, const LineLabels& labels) {
  const std::string s = a.scale();
  return {setting_text(a.settings, "task"),
          a.optimizer(),
          a.d_k(),
          labels.extras(a.settings),
          s == "qk_norm" ? s + ":" + detail::shortest_number_text(setting_text(a.settings, "qk_norm_scale")) : s,
          a.settings.contains("qk_clip_tau") ? setting_text(a.settings, "qk_clip_tau") : ""};
}

// One comparison of the verdicts: `subject` against `baseline` (roles, or optimizers when across_optimizers) in
// `statistic`, in every cell (task, d_k, the other of role and optimizer) that holds both. An empty baseline is the
// threshold tau (kLargeLogit, or the arm's qk_clip_tau).
struct Rule {
  const char *question, *subject, *baseline;
  bool across_optimizers;
  const char* statistic;
  Better better;
  const char* tolerance;
};
const Rule kRules[] = {
    {"a", "muon", "adamw", true, "max_logit_max", Better::higher, "logit_growth"},
    {"b", "sqrt_dk", "", false, "max_logit_max", Better::lower, "share"},
    {"b", "none", "", false, "max_logit_max", Better::lower, "share"},
    {"c", "qk_clip", "sqrt_dk", false, "final_loss", Better::lower, "loss"},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, "entropy_first", Better::higher, "entropy"},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, "entropy_last", Better::higher, "entropy"},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, "final_loss", Better::lower, "loss"},
};

double tau_of(const ArmStats& a) {
  const auto it = a.settings.find("qk_clip_tau");
  return it != a.settings.end() && it->is_number() ? it->get<double>() : kLargeLogit;
}

struct Row {
  const ArmStats* subject;
  const ArmStats* baseline;  // null: tau
  Verdict v;
};

// The rule's rows; a "c" row only where the clip acts: the sqrt_dk arm passes tau in some seed.
std::vector<Row> rows_of(const Comparison& c, const std::map<Key, const ArmStats*>& arms, const Rule& rule) {
  std::vector<Row> rows;
  for (const auto& [key, a] : arms) {
    if ((rule.across_optimizers ? std::get<1>(key) : std::get<4>(key)) != rule.subject) continue;
    Key other = key;
    (rule.across_optimizers ? std::get<1>(other) : std::get<4>(other)) = rule.baseline;
    if (!rule.across_optimizers) std::get<5>(other) = "";  // no baseline role has a tau
    const auto b = arms.find(other);
    if (*rule.baseline && b == arms.end()) continue;
    const ArmStats* base = *rule.baseline ? b->second : nullptr;
    std::map<nlohmann::json, double> subject = by_seed(c, a->kept, rule.statistic), baseline;
    for (const auto& [seed, v] : subject) baseline[seed] = tau_of(*a);
    if (base) baseline = by_seed(c, base->kept, rule.statistic);
    if (std::string(rule.question) == "c") {
      const auto logits = by_seed(c, base->kept, "max_logit_max");
      const double tau = tau_of(*a);  // a structured binding cannot be captured in C++17 (Clang)
      if (std::none_of(logits.begin(), logits.end(), [&](const auto& p) { return p.second > tau; })) continue;
    }
    Verdict v = compare_values(subject, baseline, rule.better, tolerance(rule.tolerance));
    v.subject_value = a->stat(rule.statistic).mean;
    v.baseline_value = base ? base->stat(rule.statistic).mean : tau_of(*a);
    rows.push_back({a, base, v});
  }
  return rows;
}

// The verdict rows as a table, and per question, rule and optimizer (for (a): scaling) the counts of outcomes as a
// table and a sentence.
std::string verdicts(const Comparison& c, const std::map<Key, const ArmStats*>& arms, const LineLabels& labels) {
  Table rows = preset_table("logits.rows_header"), counts = preset_table("logits.counts_header");
  auto name = [&](const ArmStats* a) { return labels(a->optimizer() + " " + scale_label(*a), a->settings); };
  const auto value = [](double v) { return number_or_dash(v, "{:.4g}"); };
  std::string text;
  for (const Rule& rule : kRules) {
    // Counted per subject (two taus of qk_clip are two subjects) and place (the optimizer; for (a), the scaling).
    std::map<std::pair<std::string, std::string>, std::pair<std::string, std::map<Outcome, std::size_t>>> counted;
    for (const Row& r : rows_of(c, arms, rule)) {
      const std::string where = rule.across_optimizers ? scale_label(*r.subject) : r.subject->optimizer();
      auto& [baseline, n] = counted[{rule.across_optimizers ? rule.subject : scale_label(*r.subject), where}];
      baseline = rule.across_optimizers ? rule.baseline : r.baseline ? scale_label(*r.baseline) : "tau";
      ++n[r.v.outcome];
      rows.rows.push_back(
          {rule.question, setting_text(r.subject->settings, "task"), std::to_string(r.subject->d_k()), name(r.subject),
           r.baseline ? name(r.baseline) : "tau", rule.statistic, value(r.v.subject_value), value(r.v.baseline_value),
           fmt::format("{} / {} / {}", r.v.seeds_better, r.v.seeds_worse, r.v.seeds_same), outcome_name(r.v.outcome)});
    }
    if (counted.empty())
      text += preset_text(std::string("logits.none_") + rule.question, {{"subject", rule.subject}}) + "\n";
    for (auto& [place, count] : counted) {
      auto& n = count.second;
      const std::size_t better = n[Outcome::better], worse = n[Outcome::worse], same = n[Outcome::same],
                        total = better + worse + same + n[Outcome::not_decided];
      counts.rows.push_back({rule.question, place.first, count.first, rule.statistic, place.second,
                             std::to_string(better), std::to_string(worse), std::to_string(same),
                             std::to_string(n[Outcome::not_decided])});
      const std::string answer = agreement(better, worse, same, total);
      Fields f = outcome_fields(n);
      f["subject"] = place.first, f["where"] = place.second;
      text += preset_text(fmt::format("logits.{}_{}_{}", rule.question, rule.statistic, answer), f) + "\n";
    }
  }
  return preset_text("logits.verdict_legend", {{"tau", kLargeLogit}}) + "\n\n" + text + "\n" + counts.markdown() +
         "\n" + rows.markdown() + "\n";
}

// The largest logit against step per task, optimizer and d_k, one line per scaling: the mean over the arm's kept
// runs at each step all logged.
void add_logit_figures(const Comparison& c, const LineLabels& labels, std::set<std::string>& taken, PresetSection& s) {
  for (const auto& [panel, members] : group_by(arm_pointers(c), [](const ArmStats* a) {
         return std::tuple{setting_text(a->settings, "task"), a->optimizer(), a->d_k()};
       })) {
    const auto& [task, optimizer, d_k] = panel;
    const Fields where{{"task", task}, {"optimizer", optimizer}, {"d_k", d_k}};
    SummaryFigure f =
        preset_figure(unique_stem(taken, fmt::format("logits_max_logit_{}_{}_dk{}", task, optimizer, d_k)),
                      "logits.logit", Axis::linear, Axis::log, where);
    f.tabulate = false;
    for (const ArmStats* a : members) {
      f.lines.push_back(summary_line(labels(scale_label(*a), a->settings), a->scale()));
      f.lines.back().points = logit_points(c, a->kept, a->kept.size());
    }
    s.figures.push_back(f);
  }
}

// Final loss and the last entropy against d_k, one figure each per task and optimizer, one line per scaling.
void add_d_k_figures(const Comparison& c, const LineLabels& labels, std::set<std::string>& taken, PresetSection& s) {
  for (const auto& [panel, members] : group_by(arm_pointers(c), [](const ArmStats* a) {
         return std::pair{setting_text(a->settings, "task"), a->optimizer()};
       }))
    for (const std::string statistic : {"final_loss", "entropy_last"}) {
      SummaryFigure f = preset_figure(
          unique_stem(taken, fmt::format("logits_{}_{}_{}", statistic, panel.first, panel.second)),
          "logits." + statistic, Axis::log, Axis::linear, {{"task", panel.first}, {"optimizer", panel.second}});
      for (const auto& [label, line_arms] :
           group_by(members, [&](const ArmStats* a) { return labels(scale_label(*a), a->settings); })) {
        SummaryLine& line = f.lines.emplace_back(summary_line(label, line_arms.front()->scale()));
        for (const ArmStats* a : line_arms)
          line.points.push_back(
              mean_point(static_cast<double>(a->d_k()), a->stat(statistic), a->diverged_steps.size()));
      }
      s.figures.push_back(f);
    }
}

std::vector<PresetSection> report(const PresetInput& in) {
  const Comparison& c = in.comparison;
  const LineLabels labels(c, {"task", "optimizer", "d_k", "scale", "qk_norm_scale", "qk_clip_tau"});
  std::map<Key, const ArmStats*> arms;
  for (const ArmStats& a : c.arms) arms[key_of(a, labels)] = &a;
  PresetSection logits = preset_section("logits"), answers = preset_section("logits-verdicts");
  PresetSection ends = preset_section("logits-d-k", preset_text("logits.d_k_legend") + "\n");
  if (arms.empty()) {
    logits.markdown = preset_text("logits.no_run") + "\n";
    return {logits};
  }
  std::set<std::string> taken;
  add_logit_figures(c, labels, taken, logits);
  logits.markdown = preset_text("logits.logit_legend", {{"tau", kLargeLogit}}) + "\n";
  add_d_k_figures(c, labels, taken, ends);
  answers.markdown = verdicts(c, arms, labels);
  return {answers, logits, ends};  // the verdicts first: what a reader came for, the figures they rest on after
}

const Registration<PresetReport> logits_registration{PresetReport{"logits", 60, report}};

}  // namespace
}  // namespace xgrad::report::presets::logits
