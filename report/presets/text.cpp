// The report of preset `text` (its grid and question: cli/presets/text.cpp): per arm (d_model, n_heads, d_k,
// scaling) the held-out loss, the first layer's attention saturation at step 0 and at the end, and a sample of the
// text it writes; which scaling ends lower at each head size, and whether that is the synthetic tasks' answer.
#include <cmath>
#include <filesystem>

#include "report/preset_report.h"
#include "train/number_format.h"
#include "train/sample.h"

namespace xgrad::report::presets::text {
namespace {

constexpr std::size_t kSampleBytes = 300;
constexpr double kSampleTemperature = 0.8;  // nanoGPT sample.py's default

struct TextArm {
  const ArmStats* stats = nullptr;
  std::size_t d_model = 0, n_heads = 0, d_k = 0;
  std::string scale;
  const MeanSd& eval_loss() const { return stats->stat("final_eval_loss"); }
  std::string name() const {
    return fmt::format("d_model {}, {} head{} (d_k {})", d_model, n_heads, n_heads == 1 ? "" : "s", d_k);
  }
};

std::size_t setting(const nlohmann::json& s, const char* key) {
  return s.contains(key) && s.at(key).is_number() ? s.at(key).get<std::size_t>() : 0;
}

// The held-out loss against d_k: one line per scaling and family (n_heads varying at the widest d_model, d_model
// varying at one head); the point both families share is on both.
SummaryFigure loss_figure(const std::vector<TextArm>& arms, std::size_t wide) {
  std::vector<LinePoint> points;
  for (const TextArm& a : arms)
    for (const bool heads : {true, false})
      if (heads ? a.d_model == wide : a.n_heads == 1)
        points.push_back({a.scale + (heads ? ", heads" : ", width"), a.scale,
                          mean_point(static_cast<double>(a.d_k), a.eval_loss(), 0, true)});
  return lines_figure("text_eval_loss_vs_d_k", "text.loss", Axis::log, Axis::linear, points, {{"wide", wide}});
}

// Each scaled arm's held-out loss against the unscaled arm it differs from in scale alone (arm_groups), seed by seed.
std::map<const ArmStats*, Outcome> against_unscaled(const Comparison& c) {
  std::map<const ArmStats*, Outcome> out;
  for (const std::vector<std::size_t>& group : arm_groups(c, "scale"))
    for (std::size_t ref : group)
      for (std::size_t a : group)
        if (is_reference_scale(c.arms[ref].scale()) && a != ref)
          out[&c.arms[a]] =
              judge_finding(c, {"", "final_eval_loss", Better::lower, "loss"}, c.arms[a], &c.arms[ref]).outcome;
  return out;
}

// A row per arm, its held-out loss with its verdict against unscaled attention of the same model.
Table arm_rows(const std::vector<TextArm>& arms, const std::map<const ArmStats*, Outcome>& verdicts) {
  Table t = preset_table("text.table_header");
  for (const TextArm& a : arms)
    t.rows.push_back({std::to_string(a.d_model), std::to_string(a.n_heads), std::to_string(a.d_k), a.scale,
                      format_seeds(*a.stats), format_mean_sd(a.eval_loss()),
                      verdicts.count(a.stats) ? preset_text("text." + outcome_key(verdicts.at(a.stats))) : "—",
                      format_mean_sd(a.stats->stat("final_loss")),
                      format_percent(a.stats->stat("saturated_first").mean),
                      format_percent(a.stats->stat("saturated_last").mean),
                      train::format_number(a.stats->stat("entropy_last").mean, 2)});
  return t;
}

// The verdicts counted per outcome, and a reading of them.
std::string verdict_text(const std::map<const ArmStats*, Outcome>& verdicts) {
  Tally count;
  for (const auto& arm_outcome : verdicts) count.add(arm_outcome.second);
  if (count.n() == 0) return preset_text("text.no_pair") + "\n\n";
  return preset_text("text.counts", count.fields()) + "\n\n" +
         preset_text(count.better == count.n()               ? "text.story_holds"
                     : count.worse == 0 && count.better == 0 ? "text.story_not_shown"
                     : count.worse > 0                       ? "text.story_contradicted"
                                                             : "text.story_in_part",
                     count.fields()) +
         "\n\n";
}

// `text` in a fenced block that no line of it can close: the fence is longer than any run of backticks in it. Control
// bytes but newline and tab are shown as \xNN, as sample_text shows invalid UTF-8.
std::string fenced(const std::string& text) {
  std::size_t longest = 0, run = 0;
  std::string shown;
  for (char ch : text) {
    longest = std::max(longest, run = ch == '`' ? run + 1 : 0);
    const auto u = static_cast<unsigned char>(ch);
    shown += (u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f ? fmt::format("\\x{:02X}", u) : std::string(1, ch);
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  return fence + "text\n" + shown + "\n" + fence + "\n";
}

std::string samples(const Comparison& c, const std::vector<TextArm>& arms) {
  std::string md =
      preset_text("text.samples", {{"tokens", kSampleBytes}, {"temperature", kSampleTemperature}}) + "\n\n";
  for (const TextArm& a : arms) {
    if (a.stats->kept.empty()) continue;
    const auto seed = [&](std::size_t r) { return c.runs[r].config.value("seed", std::uint64_t{0}); };
    const RunRecord& run = c.runs[*std::min_element(a.stats->kept.begin(), a.stats->kept.end(),
                                                    [&](std::size_t x, std::size_t y) { return seed(x) < seed(y); })];
    md +=
        preset_text("text.sample_of", {{"arm", a.name()},
                                       {"scale", a.scale},
                                       {"run", markdown_escape(std::filesystem::path(run.dir).filename().string())}}) +
        "\n\n";
    try {
      train::SampleOptions options;
      options.tokens = kSampleBytes;
      options.temperature = kSampleTemperature;
      md += fenced(train::sample_text(*train::load_sampling_model(run.dir), options)) + "\n";
    } catch (const std::exception& e) {
      md += preset_text("text.no_sample", {{"why", markdown_text(e.what())}}) + "\n\n";
    }
  }
  return md;
}

std::vector<PresetSection> report(const PresetInput& in) {
  const Comparison& c = in.comparison;
  std::vector<TextArm> arms;
  std::size_t wide = 0;  // the widest model: the n_heads family's d_model
  for (const ArmStats& a : c.arms) {
    arms.push_back({&a, setting(a.settings, "d_model"), setting(a.settings, "n_heads"), a.d_k(), a.scale()});
    wide = std::max(wide, arms.back().d_model);
  }
  PresetSection s = preset_section("text");
  if (arms.empty()) return {preset_section("text", preset_text("text.no_run") + "\n")};
  s.figures.push_back(loss_figure(arms, wide));
  const std::map<const ArmStats*, Outcome> verdicts = against_unscaled(c);
  s.markdown =
      verdict_text(verdicts) + preset_text("text.saturated") + "\n\n" + arm_rows(arms, verdicts).markdown() + "\n";
  return {s, preset_section("text-samples", samples(c, arms))};
}

const Registration<PresetReport> text_registration{PresetReport{"text", 50, report}};

}  // namespace
}  // namespace xgrad::report::presets::text
