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
  Claim finding;
};
const Rule kRules[] = {
    {"a", "muon", "adamw", true, {"", "max_logit_max", Better::higher, "logit_growth"}},
    {"b", "sqrt_dk", "", false, {"", "max_logit_max", Better::lower, "share"}},
    {"b", "none", "", false, {"", "max_logit_max", Better::lower, "share"}},
    {"c", "qk_clip", "sqrt_dk", false, {"", "final_loss", Better::lower, "loss"}},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, {"", "entropy_first", Better::higher, "entropy"}},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, {"", "entropy_last", Better::higher, "entropy"}},
    {"d", "qk_norm:1", "qk_norm:inv_sqrt_dk", false, {"", "final_loss", Better::lower, "loss"}},
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
    // not "max <= tau": a max of NaN (no seed measured) is no row either
    if (std::string(rule.question) == "c" && !(base->stat("max_logit_max").max > tau_of(*a))) continue;
    rows.push_back({a, base, judge_finding(c, rule.finding, *a, base, tau_of(*a))});
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
    std::map<std::pair<std::string, std::string>, std::pair<std::string, Tally>> counted;
    for (const Row& r : rows_of(c, arms, rule)) {
      const std::string where = rule.across_optimizers ? scale_label(*r.subject) : r.subject->optimizer();
      auto& [baseline, n] = counted[{rule.across_optimizers ? rule.subject : scale_label(*r.subject), where}];
      baseline = rule.across_optimizers ? rule.baseline : r.baseline ? scale_label(*r.baseline) : "tau";
      n.add(r.v.outcome);
      rows.rows.push_back({rule.question, setting_text(r.subject->settings, "task"), std::to_string(r.subject->d_k()),
                           name(r.subject), r.baseline ? name(r.baseline) : "tau", rule.finding.statistic,
                           value(r.v.subject_value), value(r.v.baseline_value),
                           fmt::format("{} / {} / {}", r.v.seeds_better, r.v.seeds_worse, r.v.seeds_same),
                           outcome_name(r.v.outcome)});
    }
    if (counted.empty())
      text += preset_text(std::string("logits.none_") + rule.question, {{"subject", rule.subject}}) + "\n";
    for (const auto& [place, count] : counted) {
      const Tally& n = count.second;
      counts.rows.push_back({rule.question, place.first, count.first, rule.finding.statistic, place.second,
                             std::to_string(n.better), std::to_string(n.worse), std::to_string(n.same),
                             std::to_string(n.not_decided)});
      text += preset_text(fmt::format("logits.{}_{}_{}", rule.question, rule.finding.statistic, n.agreement()),
                          n.fields({{"subject", place.first}, {"where", place.second}})) +
              "\n";
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
    std::vector<LinePoint> points;
    for (const ArmStats* a : members)
      add_line(points, labels(scale_label(*a), a->settings), a->scale(), logit_points(c, a->kept, a->kept.size()));
    s.figures.push_back(lines_figure(
        unique_stem(taken, fmt::format("logits_max_logit_{}_{}_dk{}", task, optimizer, d_k)), "logits.logit",
        Axis::linear, Axis::log, points, {{"task", task}, {"optimizer", optimizer}, {"d_k", d_k}}));
    s.figures.back().tabulate = false;
  }
}

// Final loss and the last entropy against d_k, one figure each per task and optimizer, one line per scaling.
void add_d_k_figures(const Comparison& c, const LineLabels& labels, std::set<std::string>& taken, PresetSection& s) {
  for (const auto& [panel, members] : group_by(arm_pointers(c), [](const ArmStats* a) {
         return std::pair{setting_text(a->settings, "task"), a->optimizer()};
       }))
    for (const std::string statistic : {"final_loss", "entropy_last"}) {
      std::vector<LinePoint> points;
      for (const ArmStats* a : members)
        points.push_back({labels(scale_label(*a), a->settings), a->scale(),
                          mean_point(static_cast<double>(a->d_k()), a->stat(statistic), a->diverged_steps.size())});
      s.figures.push_back(
          lines_figure(unique_stem(taken, fmt::format("logits_{}_{}_{}", statistic, panel.first, panel.second)),
                       "logits." + statistic, Axis::log, Axis::linear, points,
                       {{"task", panel.first}, {"optimizer", panel.second}}));
    }
}

std::vector<PresetSection> report(const PresetInput& in) {
  const Comparison& c = in.comparison;
  const LineLabels labels(c, {"task", "optimizer", "d_k", "scale", "qk_norm_scale", "qk_clip_tau"});
  std::map<Key, const ArmStats*> arms;
  for (const ArmStats& a : c.arms) arms[key_of(a, labels)] = &a;
  PresetSection logits = preset_section("logits"), answers = preset_section("logits-verdicts");
  PresetSection ends = preset_section("logits-d-k", preset_text("logits.d_k_legend") + "\n");
  if (arms.empty()) return {preset_section("logits", preset_text("logits.no_run") + "\n")};
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
