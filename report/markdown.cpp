#include "report/markdown.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "common/escape.h"
#include "report/claims.h"
#include "report/tables.h"
#include "report/text.h"

namespace xgrad::report {
using train::format_number;

namespace fs = std::filesystem;

namespace {

std::string sig(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : format_number(v); }

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  return fmt::format("{}", fmt::join(parts, sep));
}

// `items` as a list and a blank line ("" for none): data (paths, names) as inert text, else markdown_escape'd.
std::string bullets(const std::vector<std::string>& items, bool data, const std::string& prefix = "",
                    const std::string& end = "") {
  std::string md;
  for (const auto& item : items)
    md += "- " + prefix + (data ? markdown_text(item) : markdown_escape(item)) + end + "\n";
  return md.empty() ? md : md + "\n";
}

std::string run_status(const RunRecord& run) {
  std::string s;
  if (run.diverged) s = fmt::format("diverged at step {}", run.diverged_step);
  if (run.incomplete) s += (s.empty() ? "" : "; ") + std::string("incomplete: ") + run.incomplete_reason;
  return s.empty() ? "complete" : s;
}

std::string shown_path(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  const fs::path rel = fs::proximate(dir, out_dir, ec);
  return ec || rel.empty() ? dir : rel.string();
}

// A paragraph of report.md from report/text/report.md.
std::string para(const std::string& key, const Fields& fields = {}) { return text("report", key, fields) + "\n\n"; }

std::string finding_text(const std::string& key, const Fields& fields = {}) { return text("findings", key, fields); }

// A verdict with nothing to say: a statistic neither arm has (no W_q columns), or a share of events none had.
bool says_nothing(const Verdict& v) {
  if (v.why_not == "no_value" && !std::isfinite(v.subject_value) && !std::isfinite(v.baseline_value)) return true;
  return (v.statistic == "diverged" || v.statistic.rfind("frac_zero_grad_", 0) == 0) && v.subject_value == 0 &&
         v.baseline_value == 0;
}

// "d_k=64 adamw lr=0.003, unscaled vs sqrt_dk: ": the settings a pair shares, then its two arms.
std::string pair_head(const Comparison& c, const Verdict& v) {
  const ArmStats& b = c.arms[v.baseline];
  std::vector<std::string> extra = distinguishing_keys(c.arms), omit{c.axis};
  for (const auto& own : own_settings(b.settings, c.axis))
    extra.erase(std::remove(extra.begin(), extra.end(), own), extra.end());
  extra.erase(std::remove(extra.begin(), extra.end(), c.axis), extra.end());
  if (v.statistic == "lr_sensitivity") omit.push_back("lr");
  return fmt::format("{}, {} vs {}: ", arm_label(b, extra, omit), arm_name(c, b), arm_name(c, c.arms[v.subject]));
}

std::vector<const Verdict*> telling(const std::vector<Verdict>& all) {
  std::vector<const Verdict*> out;
  for (const Verdict& v : all)
    if (!says_nothing(v)) out.push_back(&v);
  return out;
}

// The verdicts with something to say, per pair of arms in judge()'s order, better first.
auto verdicts_by_pair(const Comparison& c, const std::vector<Verdict>& all) {
  auto pairs = group_by(telling(all), [&](const Verdict* v) { return pair_head(c, *v); });
  for (auto& p : pairs)
    std::stable_sort(p.second.begin(), p.second.end(),
                     [](const Verdict* x, const Verdict* y) { return x->outcome < y->outcome; });
  return pairs;
}

std::string num(std::size_t n) { return std::to_string(n); }

// A finding says at most this many words (whitespace-separated tokens): read at a glance, its details a link away.
constexpr std::size_t kMaxWords = 40;

std::size_t words(const std::string& text) {
  std::istringstream in(text);
  return static_cast<std::size_t>(std::distance(std::istream_iterator<std::string>(in), {}));
}

// How the verdicts of one claim came out over the comparisons of two compared values.
struct Tally {
  std::size_t n = 0, valued = 0;    // valued: both arms have a value
  std::array<std::size_t, 5> of{};  // per Outcome (better, worse, same, not decided), then both solved apart
  void add(const Verdict& v) {
    ++n;
    valued += std::isfinite(v.subject_value) && std::isfinite(v.baseline_value) ? 1 : 0;
    ++of[v.why_not == "both_solved" ? 4 : static_cast<std::size_t>(v.outcome)];
  }
};

// The verdicts of one compared value against another ("sqrt_dk" against "unscaled"), tallied per claim.
struct PairTally {
  std::string subject, baseline;
  std::map<std::string, Tally> of_claim;
  std::set<std::string> spoken;  // the claims with a verdict that says something
  const Tally& operator[](const std::string& claim) const {
    static const Tally none;
    const auto it = of_claim.find(claim);
    return it == of_claim.end() ? none : it->second;
  }
};

std::vector<PairTally> tally(const Comparison& c, const std::vector<Verdict>& verdicts) {
  std::vector<PairTally> out;
  for (const Verdict& v : verdicts) {
    const std::string s = arm_name(c, c.arms[v.subject]), b = arm_name(c, c.arms[v.baseline]);
    auto it =
        std::find_if(out.begin(), out.end(), [&](const PairTally& p) { return p.subject == s && p.baseline == b; });
    if (it == out.end()) it = out.insert(out.end(), PairTally{s, b, {}, {}});
    it->of_claim[v.claim].add(v);
    if (!says_nothing(v)) it->spoken.insert(v.claim);
  }
  return out;
}

// ", as well in 2, not decided in 1": the outcomes besides better that some comparison had.
std::string tails(const std::string& claim, const Tally& t) {
  std::string out;
  for (const auto& [key, i] :
       {std::pair<std::string, int>{"same", 2}, {"worse", 1}, {"not_decided", 3}, {"both_solved", 4}})
    if (t.of[i])
      out += finding_text(has_text("findings", claim + "." + key) ? claim + "." + key : key, {{"count", num(t.of[i])}});
  return out;
}

// A finding, and when it gives way to keep to ten: rank 1 first (saturation past the third group), 2 gradient
// counts, 3 the first three groups' saturation, 4 final-loss counts; 0 never.
struct Finding {
  FindingLine line;
  int gives_way = 0;
  std::string subject = {};
};

// In how many comparisons of one pair the subject's gradient is larger: at step 0, before the threshold, overall.
std::string gradient_text(const PairTally& p) {
  const std::size_t n = std::max(p["more_gradient_w_q"].valued, p["more_gradient_w_k"].valued);
  Fields f{{"subject", p.subject}, {"baseline", p.baseline}, {"comparisons", counted(n, "comparison")}};
  for (const std::string w : {"q", "k"})  // "q_step0": more_gradient_step0_w_q, ... "k_all": more_gradient_w_k
    for (const auto& [when, infix] :
         {std::pair<std::string, std::string>{"step0", "step0_"}, {"before", "before_loss_"}, {"all", ""}}) {
      const Tally& t = p["more_gradient_" + infix + "w_" + w];
      f.emplace(w + "_" + when, num(t.of[0]) + "/" + num(t.of[1]));
    }
  std::string text = finding_text("gradient", f);
  const Tally& zero = p["fewer_zero_gradients_w_q"];
  if (p.spoken.count("fewer_zero_gradients_w_q"))
    text += finding_text("gradient_zero", {{"better", num(zero.of[0])}, {"worse", num(zero.of[1])}});
  return text + ".";
}

// "sqrt_dk trains better than unscaled in 2 of 3 comparisons, as well in 1.", linking to the glossary's `term`.
FindingLine counted_finding(const PairTally& p, const std::string& claim, const std::string& term) {
  const Tally& t = p[claim];
  const Fields f{{"subject", p.subject},
                 {"baseline", p.baseline},
                 {"comparisons", counted(t.n, "comparison")},
                 {"better", num(t.of[0])}};
  return {finding_text(claim, f) + tails(claim, t) + ".", "story", glossary_anchor(term)};
}

// Per pair of compared values: how often the subject trains better and gets more gradient; or why none is compared.
void pair_findings(const Comparison& c, const std::vector<PairTally>& tallies, std::vector<Finding>& out) {
  for (const PairTally& p : tallies) {
    if (p["trains_better"].n == 0) continue;
    out.push_back({counted_finding(p, "trains_better", "tolerance loss"), 4, p.subject});
    if (p.spoken.count("more_gradient_w_q") || p.spoken.count("more_gradient_w_k"))
      out.push_back({{gradient_text(p), "story", glossary_anchor("tolerance gradient")}, 2, p.subject});
  }
  if (!out.empty()) return;
  std::set<std::string> values;
  for (const ArmStats& arm : c.arms) values.insert(setting_text(arm.settings, c.axis));
  const auto notes = no_comparison_notes(c);
  const std::string axis = c.axis == "scale" ? "scale mode" : c.axis;
  const std::string text = values.size() == 1 ? finding_text("one_value", {{"axis", axis}, {"value", *values.begin()}})
                           : !notes.empty()   ? notes.front()
                                              : finding_text("no_pair", {{"axis", axis}});
  out.push_back({{text + ".", "story", glossary_anchor("arm")}});
}

// One scaling's cells of a saturation line, one per d_k.
struct SaturationCells {
  std::vector<std::string> entropy, saturated, grad;
  bool any_entropy = false, any_saturated = false, any_grad = false;
};
SaturationCells saturation_cells(const Comparison& c, const std::vector<const ArmStats*>& arms,
                                 const std::set<std::size_t>& d_ks) {
  SaturationCells cells;
  for (auto d : d_ks) {
    std::vector<double> entropy, saturated;
    double lo = kNoValue, hi = kNoValue;
    for (const ArmStats* arm : arms) {
      if (arm->d_k() != d) continue;
      for (auto i : arm->kept)
        if (c.stats[i]["first_measured_step"] == 0) {
          entropy.push_back(c.stats[i]["entropy_first"]);
          saturated.push_back(c.stats[i]["saturated_first"]);
        }
      const double m = arm->stat("score_grad_relative").median;
      if (std::isfinite(m)) lo = std::fmin(lo, m), hi = std::fmax(hi, m);  // fmin/fmax: NaN (none yet) gives way
    }
    const MeanSd me = mean_sd(entropy), ms = mean_sd(saturated);
    cells.any_entropy = cells.any_entropy || me.n > 0;
    cells.any_saturated = cells.any_saturated || ms.n > 0;
    cells.any_grad = cells.any_grad || std::isfinite(lo);
    cells.entropy.push_back(me.n ? format_number(me.mean, 2) : "—");
    cells.saturated.push_back(ms.n ? format_percent(ms.mean) : "—");
    cells.grad.push_back(!std::isfinite(lo) ? "—"
                         : lo == hi         ? short_number(lo)
                                            : short_number(lo) + "–" + short_number(hi));
  }
  return cells;
}

// The saturation and score-gradient lines of one group of arms, per scaling (reference first) and d_k.
void group_saturation(const Comparison& c, const std::vector<const ArmStats*>& group, const std::string& prefix,
                      int gives_way, std::vector<Finding>& out) {
  std::set<std::size_t> d_ks;
  for (const ArmStats* arm : group) d_ks.insert(arm->d_k());
  std::vector<std::string> entropy, saturated, grad;
  bool any_saturated = false;
  for (const auto& [s, arms] : group_by(group, [](const ArmStats* arm) { return arm->scale(); })) {
    const SaturationCells cells = saturation_cells(c, arms, d_ks);
    any_saturated = any_saturated || cells.any_saturated;
    const std::string name = is_reference_scale(s) ? "unscaled " : s + " ";
    if (cells.any_entropy) {
      entropy.push_back(name + join(cells.entropy, "/"));
      saturated.push_back(name + join(cells.saturated, "/"));
    }
    if (cells.any_grad) grad.push_back(name + join(cells.grad, "/"));
  }
  const Fields at{{"prefix", prefix}, {"d_ks", fmt::format("{}", fmt::join(d_ks, "/"))}};
  // The numbers are in the arm table; the summary figures draw entropy and saturation against d_k when there are two.
  // The score gradient's figure draws it over all steps, not relative to the loss: its numbers are the table's.
  const std::string where = d_ks.size() >= 2 ? "summary-figures" : "results";
  if (!entropy.empty()) {
    Fields f = at;
    f.emplace("values", join(entropy, ", "));
    std::string text = finding_text("saturation", f);
    const std::string tail = finding_text("saturated", {{"values", join(saturated, ", ")}});
    const bool fits = words(text + tail) < kMaxWords;
    if (any_saturated && fits) text += tail;
    out.push_back({{text + ".", where, glossary_anchor("entropy_first")}, gives_way});
    f.at("values") = join(saturated, ", ");
    if (any_saturated && !fits)
      out.push_back({{finding_text("saturated_line", f) + ".", where, glossary_anchor("saturated_first")}, gives_way});
  }
  if (!grad.empty()) {
    Fields f = at;
    f.emplace("values", join(grad, ", "));
    out.push_back(
        {{finding_text("score_gradient", f) + ".", "results", glossary_anchor("score_grad_relative")}, gives_way});
  }
}

// Saturation and score gradient per group of arms alike but in scale, d_k, optimizer and lr: a number pooled over
// tasks would appear nowhere below (the gradient line gives a range over optimizers and lrs).
void saturation_findings(const Comparison& c, std::vector<Finding>& out) {
  const auto group_keys = distinguishing_keys(c.arms);
  const auto groups = group_by(arm_pointers(c), [&](const ArmStats* arm) {
    std::string label;
    for (const auto& k : group_keys)  // a setting the arm does not read (qk_norm_scale without qk_norm) is left out
      if (arm->settings.contains(k)) label += (label.empty() ? "" : " ") + k + "=" + setting_text(arm->settings, k);
    return label;
  });
  for (std::size_t gi = 0; gi < groups.size(); ++gi)
    group_saturation(c, groups[gi].second, groups[gi].first.empty() ? "" : groups[gi].first + ": ", gi < 3 ? 3 : 1,
                     out);
}

Finding runs_finding(const Comparison& c) {
  std::size_t diverged = 0, incomplete = 0;
  for (const auto& run : c.runs) diverged += run.diverged ? 1 : 0, incomplete += run.incomplete ? 1 : 0;
  const Fields f{{"diverged", num(diverged)}, {"runs", counted(c.runs.size(), "run")}};
  std::string text = finding_text(diverged ? "runs_diverged" : "runs_none_diverged", f);
  if (incomplete) text += finding_text("runs_incomplete", {{"count", num(incomplete)}});
  return {{text + ".", "runs-read", glossary_anchor("diverged run")}};
}

// Ten findings at most, none dropped silently: per section they link to, one line says what was left out.
std::vector<FindingLine> at_most_ten(const std::vector<Finding>& all) {
  constexpr std::size_t kMax = 10;
  std::vector<Finding> kept = all;
  std::map<std::string, std::vector<Finding>> dropped;  // by the section they link to
  // The lines left out take a line per section they link to: tried with one, again with two if they link to two.
  for (std::size_t reserve = 1; all.size() > kMax && (reserve == 1 || dropped.size() >= reserve); ++reserve) {
    kept = all;
    dropped.clear();
    for (int rank = 1; rank <= 4; ++rank)
      for (std::size_t i = kept.size(); i-- > 0 && kept.size() + reserve > kMax;)
        if (kept[i].gives_way == rank) {
          dropped[kept[i].line.anchor].insert(dropped[kept[i].line.anchor].begin(), kept[i]);
          kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
        }
  }
  std::vector<FindingLine> out;
  for (Finding& f : kept) out.push_back(std::move(f.line));
  for (const auto& [anchor, left_out] : dropped) {
    std::vector<std::string> trains_out, what;
    std::set<int> ranks;
    for (const Finding& f : left_out) {
      ranks.insert(f.gives_way);
      if (f.gives_way == 4) trains_out.push_back(f.subject);
    }
    if (!trains_out.empty()) what.push_back(finding_text("left_out_trains", {{"names", join(trains_out, ", ")}}));
    if (ranks.count(2)) what.push_back(finding_text("left_out_gradient"));
    if (ranks.count(1) || ranks.count(3)) what.push_back(finding_text("left_out_saturation"));
    out.insert(
        out.end() - 1,
        {finding_text("left_out", {{"findings", counted(left_out.size(), "finding")}, {"what", join(what, "; ")}}) +
             ".",
         anchor, glossary_anchor("arm")});
  }
  return out;
}

// A relative path as a link target, percent-encoded (RFC 3986): a space or parenthesis cannot end the link.
std::string url_path(const std::string& path) {
  std::string out;
  for (const unsigned char ch : path)
    out += std::isalnum(ch) || std::string_view("-._~/").find(static_cast<char>(ch)) != std::string_view::npos
               ? std::string(1, static_cast<char>(ch))
               : fmt::format("%{:02X}", ch);
  return out;
}

// A figure's image and links to its SVG and script; the title (data) cannot end the alt text or start a link.
std::string figure_image(const std::string& title, const std::string& name) {
  std::string alt;
  for (const char ch : title) {
    if (ch == '[' || ch == ']' || ch == '\\') alt += '\\';
    alt += ch;
  }
  const std::string target = "plots/" + url_path(name);
  return fmt::format("![{}]({}.png)\n\n([SVG]({}.svg), script {}.gp)\n\n", markdown_escape(alt), target, target,
                     target);
}

// "0.208 ± 0.048" (sd bars) or "7.1e-07 [5.2e-14, 4.2e-06]" (min-max bars).
std::string point_text(const SummaryPoint& p, bool theory, bool sd) {
  if (!std::isfinite(p.y)) return p.n_diverged ? "diverged" : "—";
  std::string out = sig(p.y);
  if (!theory && std::isfinite(p.lo) && std::isfinite(p.hi) && p.lo != p.hi)
    out += sd ? " ± " + sig(p.hi - p.y) : " [" + sig(p.lo) + ", " + sig(p.hi) + "]";
  if (!theory && p.n_diverged) out += fmt::format(" ({} diverged)", p.n_diverged);
  return out;
}

// A figure's numbers: a row per line, a column per x.
Table points_table(const SummaryFigure& f) {
  std::vector<double> xs;
  for (const SummaryLine& line : f.lines)
    for (const SummaryPoint& p : line.points)
      if (std::find(xs.begin(), xs.end(), p.x) == xs.end()) xs.push_back(p.x);
  std::sort(xs.begin(), xs.end());
  Table t;
  t.header = {f.name.find("_vs_lr") != std::string::npos    ? "line \\ lr"
              : f.name.find("_vs_d_k") != std::string::npos ? "line \\ d_k"
                                                            : "line \\ " + f.x_label};
  for (double x : xs) t.header.push_back(fmt::format("{:g}", x));
  for (const SummaryLine& line : f.lines) {
    std::vector<std::string> row{line.label};
    for (double x : xs) {
      const auto it =
          std::find_if(line.points.begin(), line.points.end(), [&](const SummaryPoint& p) { return p.x == x; });
      row.push_back(it == line.points.end() ? "" : point_text(*it, line.theory, f.error_bar_sd));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

// One figure with its numbers as a table, so a reader has them even without gnuplot.
std::string figure_markdown(const SummaryFigure& f, const ReportContext& ctx) {
  std::string md = "### " + markdown_escape(f.title) + "\n\n";
  const bool drawn = std::any_of(ctx.plots.summary_drawn.begin(), ctx.plots.summary_drawn.end(),
                                 [&](const PlotFigure& p) { return p.name == f.name; });
  if (drawn) md += figure_image(f.title, f.name);
  md += f.caption + ".\n\n" + (f.tabulate ? points_table(f).markdown() + "\n" : "");
  return md + bullets(f.notes, true, "Note: ", ".");
}

std::string summary_section(const ReportContext& ctx) {
  std::string md = "<a id=\"summary-figures\"></a>\n\n## Summary figures\n\n";
  if (ctx.summary.empty()) return md + para("no_summary_figure");
  for (const SummaryFigure& f : ctx.summary) md += figure_markdown(f, ctx);
  return md;
}

std::string runs_summary(const Comparison& c, const ReportContext& ctx) {
  std::size_t diverged = 0, incomplete = 0;
  for (const auto& run : c.runs) diverged += run.diverged ? 1 : 0, incomplete += run.incomplete ? 1 : 0;
  std::string md = para("runs_read", {{"runs", counted(c.runs.size(), "run")},
                                      {"arms", counted(c.arms.size(), "arm")},
                                      {"complete", c.runs.size() - incomplete},
                                      {"incomplete", incomplete},
                                      {"diverged", diverged}});
  for (const Note& note : ctx.sweep_notes) {
    md += "**Note:** " + markdown_escape(note.text) + ".\n\n";
    if (note.items.empty()) continue;
    md += fmt::format("<details><summary>list ({})</summary>\n\n", note.items.size());
    md += bullets(note.items, true) + "</details>\n\n";
  }
  if (!ctx.explain_page.empty())
    md += para("explain_link", {{"page", markdown_escape(ctx.explain_page)}, {"url", url_path(ctx.explain_page)}});
  return md;
}

std::string preset_part(const ReportContext& ctx) {
  std::string md;
  if (!ctx.preset.name.empty())
    md += para(!ctx.preset_sections.empty() ? "preset_first"
               : ctx.preset_note.empty()    ? "preset_alone"
                                            : "preset",
               {{"name", ctx.preset.name}, {"quick", ctx.preset.quick ? text("report", "preset_quick") : ""}});
  if (!ctx.preset_note.empty()) md += "**Note:** " + markdown_escape(ctx.preset_note) + ".\n\n";
  for (const PresetSection& section : ctx.preset_sections) {
    md += "<a id=\"" + section.anchor + "\"></a>\n\n## " + section.title + "\n\n";
    for (const SummaryFigure& f : section.figures) md += figure_markdown(f, ctx);
    md += section.markdown;
    if (!section.markdown.empty() && section.markdown.back() != '\n') md += "\n";
    md += "\n";
  }
  return md;
}

std::string findings_section(const Comparison& c, const std::vector<Verdict>& verdicts) {
  std::string md = "## Findings\n\n";
  for (const FindingLine& f : findings(c, verdicts))
    md += "- " + markdown_text(f.text) + " ([rule](#" + f.glossary + "), [details](#" + f.anchor + "))\n";
  return md + "\n" + finding_text("glossary_link") + "\n\n";
}

std::string glossary_text(const std::string& key, const Fields& fields = {}) { return text("glossary", key, fields); }

std::string glossary_entry(const std::string& term, const std::string& definition) {
  return "- <a id=\"" + glossary_anchor(term) + "\"></a>**" + markdown_text(term) + "**: " + definition + "\n";
}

// The loss thresholds of the arms: as given, or per task half its chance loss.
std::string loss_thresholds(const Comparison& c, const ReportContext& ctx) {
  std::set<std::string> thresholds;
  for (const ArmStats& arm : c.arms)
    thresholds.insert(ctx.loss_threshold_option >= 0
                          ? glossary_text("loss_threshold_given", {{"value", format_number(arm.loss_threshold)}})
                          : glossary_text("loss_threshold_task", {{"value", format_number(arm.loss_threshold)},
                                                                  {"task", setting_text(arm.settings, "task")}}));
  return join(std::vector<std::string>(thresholds.begin(), thresholds.end()), ", ");
}

// One definition per term, statistic and tolerance, each with the anchor the findings and table headers link to.
std::string glossary_section(const Comparison& c, const ReportContext& ctx) {
  std::string md = "<a id=\"glossary\"></a>\n\n## Glossary\n\n";
  const Fields fields{{"window", num(c.window)},
                      {"loss_thresholds", loss_thresholds(c, ctx)},
                      {"diverged_factor", fmt::format("{:g}", train::kDivergedLossFactor)},
                      {"accuracy", fmt::format("{:g}", c.accuracy_threshold)},
                      {"solved_loss", fmt::format("{:g}", kSolvedLoss)}};
  for (const TextLine& l : text_lines("glossary"))
    if (l.section == "Terms") md += glossary_entry(l.key, fill(l.text, fields));
  md += "\n### " + glossary_text("statistics") + "\n\n";
  for (const Statistic& s : statistics())
    md += glossary_entry(statistic_name(s.name, "w"),
                         fill(s.description, {{"w", glossary_text("weight")}, {"large_logit", kLargeLogit}}));
  md += "\n### " + glossary_text("tolerances") + "\n\n";
  for (const Tolerance& t : tolerances()) {
    const Fields f{{"relative", fmt::format("{:g}%", 100 * t.relative)},
                   {"absolute", t.absolute > 0 ? glossary_text("tolerance_absolute",
                                                               {{"absolute", fmt::format("{:g}", t.absolute)}})
                                               : std::string()},
                   {"seed_sd", t.seed_sd ? glossary_text("tolerance_seed_sd") : std::string()},
                   {"reason", t.reason}};
    md += glossary_entry("tolerance " + t.name, glossary_text("tolerance", f));
  }
  return md + "\n";
}

// The table of arms, the summary figures, duplicate seeds and the LR sensitivity table.
std::string results_section(const Comparison& c, const ReportContext& ctx) {
  std::string md = "<a id=\"results\"></a>\n\n## Results by arm\n\n" + arm_table(c).markdown() + "\n";
  md += summary_section(ctx);
  const auto duplicates = duplicate_seed_warnings(c, ctx.out_dir, true);
  if (!duplicates.empty()) md += para("duplicate_seeds") + bullets(duplicates, false);
  const Table lr = lr_table(c);
  if (!lr.rows.empty())
    md += "<a id=\"lr-sensitivity\"></a>\n\n### Learning-rate sensitivity\n\n" + lr.markdown() + "\n";

  return md;
}

std::string scale_modes_section(const Comparison& c) {
  const auto unpaired = no_comparison_notes(c);
  if (unpaired.empty()) return "";
  std::string md = "<a id=\"scale-modes\"></a>\n\n## Arms without a comparison\n\n";
  return md + bullets(unpaired, false, "", ".");
}

// Per claim and subject, how many comparisons came out better, worse, the same and not decided.
Table claims_table(const Comparison& c, const std::vector<Verdict>& verdicts) {
  Table t;
  t.plain_cells = true;
  t.header = {"claim", c.axis, "better", "worse", "same", "not decided"};
  for (const auto& [key, list] : group_by(telling(verdicts), [&](const Verdict* v) {
         return std::make_pair(claim_label(*v), arm_name(c, c.arms[v->subject]));
       })) {
    std::array<std::size_t, 4> n{};
    for (const Verdict* v : list) ++n[static_cast<std::size_t>(v->outcome)];
    t.rows.push_back({key.first, key.second, num(n[0]), num(n[1]), num(n[2]), num(n[3])});
  }
  return t;
}

std::string story_section(const Comparison& c, const std::vector<Verdict>& verdicts) {
  const std::string baseline = baseline_of(c);
  // The baseline is judged against only where an arm holds it; elsewhere every two values are.
  const bool held = std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) {
    return setting_text(c.arms[v.baseline].settings, c.axis) == baseline;
  });
  std::string md =
      "<a id=\"story\"></a>\n\n## Claims " +
      (held ? "against " + markdown_text(escape_name(c.axis == "scale" ? baseline : c.axis + "=" + baseline))
            : "of each " + c.axis + " against the others") +
      "\n\n";
  if (held && c.axis == "scale" && is_reference_scale(baseline)) md += para("usual_story");
  const Table table = claims_table(c, verdicts);
  const Fields axis{{"axis", markdown_name(c.axis)}};
  if (table.rows.empty()) return md + para("no_claim", axis);
  md += para("claims_counted", axis) + table.markdown() + "\n<details><summary>" + text("report", "every_verdict") +
        "</summary>\n\n";
  for (const auto& [head, list] : verdicts_by_pair(c, verdicts)) {
    md += "- " + markdown_text(head.substr(0, head.size() - 2)) + ":\n";
    for (const Verdict* v : list) md += "  - " + markdown_text(verdict_sentence(c, *v)) + "\n";
  }
  md += "\n</details>\n\n";
  bool single_seed = false;
  for (const ArmStats& arm : c.arms) single_seed = single_seed || arm.n_seeds < 2;
  if (single_seed) md += para("single_seed");
  return md;
}

std::string plots_section(const ReportContext& ctx) {
  std::string md = "## Plots\n\n";
  if (!ctx.plots_requested) md += para("no_plots");
  if (!ctx.plots.note.empty()) md += "Note: " + ctx.plots.note + "\n\n";
  for (const auto& fig : ctx.plots.drawn)
    md += fmt::format("### {}\n\n{}.\n\n", fig.name, fig.caption) + figure_image(fig.name, fig.name);
  return md;
}

// Every run read, its arm and status, and the directories that could not be read.
std::string runs_read_section(const Comparison& c, const ReportContext& ctx) {
  std::string md = "<a id=\"runs-read\"></a>\n\n## Runs read\n\n";
  Table runs;
  runs.header = {"run", "arm", "seed", "steps", "status"};
  const auto extra = distinguishing_keys(c.arms);
  std::map<std::size_t, const ArmStats*> arm_of_run;
  for (const ArmStats& arm : c.arms)
    for (auto i : arm.runs) arm_of_run[i] = &arm;
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const RunRecord& run = c.runs[i];
    runs.rows.push_back({markdown_name(shown_path(run.dir, ctx.out_dir)),
                         markdown_name(arm_label(*arm_of_run[i], extra)), setting_text(run.config, "seed"),
                         fmt::format("{}/{}", run.series.size(), run.steps_planned), run_status(run)});
  }
  md += runs.markdown() + "\n";
  return md + (ctx.skipped.empty() ? "" : "Skipped (unreadable):\n\n" + bullets(ctx.skipped, true));
}

}  // namespace

std::vector<std::string> no_comparison_notes(const Comparison& c) {
  const std::vector<UnpairedArm> unpaired = unpaired_arms(c, c.axis);
  if (unpaired.empty()) return {};
  if (arm_pairs(c, c.axis, "").empty()) {
    std::set<std::string> all;
    for (const auto& u : unpaired) all.insert(u.differs_in.begin(), u.differs_in.end());
    std::vector<std::string> ordered = in_setting_order(c.arms, all);
    if (ordered.size() < all.size()) ordered.assign(all.begin(), all.end());  // chance_loss is in no table's order
    return {finding_text("no_comparison", {{"axis", c.axis}, {"settings", join(ordered, ", ")}})};
  }
  const auto extra = distinguishing_keys(c.arms);
  std::vector<std::string> out;
  for (const auto& u : unpaired)
    out.push_back(finding_text(
        "no_comparison_for",
        {{"axis", c.axis}, {"arm", arm_label(c.arms[u.arm], extra)}, {"settings", join(u.differs_in, ", ")}}));
  return out;
}

StoryChecks story_checks(const Comparison& c, const std::vector<Verdict>& all) {
  StoryChecks checks;
  std::vector<std::string>* lists[] = {&checks.holds, &checks.fails, &checks.undecided};
  for (const auto& [head, verdicts] : verdicts_by_pair(c, all)) {
    std::map<int, std::vector<std::string>> kinds;  // index into lists
    const int kind_of[] = {0, 1, 1, 2};             // per Outcome: better holds, not decided is undecided
    for (const Verdict* v : verdicts) kinds[kind_of[static_cast<int>(v->outcome)]].push_back(verdict_sentence(c, *v));
    for (const auto& [kind, sentences] : kinds) lists[kind]->push_back(head + join(sentences, "; ") + ".");
  }
  return checks;
}

std::vector<FindingLine> findings(const Comparison& c, const std::vector<Verdict>& verdicts) {
  if (c.runs.empty()) return {};
  std::vector<Finding> out;
  const std::vector<PairTally> tallies = tally(c, verdicts);
  pair_findings(c, tallies, out);
  saturation_findings(c, out);
  for (const PairTally& p : tallies)
    if (p["less_lr_sensitive"].n) out.push_back({counted_finding(p, "less_lr_sensitive", "LR sensitivity")});
  out.push_back(runs_finding(c));
  return at_most_ten(std::move(out));
}

std::vector<std::string> duplicate_seed_warnings(const Comparison& c, const std::string& relative_to,
                                                 bool for_markdown) {
  std::vector<std::string> out;
  const auto extra = distinguishing_keys(c.arms);
  const auto name = [&](const std::string& text) { return for_markdown ? markdown_name(text) : escape_name(text); };
  for (const ArmStats& arm : c.arms)
    for (const auto& group : arm.duplicate_seeds) {
      std::vector<std::string> dirs;
      for (auto i : group)
        dirs.push_back(name(relative_to.empty() ? c.runs[i].dir : shown_path(c.runs[i].dir, relative_to)));
      const nlohmann::json& config = c.runs[group.front()].config;
      out.push_back(text("report", "duplicate_seed",
                         {{"arm", name(arm_label(arm, extra))},
                          {"seed", name(setting_text(config, "seed"))},
                          {"data_seed", name(setting_text(config, "data_seed"))},
                          {"runs", counted(group.size(), "run")},
                          {"dirs", join(dirs, ", ")}}));
    }
  return out;
}

std::string Note::line() const {
  constexpr std::size_t kShown = 5;
  std::string listed;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) listed += (i ? ", " : ": ") + items[i];
  if (items.size() > kShown) listed += fmt::format(" and {} more", items.size() - kShown);
  return text + listed;
}

std::vector<Verdict> report_verdicts(const Comparison& c, const ReportContext& context) {
  return context.verdicts ? *context.verdicts : judge(c, c.axis, baseline_of(c));
}

std::string report_markdown(const Comparison& c, const ReportContext& ctx) {
  const std::vector<Verdict> verdicts = report_verdicts(c, ctx);
  return "# xgrad compare: attention scaling report\n\n" + runs_summary(c, ctx) + preset_part(ctx) +
         findings_section(c, verdicts) + results_section(c, ctx) + scale_modes_section(c) + story_section(c, verdicts) +
         plots_section(ctx) + runs_read_section(c, ctx) + glossary_section(c, ctx);
}

}  // namespace xgrad::report
