// The report of preset `text` (its grid and question: cli/presets/text.cpp): per arm (d_model, n_heads, d_k,
// scaling) the held-out loss, the first layer's attention saturation at step 0 and at the end, and a sample of the
// text it writes; which scaling ends lower at each head size, and whether that is the synthetic tasks' answer.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "common/registry.h"
#include "report/claims.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "train/number_format.h"
#include "train/run_files.h"
#include "train/sample.h"

namespace xgrad::report::presets::text {
namespace {

constexpr std::size_t kSampleBytes = 300;
constexpr double kSampleTemperature = 0.8;  // nanoGPT sample.py's default

// One arm of the grid with what the report needs of its kept runs.
struct TextArm {
  const ArmStats* stats = nullptr;
  std::size_t d_model = 0, n_heads = 0, d_k = 0;
  std::string scale;
  std::map<nlohmann::json, double> eval_by_seed;  // final_eval_loss of each kept run, by seed_key
  std::size_t sample_run = 0;                     // the kept run with the lowest seed
  const MeanSd& eval_loss() const { return stats->stat("final_eval_loss"); }
};

std::size_t setting(const nlohmann::json& s, const char* key) {
  return s.contains(key) && s.at(key).is_number() ? s.at(key).get<std::size_t>() : 0;
}

TextArm read_arm(const Comparison& c, const ArmStats& a) {
  TextArm t{&a, setting(a.settings, "d_model"), setting(a.settings, "n_heads"), a.d_k(), a.scale(), {}, 0};
  std::uint64_t lowest_seed = UINT64_MAX;
  for (std::size_t i : a.kept) {
    const std::uint64_t seed = c.runs[i].config.value("seed", std::uint64_t{0});
    if (std::isfinite(c.stats[i]["final_eval_loss"]))
      t.eval_by_seed[seed_key(c.runs[i].config)] = c.stats[i]["final_eval_loss"];
    if (seed < lowest_seed) lowest_seed = seed, t.sample_run = i;
  }
  return t;
}

std::string arm_name(const TextArm& a) {
  return fmt::format("d_model {}, {} head{} (d_k {})", a.d_model, a.n_heads, a.n_heads == 1 ? "" : "s", a.d_k);
}

// The held-out loss against d_k: one line per scaling and family (n_heads varying at the widest d_model, d_model
// varying at one head); the point both families share is on both.
SummaryFigure loss_figure(const std::vector<TextArm>& arms, std::size_t wide) {
  SummaryFigure f = summary_figure("text_eval_loss_vs_d_k", "Held-out loss against d_k on text",
                                   preset_text("text.loss_caption", {{"wide", wide}}), "d_k", Axis::log,
                                   "held-out loss (nats/byte)", Axis::linear);
  std::map<std::string, SummaryLine> lines;
  std::vector<std::string> order;
  for (const TextArm& a : arms)
    for (const bool heads_family : {true, false}) {
      if (heads_family ? a.d_model != wide : a.n_heads != 1) continue;
      const std::string label = a.scale + (heads_family ? ", heads" : ", width");
      if (!lines.count(label)) order.push_back(label), lines.emplace(label, summary_line(label, a.scale));
      lines.at(label).points.push_back(mean_point(static_cast<double>(a.d_k), a.eval_loss(), 0, true));
    }
  for (const std::string& label : order) {
    SummaryLine line = lines.at(label);
    std::sort(line.points.begin(), line.points.end(),
              [](const SummaryPoint& x, const SummaryPoint& y) { return x.x < y.x; });
    f.lines.push_back(line);
  }
  return f;
}

Table arm_rows(const std::vector<TextArm>& arms) {
  Table t;
  t.header = text_cells("presets", "text.table_header");
  for (const TextArm& a : arms)
    t.rows.push_back(
        {std::to_string(a.d_model), std::to_string(a.n_heads), std::to_string(a.d_k), a.scale, format_seeds(*a.stats),
         format_mean_sd(a.eval_loss()), format_mean_sd(a.stats->stat("final_loss")),
         format_percent(a.stats->stat("saturated_first").mean), format_percent(a.stats->stat("saturated_last").mean),
         train::format_number(a.stats->stat("entropy_last").mean, 2)});
  return t;
}

// Each scaling's held-out loss against the unscaled arm of the same model, seed by seed: the counts per outcome, a
// reading of them, and a line per pair.
std::string verdict_text(const std::vector<TextArm>& arms) {
  std::map<Outcome, std::size_t> count;
  std::size_t n = 0;
  std::string lines;
  for (const TextArm& ref : arms)
    for (const TextArm& a : arms) {
      if (!is_reference_scale(ref.scale) || &a == &ref || a.d_model != ref.d_model || a.n_heads != ref.n_heads ||
          a.d_k != ref.d_k)
        continue;
      const Verdict r = compare_values(a.eval_by_seed, ref.eval_by_seed, Better::lower, tolerance("loss"));
      ++count[r.outcome], ++n;
      std::string outcome = outcome_name(r.outcome);
      std::replace(outcome.begin(), outcome.end(), ' ', '_');
      const Fields names{{"subject", a.scale}, {"baseline", ref.scale}};
      lines += preset_text("text.pair", {{"arm", arm_name(a)},
                                         {"subject", a.scale},
                                         {"baseline", ref.scale},
                                         {"subject_value", format_mean_sd(a.eval_loss())},
                                         {"baseline_value", format_mean_sd(ref.eval_loss())},
                                         {"said", preset_text("text." + outcome, names)}}) +
               "\n";
    }
  if (n == 0) return preset_text("text.no_pair") + "\n";
  const std::size_t better = count[Outcome::better], worse = count[Outcome::worse];
  const Fields fields{{"better", better},
                      {"worse", worse},
                      {"same", count[Outcome::same]},
                      {"not_decided", count[Outcome::not_decided]},
                      {"n", n}};
  return preset_text("text.counts", fields) + "\n\n" +
         preset_text(better == n                 ? "text.story_holds"
                     : worse == 0 && better == 0 ? "text.story_not_shown"
                     : worse > 0                 ? "text.story_contradicted"
                                                 : "text.story_in_part",
                     fields) +
         "\n\n" + lines + "\n";
}

// `text` in a fenced block that no line of it can close: the fence is longer than any run of backticks in it. Control
// bytes but newline and tab are shown as \xNN, as sample_text shows invalid UTF-8.
std::string fenced(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (char ch : text) longest = std::max(longest, run = ch == '`' ? run + 1 : 0);
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  std::string shown;
  for (char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    const bool control = (u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f;
    shown += control ? fmt::format("\\x{:02X}", u) : std::string(1, ch);
  }
  return fence + "text\n" + shown + "\n" + fence + "\n";
}

std::string samples(const Comparison& c, const std::vector<TextArm>& arms) {
  std::string md =
      preset_text("text.samples", {{"tokens", kSampleBytes}, {"temperature", kSampleTemperature}}) + "\n\n";
  for (const TextArm& a : arms) {
    if (a.stats->kept.empty()) continue;
    const RunRecord& run = c.runs[a.sample_run];
    md +=
        preset_text("text.sample_of", {{"arm", arm_name(a)},
                                       {"scale", a.scale},
                                       {"run", markdown_escape(std::filesystem::path(run.dir).filename().string())}}) +
        "\n\n";
    try {
      const auto model = train::load_sampling_model(run.dir);
      train::SampleOptions options;
      options.tokens = kSampleBytes;
      options.temperature = kSampleTemperature;
      md += fenced(train::sample_text(*model, options)) + "\n";
    } catch (const std::exception& e) {
      md += preset_text("text.no_sample", {{"why", markdown_escape(e.what())}}) + "\n\n";
    }
  }
  return md;
}

std::vector<PresetSection> report(const PresetInput& in) {
  const Comparison& c = in.comparison;
  std::vector<TextArm> arms;
  std::size_t wide = 0;  // the widest model: the n_heads family's d_model
  for (const ArmStats& a : c.arms) {
    arms.push_back(read_arm(c, a));
    wide = std::max(wide, arms.back().d_model);
  }
  PresetSection s{"text", "Scaled and unscaled attention on text", "", {}};
  if (arms.empty()) {
    s.markdown = preset_text("text.no_run") + "\n";
    return {s};
  }
  s.figures.push_back(loss_figure(arms, wide));
  s.markdown = verdict_text(arms) + preset_text("text.saturated") + "\n\n" + arm_rows(arms).markdown() + "\n";
  return {s, PresetSection{"text-samples", "Samples of each arm", samples(c, arms), {}}};
}

const Registration<PresetReport> text_registration{PresetReport{"text", 50, report}};

}  // namespace
}  // namespace xgrad::report::presets::text
