// explain.json (embedded in explain.html) and explain.md of `xgrad explain`.
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "platform/atomic_file.h"
#include "report/explain.h"
#include "report/explain_figures.h"
#include "report/explain_html.h"
#include "report/plots.h"
#include "report/tables.h"

namespace xgrad::report {

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json numbers(const std::vector<double>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : v) out.push_back(number(x));
  return out;
}

nlohmann::json histogram_json(const ArmMeasurement& a) {
  const Histogram h = score_histogram(a);
  return {{"x0", number(h.x0)}, {"width", number(h.width)}, {"density", numbers(h.density)}};
}

nlohmann::json per_dk_json(const Explanation& e) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto d_k : e.d_ks) {
    nlohmann::json arms = nlohmann::json::array();
    for (const auto& scale : e.scales) {
      const ArmMeasurement& a = *e.arm(d_k, scale);
      nlohmann::json heatmap = nlohmann::json::array();
      for (const auto& row : a.heatmap) heatmap.push_back(numbers(row));
      arms.push_back({{"scale", scale},
                      {"hist", histogram_json(a)},
                      {"theory_std", number(a.theory_std)},
                      {"score_mean", number(a.score_mean)},
                      {"score_std", number(a.score_std)},
                      {"sorted_weights", numbers(a.sorted_weights)},
                      {"heatmap", heatmap},
                      {"heatmap_label", a.heatmap.size() < a.seq_len
                                            ? fmt::format("sequence 0, head 0, layer 0; the first {} of {} positions",
                                                          a.heatmap.size(), a.seq_len)
                                            : std::string("sequence 0, head 0, layer 0")}});
    }
    out.push_back({{"d_k", d_k}, {"arms", arms}});
  }
  return out;
}

nlohmann::json point_json(const ArmMeasurement& a) {
  return {{"d_k", a.d_k},
          {"scale", a.scale},
          {"score_std", number(a.score_std)},
          {"theory_std", number(a.theory_std)},
          {"entropy_mean", number(a.entropy_mean)},
          {"max_prob_mean", number(a.max_prob_mean)},
          {"jacobian_norm_mean", number(a.jacobian_norm_mean)},
          {"saturated_share", number(a.saturated_share)},
          {"score_grad_median", number(a.score_grad_median)},
          {"score_grad_p10", number(a.score_grad_p10)},
          {"score_grad_p90", number(a.score_grad_p90)},
          {"grad_norm_w_q", number(a.grad_norm_w_q)},
          {"grad_norm_w_k", number(a.grad_norm_w_k)},
          {"earned_share", number(a.earned_share)},
          {"chance_share", number(a.chance_share)},
          {"loss", number(a.loss)}};
}

nlohmann::json training_json(const TrainingEvidence& t) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : t.points)
    points.push_back({{"d_k", p.d_k},
                      {"scale", p.scale},
                      {"label", p.label},
                      {"n_runs", p.n_runs},
                      {"final_loss", number(p.final_loss)},
                      {"steps_to_loss", number(p.steps_to_loss)},
                      {"reached", p.reached},
                      {"saturated_share", number(p.saturated_share)},
                      {"score_grad_relative", number(p.score_grad_relative)},
                      {"versus_reference", p.versus_reference}});
  return {{"points", points},
          {"note", "one point per arm (runs that differ only in seed), means over its seeds that did not diverge"}};
}

nlohmann::json sections_json(const std::vector<ExplainSection>& sections) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : sections)
    out.push_back({{"id", s.id},
                   {"number", s.number},
                   {"title", s.title},
                   {"claim", s.claim},
                   {"verdict", s.verdict.verdict},
                   {"verdict_class", s.verdict.verdict_class},
                   {"verdict_text", s.verdict.text},
                   {"paragraphs", s.paragraphs},
                   {"figures", s.figures}});
  return out;
}

}  // namespace

nlohmann::json explain_json(const Explanation& e) {
  nlohmann::json figures = nlohmann::json::object();
  for (const auto& f : explain_figures())
    if (f.id != "runs_vs_dk" || e.training) figures[f.id] = {{"title", f.title}, {"caption", f.caption}};
  nlohmann::json labels = nlohmann::json::object(), colours = nlohmann::json::object();
  for (const auto& s : e.scales) {
    labels[s] = scale_label_of(s);
    colours[s] = scaling_colour(s);  // as in the PNGs and report.html
  }
  nlohmann::json points = nlohmann::json::array();
  for (const auto& a : e.arms) points.push_back(point_json(a));
  return {{"title", "xgrad explain: why divide attention scores by sqrt(d_k)?"},
          {"setup", e.setup},
          {"d_ks", e.d_ks},
          {"scales", e.scales},
          {"scale_labels", labels},
          {"scale_colours", colours},
          {"sections", sections_json(e.sections)},
          {"figures", figures},
          {"per_dk", per_dk_json(e)},
          {"points", points},
          {"curves",
           {{"std", numbers(e.curves.std)},
            {"entropy", numbers(e.curves.entropy)},
            {"max_prob", numbers(e.curves.max_prob)},
            {"jacobian_norm", numbers(e.curves.jacobian_norm)}}},
          {"runs", e.training ? training_json(*e.training) : nlohmann::json(nullptr)},
          {"notes", e.notes}};
}

namespace {

// A table cell: a number, or a dash where there is none.
std::string cell(double v, const char* format) { return std::isfinite(v) ? fmt::format(format, v) : "—"; }

Table points_table(const Explanation& e) {
  Table t;
  t.header = {"d_k",        "scale",          "score std",     "theory std",          "entropy (nats)",
              "max weight", "saturated",      "Jacobian norm", "score grad (median)", "W_q grad",
              "W_k grad",   "peak on answer", "chance"};
  for (const auto& a : e.arms)
    t.rows.push_back({std::to_string(a.d_k), a.scale, fmt::format("{:.3f}", a.score_std),
                      fmt::format("{:.3f}", a.theory_std), fmt::format("{:.3f}", a.entropy_mean),
                      fmt::format("{:.3f}", a.max_prob_mean), format_percent(a.saturated_share),
                      fmt::format("{:.4f}", a.jacobian_norm_mean), fmt::format("{:.3g}", a.score_grad_median),
                      fmt::format("{:.3g}", a.grad_norm_w_q), fmt::format("{:.3g}", a.grad_norm_w_k),
                      std::isnan(a.earned_share) ? "n/a" : format_percent(a.earned_share),
                      std::isnan(a.chance_share) ? "n/a" : format_percent(a.chance_share)});
  return t;
}

Table training_table(const TrainingEvidence& t) {
  Table out;
  out.header = {"arm",
                "d_k",
                "runs",
                "final loss",
                "steps to loss",
                "saturated (median)",
                "score grad / loss",
                "loss vs unscaled"};
  for (const auto& p : t.points)
    out.rows.push_back({markdown_text(p.label, true), std::to_string(p.d_k), std::to_string(p.n_runs),
                        cell(p.final_loss, "{:.4f}"), format_steps(p.reached, p.n_runs, p.steps_to_loss),
                        std::isfinite(p.saturated_share) ? format_percent(p.saturated_share) : "—",
                        cell(p.score_grad_relative, "{:.3g}"), markdown_text(p.versus_reference, true)});
  return out;
}

std::string section_markdown(const ExplainSection& s, const std::map<std::string, std::string>& drawn) {
  std::string md =
      fmt::format("## {}. {}\n\n**Verdict: {}.** {}\n\n*The claim:* {}\n\n", s.number, markdown_text(s.title),
                  markdown_text(s.verdict.verdict), markdown_text(s.verdict.text), markdown_text(s.claim));
  for (const auto& p : s.paragraphs) md += markdown_text(p) + "\n\n";
  for (const auto& id : s.figures) {
    const auto* f = find_explain_figure(id);
    if (!f) continue;
    const std::vector<std::string> files =
        id == "runs_vs_dk"
            ? std::vector<std::string>{id, "runs_steps_vs_dk", "runs_saturated_vs_dk", "runs_score_grad_vs_dk"}
            : std::vector<std::string>{id};
    for (const auto& file : files)
      if (drawn.count(file)) md += fmt::format("![{}](figures/{}.png)\n\n", f->title, file);
    md += fmt::format("*{}{}* {}\n\n", f->title, f->title.back() == '?' ? "" : ".", f->caption);
  }
  return md;
}

}  // namespace

std::string explain_markdown(const Explanation& e, const std::vector<std::string>& figures_drawn,
                             const std::string& plot_note) {
  std::map<std::string, std::string> drawn;
  for (const auto& f : figures_drawn) drawn[f] = f;
  std::string md = "# Why divide attention scores by sqrt(d_k)? The argument, measured\n\n";
  md += "Setup: " + markdown_text(e.setup) + ". The same page, interactive: explain.html.\n\n";
  for (const auto& n : e.notes) md += "- Note: " + markdown_text(n) + "\n";
  if (!plot_note.empty()) md += "- Note: " + markdown_text(plot_note) + "\n";
  if (!e.notes.empty() || !plot_note.empty()) md += "\n";
  md += "| step | verdict |\n|---|---|\n";
  for (const auto& s : e.sections)
    md += fmt::format("| {}. {} | {} |\n", s.number, markdown_text(s.title), markdown_text(s.verdict.verdict));
  md += "\n";
  for (const auto& s : e.sections) md += section_markdown(s, drawn);
  md += "## The numbers\n\n" + points_table(e).markdown() + "\n";
  if (e.training) md += "### Training evidence (--runs)\n\n" + training_table(*e.training).markdown() + "\n";
  return md;
}

namespace {

// `text` with every occurrence of `from` replaced by `to`: the figures' note names the directory they will be in.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
  return text;
}

// The renames that put explain's outputs in place, one explain into a directory at a time (two at once would each
// rename some of their outputs) and with the stop signals held back: the old outputs or the new ones, all of one
// run. Should a file's rename fail, the old figures go back in place.
void commit_explanation(const std::filesystem::path& out, platform::StagedDirectory& figures, platform::StagedFile& md,
                        platform::StagedFile& html) {
  const platform::DirectoryLock lock(out);
  const platform::StopSignalsHeld held;
  figures.commit();
  try {
    md.commit();
    html.commit();
  } catch (const std::runtime_error&) {
    figures.undo();
    throw;
  }
}

}  // namespace

ExplainOutcome write_explanation(const Explanation& e, const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("explain: cannot create " + out_dir + ": " + ec.message() + "; give --out DIR");
  const fs::path out(out_dir);
  ExplainOutcome o;
  o.markdown_path = (out / "explain.md").string();
  o.html_path = (out / "explain.html").string();
  bool committing = false;
  try {
    // Everything is written beside its place first (the figures into a new directory, explain.md and explain.html
    // as temporary files) and renamed into place together: a link in out_dir is replaced, never written through,
    // and a full disk or a stop leaves the old outputs or the new ones, each whole.
    // explain.md and explain.html first: a directory in either's place is refused before anything is written.
    platform::remove_abandoned_temporaries(out);
    platform::StagedFile md(o.markdown_path), html(o.html_path);
    platform::StagedDirectory figures(out / "figures");
    o.figures_drawn = write_explain_figures(e, figures.path().string(), o.plot_note);
    o.plot_note = replaced(o.plot_note, figures.path().string(), figures.target().string());
    md.write(explain_markdown(e, o.figures_drawn, o.plot_note));
    md.finish();
    const std::string page = explain_html(explain_json(e));
    html.write(page);
    html.finish();
    o.html_bytes = page.size();
    committing = true;
    commit_explanation(out, figures, md, html);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string("explain: ") + error.what() +
                             (committing ? "" : "; the outputs in " + out_dir + " are left as they were"));
  }
  return o;
}

}  // namespace xgrad::report
