// The report of preset `text` (its grid and question: cli/presets/text.cpp): per arm (d_model, n_heads, d_k,
// scaling) the held-out loss, the first layer's attention saturation at step 0 and at the end, and a sample of the
// text it writes; which scaling ends lower at each head size, and whether that is the synthetic tasks' answer.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "common/registry.h"
#include "report/preset_report.h"
#include "report/tables.h"
#include "train/metrics_log.h"
#include "train/number_format.h"
#include "train/run_files.h"
#include "train/sample.h"

namespace xgrad::report::presets::text {
namespace {

constexpr std::size_t kSampleBytes = 300;
constexpr double kSampleTemperature = 0.8;  // nanoGPT sample.py's default
constexpr double kEqualFraction = 0.02;     // held-out losses closer than 2% of the larger count as equal

// One arm of the grid with what the report needs of its kept runs.
struct TextArm {
  const ArmStats* stats = nullptr;
  std::size_t d_model = 0, n_heads = 0, d_k = 0;
  std::string scale;
  std::map<std::uint64_t, double> eval_by_seed;  // last finite eval_loss of each kept run, by seed
  MeanSd eval_loss, saturated_last;
  std::size_t sample_run = 0;  // the kept run with the lowest seed
};

std::size_t setting(const nlohmann::json& s, const char* key) {
  return s.contains(key) && s.at(key).is_number() ? s.at(key).get<std::size_t>() : 0;
}

double last_finite(const std::vector<double>& v) {
  for (auto it = v.rbegin(); it != v.rend(); ++it)
    if (std::isfinite(*it)) return *it;
  return kNoValue;
}

// The last finite eval_loss in the run's metrics.csv (NaN when the run has none).
double final_eval_loss(const RunRecord& run) {
  try {
    const train::MetricsTable t = train::read_metrics(run.dir + "/" + train::kMetricsFile);
    std::vector<double> column;
    const std::size_t k = t.column(train::metrics_columns::kEvalLoss);
    for (const auto& row : t.rows) column.push_back(row[k]);
    return last_finite(column);
  } catch (const std::exception&) {
    return kNoValue;
  }
}

TextArm read_arm(const Comparison& c, const ArmStats& a) {
  TextArm t;
  t.stats = &a;
  t.d_model = setting(a.settings, "d_model");
  t.n_heads = setting(a.settings, "n_heads");
  t.d_k = a.d_k();
  t.scale = a.scale();
  std::vector<double> evals, saturated;
  std::uint64_t lowest_seed = UINT64_MAX;
  for (std::size_t i : a.kept) {
    const RunRecord& run = c.runs[i];
    const std::uint64_t seed = run.config.value("seed", std::uint64_t{0});
    const double eval = final_eval_loss(run);
    if (std::isfinite(eval)) t.eval_by_seed[seed] = eval;
    evals.push_back(eval);
    saturated.push_back(last_finite(run.series.saturated));
    if (seed < lowest_seed) lowest_seed = seed, t.sample_run = i;
  }
  t.eval_loss = mean_sd(evals);
  t.saturated_last = mean_sd(saturated);
  return t;
}

std::string arm_name(const TextArm& a) {
  return fmt::format("d_model {}, {} head{} (d_k {})", a.d_model, a.n_heads, a.n_heads == 1 ? "" : "s", a.d_k);
}

// The held-out loss against d_k: one line per scaling and family (n_heads varying at the widest d_model, d_model
// varying at one head); the point both families share is on both.
SummaryFigure loss_figure(const std::vector<TextArm>& arms, std::size_t wide) {
  SummaryFigure f = summary_figure(
      "text_eval_loss_vs_d_k", "Held-out loss against d_k on text",
      fmt::format("last eval_loss of each run (nats per byte, over its --eval-batches held-out batches), mean ± sd "
                  "over seeds; \"heads\": n_heads = {} / d_k at d_model {}; \"width\": d_model = d_k at one head",
                  wide, wide),
      "d_k", Axis::log, "held-out loss (nats/byte)", Axis::linear);
  std::map<std::string, SummaryLine> lines;
  std::vector<std::string> order;
  for (const TextArm& a : arms)
    for (const bool heads_family : {true, false}) {
      if (heads_family ? a.d_model != wide : a.n_heads != 1) continue;
      const std::string label = a.scale + (heads_family ? ", heads" : ", width");
      if (!lines.count(label)) order.push_back(label), lines.emplace(label, summary_line(label, a.scale));
      SummaryPoint p;
      p.x = static_cast<double>(a.d_k);
      p.y = a.eval_loss.mean;
      p.lo = a.eval_loss.mean - a.eval_loss.sd;
      p.hi = a.eval_loss.mean + a.eval_loss.sd;
      p.n = a.eval_loss.n;
      lines.at(label).points.push_back(p);
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
  t.header = {"d_model",
              "n_heads",
              "d_k",
              "scaling",
              "seeds",
              "held-out loss",
              "train loss",
              "saturated at step 0",
              "saturated at the end",
              "entropy at the end (nats)"};
  for (const TextArm& a : arms)
    t.rows.push_back({std::to_string(a.d_model), std::to_string(a.n_heads), std::to_string(a.d_k), a.scale,
                      format_seeds(*a.stats), format_mean_sd(a.eval_loss), format_mean_sd(a.stats->stat("final_loss")),
                      format_percent(a.stats->stat("saturated_first").mean), format_percent(a.saturated_last.mean),
                      train::format_number(a.stats->stat("entropy_last").mean, 2)});
  return t;
}

// -1: `a` ends lower in every shared seed, 1: `b` does, 0: within kEqualFraction in every one, 2: not decided (the
// seeds disagree, or no shared seed).
int compare_eval(const TextArm& a, const TextArm& b) {
  std::size_t a_lower = 0, b_lower = 0, same = 0;
  for (const auto& [seed, loss_a] : a.eval_by_seed) {
    const auto it = b.eval_by_seed.find(seed);
    if (it == b.eval_by_seed.end()) continue;
    const double tol = kEqualFraction * std::max(loss_a, it->second);
    (loss_a < it->second - tol ? a_lower : loss_a > it->second + tol ? b_lower : same) += 1;
  }
  const std::size_t n = a_lower + b_lower + same;
  if (n == 0) return 2;
  return a_lower == n ? -1 : b_lower == n ? 1 : same == n ? 0 : 2;
}

// One line per compared arm pair (a scaling against the unscaled arm of the same model) and the counts.
struct Verdicts {
  std::string lines;
  std::size_t scaled_lower = 0, unscaled_lower = 0, same = 0, undecided = 0;
};

Verdicts verdicts(const std::vector<TextArm>& arms) {
  Verdicts v;
  for (const TextArm& ref : arms) {
    if (!is_reference_scale(ref.scale)) continue;
    for (const TextArm& a : arms) {
      if (&a == &ref || a.d_model != ref.d_model || a.n_heads != ref.n_heads || a.d_k != ref.d_k) continue;
      const int r = compare_eval(a, ref);
      (r == -1 ? v.scaled_lower : r == 1 ? v.unscaled_lower : r == 0 ? v.same : v.undecided) += 1;
      const std::string said = r == -1  ? a.scale + " ends lower"
                               : r == 1 ? ref.scale + " ends lower"
                               : r == 0 ? "about the same (within 2% in every seed)"
                                        : "not decided (the seeds disagree)";
      v.lines += fmt::format("- {}: {} vs {}: {} vs {} — {}.\n", arm_name(a), a.scale, ref.scale,
                             format_mean_sd(a.eval_loss), format_mean_sd(ref.eval_loss), said);
    }
  }
  return v;
}

std::string verdict_text(const Verdicts& v) {
  const std::size_t n = v.scaled_lower + v.unscaled_lower + v.same + v.undecided;
  if (n == 0) return "No scaled arm has an unscaled arm of the same model to be compared with.\n";
  std::string text = fmt::format(
      "Held-out loss, each scaling against unscaled attention of the same model, seed by seed (lower by more than "
      "2% in every shared seed): the scaled arm ends lower at {} of {}, the unscaled at {}, about the same at {}, "
      "not decided at {}.\n\n",
      v.scaled_lower, n, v.unscaled_lower, v.same, v.undecided);
  if (v.scaled_lower == n)
    text += "Here the usual story holds on text: the scaled attention ends lower at every head size compared.\n\n";
  else if (v.unscaled_lower == 0 && v.scaled_lower == 0)
    text +=
        "Here the data does not show the usual story: the scaled attention is lower by more than 2% at no head "
        "size compared.\n\n";
  else if (v.unscaled_lower > 0)
    text += fmt::format(
        "Here the data contradicts the usual story at {} of {}: the unscaled attention ends lower there.\n\n",
        v.unscaled_lower, n);
  else
    text +=
        "Here the usual story holds only in part: the scaled attention is not lower by more than 2% at every "
        "head size compared.\n\n";
  return text + v.lines + "\n";
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
  std::string md = fmt::format(
      "What each arm writes: `xgrad sample RUN_DIR --tokens {} --temperature {:g} --seed 0` on the arm's run of the "
      "lowest seed, starting from a newline.\n\n",
      kSampleBytes, kSampleTemperature);
  for (const TextArm& a : arms) {
    if (a.stats->kept.empty()) continue;
    const RunRecord& run = c.runs[a.sample_run];
    md += fmt::format("**{}, {}** (run {}):\n\n", arm_name(a), a.scale,
                      markdown_escape(std::filesystem::path(run.dir).filename().string()));
    try {
      const auto model = train::load_sampling_model(run.dir);
      train::SampleOptions options;
      options.tokens = kSampleBytes;
      options.temperature = kSampleTemperature;
      md += fenced(train::sample_text(*model, options)) + "\n";
    } catch (const std::exception& e) {
      md += "No sample: " + markdown_escape(e.what()) + "\n\n";
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
  PresetSection s;
  s.anchor = "text";
  s.title = "Scaled and unscaled attention on text";
  if (arms.empty()) {
    s.markdown = "No run of the text grid was found.\n";
    return {s};
  }
  s.figures.push_back(loss_figure(arms, wide));
  s.markdown = verdict_text(verdicts(arms)) +
               "Saturated: the share of the first layer's queries (with two or more keys) whose largest attention "
               "weight is above 0.99, mean over heads and seeds; at step 0 and at the last logged step.\n\n" +
               arm_rows(arms).markdown() + "\n";
  PresetSection samples_section;
  samples_section.anchor = "text-samples";
  samples_section.title = "Samples of each arm";
  samples_section.markdown = samples(c, arms);
  return {s, samples_section};
}

const Registration<PresetReport> text_registration{PresetReport{"text", 50, report}};

}  // namespace
}  // namespace xgrad::report::presets::text
