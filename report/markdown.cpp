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

// `items` as a list and a blank line ("" for none), each shown as text: they hold names and paths.
std::string bullets(const std::vector<std::string>& items, const std::string& prefix = "",
                    const std::string& end = "") {
  std::string md;
  for (const auto& item : items) md += "- " + prefix + markdown_text(item) + end + "\n";
  return md.empty() ? md : md + "\n";
}

std::string shown_path(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  const fs::path rel = fs::proximate(dir, out_dir, ec);
  return ec || rel.empty() ? dir : rel.string();
}

// report/text/report.md's `key`, its text fields (names, paths) shown as text: markup is the template's, never theirs.
std::string report_text(const std::string& key, Fields fields) {
  for (auto& field : fields)
    if (auto* value = std::get_if<std::string>(&field.second.value)) *value = markdown_text(escape_name(*value));
  return text("report", key, fields);
}

std::string para(const std::string& key, const Fields& fields = {}) { return report_text(key, fields) + "\n\n"; }

std::string heading(const std::string& key, const Fields& fields = {}) { return report_text("heading_" + key, fields); }

std::string finding_text(const std::string& key, const Fields& fields = {}) { return text("findings", key, fields); }

std::string details(const std::string& summary, const std::string& body) {
  return "<details><summary>" + summary + "</summary>\n\n" + body + "</details>\n\n";
}

// A note of compare as a paragraph, what it lists behind a disclosure.
std::string note_markdown(const Note& note) {
  const std::string md = "**Note:** " + markdown_text(note.text) + ".\n\n";
  return note.items.empty() ? md : md + details(fmt::format("list ({})", note.items.size()), bullets(note.items));
}

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

// A finding says at most this many words (whitespace-separated tokens): read at a glance, its details a link away.
constexpr std::size_t kMaxWords = 40;

std::size_t words(const std::string& text) {
  std::istringstream in(text);
  return static_cast<std::size_t>(std::distance(std::istream_iterator<std::string>(in), {}));
}

// The verdicts of one compared value against another ("sqrt_dk" against "unscaled"): their names, its verdicts.
using Pair = std::pair<std::pair<std::string, std::string>, std::vector<Verdict>>;

std::vector<Pair> pairs(const Comparison& c, const std::vector<Verdict>& verdicts) {
  return group_by(verdicts, [&](const Verdict& v) {
    return std::make_pair(arm_name(c, c.arms[v.subject]), arm_name(c, c.arms[v.baseline]));
  });
}

// How the verdicts of one claim came out over the comparisons of a pair.
struct ClaimCount {
  std::size_t n = 0, valued = 0;    // valued: both arms have a value
  std::array<std::size_t, 5> of{};  // per Outcome (better, worse, same, not decided), then both solved apart
  bool spoken = false;              // some verdict says something (says_nothing)
  ClaimCount(const Pair& p, const std::string& claim) {
    for (const Verdict& v : p.second) {
      if (v.claim != claim) continue;
      ++n;
      valued += std::isfinite(v.subject_value) && std::isfinite(v.baseline_value) ? 1 : 0;
      ++of[v.why_not == "both_solved" ? 4 : static_cast<std::size_t>(v.outcome)];
      spoken = spoken || !says_nothing(v);
    }
  }
};

// A finding, and when it gives way to keep to ten: rank 1 first (saturation past the third group), 2 gradient
// counts, 3 the first three groups' saturation, 4 final-loss counts; 0 never.
struct Finding {
  FindingLine line;
  int gives_way = 0;
  std::string subject = {};
};

// In how many comparisons of one pair the subject's gradient is larger: at step 0, before the threshold, overall.
std::string gradient_text(const Pair& p) {
  const std::size_t n = std::max(ClaimCount(p, "more_gradient_w_q").valued, ClaimCount(p, "more_gradient_w_k").valued);
  Fields f{{"subject", p.first.first}, {"baseline", p.first.second}, {"comparisons", counted(n, "comparison")}};
  for (const std::string w : {"q", "k"})  // "q_step0": more_gradient_step0_w_q, ... "k_all": more_gradient_w_k
    for (const auto& [when, infix] :
         {std::pair<std::string, std::string>{"step0", "step0_"}, {"before", "before_loss_"}, {"all", ""}}) {
      const ClaimCount t(p, "more_gradient_" + infix + "w_" + w);
      f.emplace(w + "_" + when, fmt::format("{}/{}", t.of[0], t.of[1]));
    }
  const ClaimCount zero(p, "fewer_zero_gradients_w_q");
  const std::string tail =
      zero.spoken ? finding_text("gradient_zero", {{"better", zero.of[0]}, {"worse", zero.of[1]}}) : "";
  return finding_text("gradient", f) + tail + ".";
}

// "sqrt_dk trains better than unscaled in 2 of 3 comparisons, as well in 1.", linking to the glossary's `term`;
// each outcome besides better that some comparison had is a tail, worded for the claim.
FindingLine counted_finding(const Pair& p, const std::string& claim, const std::string& term) {
  const ClaimCount t(p, claim);
  std::string text = finding_text(claim, {{"subject", p.first.first},
                                          {"baseline", p.first.second},
                                          {"comparisons", counted(t.n, "comparison")},
                                          {"better", t.of[0]}});
  for (const auto& [key, i] :
       {std::pair<std::string, int>{"same", 2}, {"worse", 1}, {"not_decided", 3}, {"both_solved", 4}})
    if (t.of[i]) text += finding_text(claim + "." + key, {{"count", t.of[i]}});
  return {text + ".", "story", glossary_anchor(term)};
}

// Per pair of compared values: how often the subject trains better and gets more gradient; or why none is compared.
void pair_findings(const Comparison& c, const std::vector<Pair>& tallies, std::vector<Finding>& out) {
  for (const Pair& p : tallies) {
    if (ClaimCount(p, "trains_better").n == 0) continue;
    out.push_back({counted_finding(p, "trains_better", "tolerance loss"), 4, p.first.first});
    if (ClaimCount(p, "more_gradient_w_q").spoken || ClaimCount(p, "more_gradient_w_k").spoken)
      out.push_back({{gradient_text(p), "story", glossary_anchor("tolerance gradient")}, 2, p.first.first});
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

// The saturation and score-gradient findings of one group of arms: per scaling (reference first) its values per d_k.
void group_saturation(const Comparison& c, const std::vector<const ArmStats*>& group, const std::string& prefix,
                      int gives_way, std::vector<Finding>& out) {
  std::set<std::size_t> d_ks;
  for (const ArmStats* arm : group) d_ks.insert(arm->d_k());
  std::array<std::vector<std::string>, 3> values;  // entropy, saturated, score gradient: "unscaled 0.68/0.12", ...
  bool any_saturated = false;
  for (const auto& [s, arms] : group_by(group, [](const ArmStats* arm) { return arm->scale(); })) {
    std::array<std::vector<std::string>, 3> cells;  // per d_k
    std::array<bool, 3> any{};
    for (auto d : d_ks) {
      std::array<std::vector<double>, 2> first;  // entropy_first, saturated_first of the runs measured at step 0
      double lo = kNoValue, hi = kNoValue;
      for (const ArmStats* arm : arms) {
        if (arm->d_k() != d) continue;
        for (auto i : arm->kept)
          if (c.stats[i]["first_measured_step"] == 0)
            first[0].push_back(c.stats[i]["entropy_first"]), first[1].push_back(c.stats[i]["saturated_first"]);
        const double m = arm->stat("score_grad_relative").median;
        if (std::isfinite(m)) lo = std::fmin(lo, m), hi = std::fmax(hi, m);  // fmin/fmax: NaN (none yet) gives way
      }
      const MeanSd me = mean_sd(first[0]), ms = mean_sd(first[1]);
      any = {any[0] || me.n > 0, any[1] || ms.n > 0, any[2] || std::isfinite(lo)};
      cells[0].push_back(me.n ? format_number(me.mean, 2) : "—");
      cells[1].push_back(ms.n ? format_percent(ms.mean) : "—");
      cells[2].push_back(!std::isfinite(lo) ? "—"
                         : lo == hi         ? short_number(lo)
                                            : short_number(lo) + "–" + short_number(hi));
    }
    any_saturated = any_saturated || any[1];
    const std::string name = is_reference_scale(s) ? "unscaled " : s + " ";
    for (std::size_t k = 0; k < 3; ++k)  // entropy and saturation shown together, where entropy was measured
      if (any[k == 1 ? 0 : k]) values[k].push_back(name + join(cells[k], "/"));
  }
  Fields f{{"prefix", prefix}, {"d_ks", fmt::format("{}", fmt::join(d_ks, "/"))}, {"values", join(values[0], ", ")}};
  // The numbers are in the arm table; the summary figures draw entropy and saturation against d_k when there are two.
  // The score gradient's figure draws it over all steps, not relative to the loss: its numbers are the table's.
  const std::string where = d_ks.size() >= 2 ? "summary-figures" : "results";
  if (!values[0].empty()) {
    std::string text = finding_text("saturation", f);
    const std::string tail = finding_text("saturated", {{"values", join(values[1], ", ")}});
    const bool fits = words(text + tail) < kMaxWords;
    if (any_saturated && fits) text += tail;
    out.push_back({{text + ".", where, glossary_anchor("entropy_first")}, gives_way});
    f.at("values") = join(values[1], ", ");
    if (any_saturated && !fits)
      out.push_back({{finding_text("saturated_line", f) + ".", where, glossary_anchor("saturated_first")}, gives_way});
  }
  f.at("values") = join(values[2], ", ");
  if (!values[2].empty())
    out.push_back(
        {{finding_text("score_gradient", f) + ".", "results", glossary_anchor("score_grad_relative")}, gives_way});
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

// The runs counted for report.md's first line and its runs finding.
Fields run_counts(const Comparison& c) {
  std::size_t diverged = 0, incomplete = 0;
  for (const auto& run : c.runs) diverged += run.diverged ? 1 : 0, incomplete += run.incomplete ? 1 : 0;
  return {{"runs", counted(c.runs.size(), "run")},
          {"arms", counted(c.arms.size(), "arm")},
          {"complete", c.runs.size() - incomplete},
          {"incomplete", incomplete},
          {"diverged", diverged}};
}

Finding runs_finding(const Comparison& c) {
  const Fields f = run_counts(c);
  const auto n = [&f](const char* key) { return std::get<long long>(f.at(key).value); };
  std::string text = finding_text(n("diverged") ? "runs_diverged" : "runs_none_diverged", f);
  if (n("incomplete")) text += finding_text("runs_incomplete", f);
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
    const Fields f{{"findings", counted(left_out.size(), "finding")}, {"what", join(what, "; ")}};
    out.insert(out.end() - 1, {finding_text("left_out", f) + ".", anchor, glossary_anchor("arm")});
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
    std::vector<std::string> row{markdown_text(line.label, true)};  // a label names settings: data
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
  std::string md = "### " + markdown_text(f.title) + "\n\n";  // a preset's title may name a line
  const bool drawn = std::any_of(ctx.plots.summary_drawn.begin(), ctx.plots.summary_drawn.end(),
                                 [&](const PlotFigure& p) { return p.name == f.name; });
  if (drawn) md += figure_image(f.title, f.name);
  md += f.caption + ".\n\n" + (f.tabulate ? points_table(f).markdown() + "\n" : "");
  return md + bullets(f.notes, "Note: ", ".");
}

std::string figures_markdown(const std::vector<SummaryFigure>& figures, const ReportContext& ctx) {
  std::string md;
  for (const SummaryFigure& f : figures) md += figure_markdown(f, ctx);
  return md;
}

// The runs and arms read, the sweeps' notes, the explain page and the preset.
std::string intro_markdown(const Comparison& c, const ReportContext& ctx) {
  std::string md = para("runs_read", run_counts(c));
  for (const Note& note : ctx.sweep_notes) md += note_markdown(note);
  if (!ctx.explain_page.empty())
    md += para("explain_link", {{"page", ctx.explain_page}, {"url", url_path(ctx.explain_page)}});
  if (!ctx.preset.name.empty())
    md += para(!ctx.preset_sections.empty() ? "preset_first"
               : ctx.preset_note.empty()    ? "preset_alone"
                                            : "preset",
               {{"name", ctx.preset.name}, {"quick", ctx.preset.quick ? text("report", "preset_quick") : ""}});
  return md + (ctx.preset_note.empty() ? "" : note_markdown({ctx.preset_note}));
}

std::string findings_markdown(const Comparison& c, const std::vector<Verdict>& verdicts) {
  std::string md;
  for (const FindingLine& f : findings(c, verdicts))
    md += "- " + markdown_text(f.text) + " ([rule](#" + f.glossary + "), [details](#" + f.anchor + "))\n";
  return md + "\n" + finding_text("glossary_link") + "\n\n";
}

std::string glossary_text(const std::string& key, const Fields& fields = {}) { return text("glossary", key, fields); }

std::string glossary_entry(const std::string& term, const std::string& definition) {
  return "- <a id=\"" + glossary_anchor(term) + "\"></a>**" + markdown_text(term) + "**: " + definition + "\n";
}

// The glossary's terms: the loss thresholds of the arms as given, or per task half its chance loss.
std::string glossary_terms(const Comparison& c, const ReportContext& ctx) {
  std::set<std::string> thresholds;
  for (const ArmStats& arm : c.arms)
    thresholds.insert(
        glossary_text(ctx.loss_threshold_option >= 0 ? "loss_threshold_given" : "loss_threshold_task",
                      {{"value", format_number(arm.loss_threshold)}, {"task", setting_text(arm.settings, "task")}}));
  const Fields fields{{"window", c.window},
                      {"loss_thresholds", join({thresholds.begin(), thresholds.end()}, ", ")},
                      {"diverged_factor", fmt::format("{:g}", train::kDivergedLossFactor)},
                      {"accuracy", fmt::format("{:g}", c.accuracy_threshold)},
                      {"solved_loss", fmt::format("{:g}", kSolvedLoss)}};
  std::string md;
  for (const TextLine& l : text_lines("glossary"))
    if (l.section == "Terms") md += glossary_entry(l.key, fill(l.text, fields));
  return md + "\n";
}

std::string glossary_statistics() {
  std::string md;
  for (const Statistic& s : statistics())
    md += glossary_entry(statistic_name(s.name, "w"),
                         fill(s.description, {{"w", glossary_text("weight")}, {"large_logit", kLargeLogit}}));
  return md + "\n";
}

std::string glossary_tolerances() {
  std::string md;
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

// Per claim and subject, how many comparisons came out better, worse, the same and not decided.
Table claims_table(const Comparison& c, const std::vector<Verdict>& verdicts) {
  using Group = std::pair<std::pair<std::string, std::string>, std::vector<const Verdict*>>;
  std::vector<Column<Group>> columns{{"claim", "", [](const Group& g) { return g.first.first; }},
                                     {c.axis, "", [](const Group& g) { return g.first.second; }}};
  for (const Outcome o : {Outcome::better, Outcome::worse, Outcome::same, Outcome::not_decided})
    columns.push_back({outcome_name(o), outcome_name(o), [o](const Group& g) {
                         return std::to_string(std::count_if(g.second.begin(), g.second.end(),
                                                             [o](const Verdict* v) { return v->outcome == o; }));
                       }});
  return column_table(
      group_by(telling(verdicts),
               [&](const Verdict* v) { return std::make_pair(claim_label(*v), arm_name(c, c.arms[v->subject])); }),
      columns);
}

// The claims counted per subject, every verdict behind a disclosure.
std::string story_markdown(const Comparison& c, const std::vector<Verdict>& verdicts, bool held) {
  std::string md = held && c.axis == "scale" && is_reference_scale(baseline_of(c)) ? para("usual_story") : "";
  const Table table = claims_table(c, verdicts);
  const Fields axis{{"axis", c.axis}};
  if (table.rows.empty()) return md + para("no_claim", axis);
  std::string every;
  for (const auto& [head, list] : verdicts_by_pair(c, verdicts)) {
    every += "- " + markdown_text(head.substr(0, head.size() - 2)) + ":\n";
    for (const Verdict* v : list) every += "  - " + markdown_text(verdict_sentence(c, *v)) + "\n";
  }
  md += para("claims_counted", axis) + table.markdown() + "\n" + details(text("report", "every_verdict"), every + "\n");
  const bool single_seed = std::any_of(c.arms.begin(), c.arms.end(), [](const ArmStats& a) { return a.n_seeds < 2; });
  return md + (single_seed ? para("single_seed") : "");
}

std::string plots_markdown(const ReportContext& ctx) {
  std::string md = ctx.plots_requested ? "" : para("no_plots");
  if (!ctx.plots.note.empty()) md += "Note: " + markdown_text(ctx.plots.note) + "\n\n";
  for (const auto& fig : ctx.plots.drawn)
    md += fmt::format("### {}\n\n{}.\n\n", fig.name, fig.caption) + figure_image(fig.name, fig.name);
  return md;
}

// Every run read, its arm and status, and the directories that could not be read.
std::string runs_markdown(const Comparison& c, const ReportContext& ctx) {
  std::map<std::size_t, const ArmStats*> arm_of_run;  // by index into c.runs, the rows column_table passes
  for (const ArmStats& arm : c.arms)
    for (auto i : arm.runs) arm_of_run[i] = &arm;
  const auto extra = distinguishing_keys(c.arms);
  const std::vector<Column<RunRecord>> columns{
      {"run", "", [&](const RunRecord& r) { return escape_name(shown_path(r.dir, ctx.out_dir)); }},
      {"arm", "arm",
       [&](const RunRecord& r) { return escape_name(arm_label(*arm_of_run[&r - c.runs.data()], extra)); }},
      {"seed", "seed", [](const RunRecord& r) { return setting_text(r.config, "seed"); }},
      {"steps", "", [](const RunRecord& r) { return fmt::format("{}/{}", r.series.size(), r.steps_planned); }},
      {"status", "diverged run", [](const RunRecord& r) {
         std::string s = !r.diverged            ? ""
                         : r.diverged_step >= 0 ? fmt::format("diverged at step {}", r.diverged_step)
                                                : "diverged at an unknown step";
         if (r.incomplete) s += (s.empty() ? "" : "; ") + std::string("incomplete: ") + r.incomplete_reason;
         return s.empty() ? std::string("complete") : s;
       }}};
  const std::string md = column_table(c.runs, columns).markdown() + "\n";
  return md + (ctx.skipped.empty() ? "" : para("skipped") + bullets(ctx.skipped));
}

// A section of report.md: its anchor ("" none), heading ("" none) at `level`, and markdown; left out when empty.
struct Section {
  std::string anchor, title, body;
  int level = 2;
};

std::string render(const std::vector<Section>& sections) {
  std::string md;
  for (const Section& s : sections)
    if (!s.body.empty())
      md += (s.anchor.empty() ? "" : "<a id=\"" + s.anchor + "\"></a>\n\n") +
            (s.title.empty() ? "" : std::string(static_cast<std::size_t>(s.level), '#') + " " + s.title + "\n\n") +
            s.body;
  return md;
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
  const std::vector<Pair> tallies = pairs(c, verdicts);
  pair_findings(c, tallies, out);
  saturation_findings(c, out);
  for (const Pair& p : tallies)
    if (ClaimCount(p, "less_lr_sensitive").n)
      out.push_back({counted_finding(p, "less_lr_sensitive", "LR sensitivity")});
  out.push_back(runs_finding(c));
  return at_most_ten(std::move(out));
}

std::vector<std::string> duplicate_seed_warnings(const Comparison& c, const std::string& relative_to) {
  std::vector<std::string> out;
  const auto extra = distinguishing_keys(c.arms);
  for (const ArmStats& arm : c.arms)
    for (const auto& group : arm.duplicate_seeds) {
      std::vector<std::string> dirs;
      for (auto i : group)
        dirs.push_back(escape_name(relative_to.empty() ? c.runs[i].dir : shown_path(c.runs[i].dir, relative_to)));
      const nlohmann::json& config = c.runs[group.front()].config;
      out.push_back(text("report", "duplicate_seed",
                         {{"arm", escape_name(arm_label(arm, extra))},
                          {"seed", escape_name(setting_text(config, "seed"))},
                          {"data_seed", escape_name(setting_text(config, "data_seed"))},
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

// report.md as a list of sections: the preset's own first, then the findings, their details and the glossary.
std::string report_markdown(const Comparison& c, const ReportContext& ctx) {
  const std::vector<Verdict> verdicts = report_verdicts(c, ctx);
  std::vector<Section> sections{{"", heading("report"), intro_markdown(c, ctx), 1}};
  for (const PresetSection& s : ctx.preset_sections)
    sections.push_back({s.anchor, s.title,
                        figures_markdown(s.figures, ctx) + s.markdown +
                            (s.markdown.empty() || s.markdown.back() == '\n' ? "\n" : "\n\n")});
  // The baseline is judged against only where an arm holds it; elsewhere every two values are.
  const std::string baseline = baseline_of(c);
  const bool held = std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) {
    return setting_text(c.arms[v.baseline].settings, c.axis) == baseline;
  });
  const std::string against = c.axis == "scale" ? baseline : c.axis + "=" + baseline;
  const auto duplicates = duplicate_seed_warnings(c, ctx.out_dir);
  const Table lr = lr_table(c);
  sections.insert(
      sections.end(),
      {{"findings", heading("findings"), findings_markdown(c, verdicts)},
       {"results", heading("results"),
        arm_table(c).markdown() + "\n" + (duplicates.empty() ? "" : para("duplicate_seeds") + bullets(duplicates))},
       {"summary-figures", heading("summary_figures"),
        ctx.summary.empty() ? para("no_summary_figure") : figures_markdown(ctx.summary, ctx)},
       {"lr-sensitivity", heading("lr_sensitivity"), lr.rows.empty() ? "" : lr.markdown() + "\n"},
       {"scale-modes", heading("scale_modes"), bullets(no_comparison_notes(c), "", ".")},
       {"story", held ? heading("story", {{"baseline", against}}) : heading("story_each", {{"axis", c.axis}}),
        story_markdown(c, verdicts, held)},
       {"plots", heading("plots"), plots_markdown(ctx)},
       {"runs-read", heading("runs_read"), runs_markdown(c, ctx)},
       {"glossary", heading("glossary"), glossary_terms(c, ctx)},
       {"", glossary_text("statistics"), glossary_statistics(), 3},
       {"", glossary_text("tolerances"), glossary_tolerances(), 3}});
  return render(sections);
}

}  // namespace xgrad::report
