// explain.json, explain.html (the JSON with the vendored uPlot and the page's own script and style) and explain.md
// of `xgrad explain`.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "platform/atomic_file.h"
#include "report/explain.h"
#include "report/explain_figures.h"
#include "report/plots.h"
#include "report/standalone_page.h"
#include "report/tables.h"
#include "report/web_assets.h"

namespace xgrad::report {

// Non-finite numbers stay NaN in the object; nlohmann writes them as null.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TrainingPoint, d_k, scale, label, n_runs, final_loss, steps_to_loss, reached,
                                   saturated_share, score_grad_relative, versus_reference)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SoftmaxCurves, std, entropy, max_prob, jacobian_norm)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SectionVerdict, verdict, verdict_class, text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExplainSection, id, number, title, claim, verdict, paragraphs, figures)

namespace {

nlohmann::json per_dk_json(const Explanation& e) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto d_k : e.d_ks) {
    nlohmann::json arms = nlohmann::json::array();
    for (const auto& scale : e.scales) {
      const ArmMeasurement& a = *e.arm(d_k, scale);
      const Histogram h = score_histogram(a);
      arms.push_back({{"scale", scale},
                      {"hist", {{"x0", h.x0}, {"width", h.width}, {"density", h.density}}},
                      {"theory_std", a.theory_std},
                      {"score_mean", a.score_mean},
                      {"score_std", a.score_std},
                      {"sorted_weights", a.sorted_weights},
                      {"heatmap", a.heatmap},
                      {"heatmap_label", text("explain", a.heatmap.size() < a.seq_len ? "heatmap_first" : "heatmap_all",
                                             {{"shown", a.heatmap.size()}, {"seq_len", a.seq_len}})}});
    }
    out.push_back({{"d_k", d_k}, {"arms", arms}});
  }
  return out;
}

// A table cell: a number, or a dash where there is none.
std::string cell(double v, const char* format) { return std::isfinite(v) ? fmt::format(format, v) : "—"; }

Table training_table(const TrainingEvidence& t) {
  Table out;
  out.header = text_cells("explain", "training_header");
  for (const auto& p : t.points)
    out.rows.push_back({markdown_text(p.label, true), std::to_string(p.d_k), std::to_string(p.n_runs),
                        cell(p.final_loss, "{:.4f}"), format_steps(p.reached, p.n_runs, p.steps_to_loss),
                        format_percent(p.saturated_share), cell(p.score_grad_relative, "{:.3g}"),
                        markdown_text(p.versus_reference, true)});
  return out;
}

std::string section_markdown(const ExplainSection& s, const std::vector<std::string>& drawn) {
  std::string md =
      fmt::format("## {}. {}\n\n**Verdict: {}.** {}\n\n*The claim:* {}\n\n", s.number, markdown_text(s.title),
                  markdown_text(s.verdict.verdict), markdown_text(s.verdict.text), markdown_text(s.claim));
  for (const auto& p : s.paragraphs) md += markdown_text(p) + "\n\n";
  for (const auto& id : s.figures) {
    const auto* f = find_explain_figure(id);
    if (!f) continue;
    for (const auto& file : drawn)  // a figure of several panels is drawn into id, id_<panel>, ...
      if (file == id || file.rfind(id + "_", 0) == 0) md += fmt::format("![{}](figures/{}.png)\n\n", f->title, file);
    md += fmt::format("*{}{}* {}\n\n", f->title, f->title.back() == '?' ? "" : ".", f->caption);
  }
  return md;
}

// One explain into a directory at a time, stop signals held: the old outputs or the new ones.
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

Table arm_table(const std::vector<ArmMeasurement>& arms, bool forward_only) {
  Table t;
  t.header = {"d_k", "scale"};
  for (const ArmNumber& n : arm_numbers())
    if (n.header && (n.forward || !forward_only)) t.header.push_back(n.header);
  for (const auto& a : arms) {
    std::vector<std::string> row{std::to_string(a.d_k), a.scale};
    for (const ArmNumber& n : arm_numbers())
      if (n.header && (n.forward || !forward_only))
        row.push_back(n.format == std::string("%") ? percent_text(a.*n.field)
                                                   : fmt::format(fmt::runtime(n.format), a.*n.field));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string format_probe_table(const std::vector<ArmMeasurement>& arms) {
  std::string out = arm_table(arms, true).text();
  for (const char* key : {"probe.theory", "probe.queries", "probe.saturated"}) out += text("explain", key) + "\n";
  return out;
}

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
  for (const auto& a : e.arms) {
    points.push_back({{"d_k", a.d_k}, {"scale", a.scale}});
    for (const ArmNumber& n : arm_numbers()) points.back()[n.name] = a.*n.field;
  }
  return {{"title", text("explain", "page_title")},
          {"setup", e.setup},
          {"d_ks", e.d_ks},
          {"scales", e.scales},
          {"scale_labels", labels},
          {"scale_colours", colours},
          {"sections", e.sections},
          {"figures", figures},
          {"per_dk", per_dk_json(e)},
          {"points", points},
          {"curves", e.curves},
          {"runs", e.training ? nlohmann::json{{"points", e.training->points}, {"note", text("explain", "runs_note")}}
                              : nlohmann::json(nullptr)},
          {"notes", e.notes}};
}

std::string explain_html(const nlohmann::json& data) {
  StandalonePage page;
  page.file = "explain.html";
  page.title = data.contains("title") && data.at("title").is_string() ? data.at("title").get<std::string>()
                                                                      : std::string("xgrad explain");
  page.data_id = "xgrad-explain";
  // nlohmann writes NaN and Inf as null; invalid UTF-8 in a string becomes U+FFFD rather than an exception.
  page.data = script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  page.noscript = text("explain", "noscript");
  page.css = web_assets::kExplainCss;
  page.js = web_assets::kExplainJs;
  return standalone_page_html(page);
}

std::string explain_markdown(const Explanation& e, const std::vector<std::string>& figures_drawn,
                             const std::string& plot_note) {
  std::string md = "# Why divide attention scores by sqrt(d_k)? The argument, measured\n\n";
  md += "Setup: " + markdown_text(e.setup) + ". The same page, interactive: explain.html.\n\n";
  for (const auto& n : e.notes) md += "- Note: " + markdown_text(n) + "\n";
  if (!plot_note.empty()) md += "- Note: " + markdown_text(plot_note) + "\n";
  if (!e.notes.empty() || !plot_note.empty()) md += "\n";
  md += "| step | verdict |\n|---|---|\n";
  for (const auto& s : e.sections)
    md += fmt::format("| {}. {} | {} |\n", s.number, markdown_text(s.title), markdown_text(s.verdict.verdict));
  md += "\n";
  for (const auto& s : e.sections) md += section_markdown(s, figures_drawn);
  md += "## The numbers\n\n" + arm_table(e.arms, false).markdown() + "\n";
  if (e.training) md += "### Training evidence (--runs)\n\n" + training_table(*e.training).markdown() + "\n";
  return md;
}

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
    // Written beside their places, renamed in together (commit_explanation); the files first: a directory in their
    // place is refused before anything is written.
    platform::remove_abandoned_temporaries(out);
    platform::StagedFile md(o.markdown_path), html(o.html_path);
    platform::StagedDirectory figures(out / "figures");
    o.figures_drawn = write_explain_figures(e, figures.path().string(), o.plot_note);
    const std::string staged = figures.path().string(), target = figures.target().string();
    for (std::size_t at = 0; (at = o.plot_note.find(staged, at)) != std::string::npos; at += target.size())
      o.plot_note.replace(at, staged.size(), target);  // the note names the directory they will be in
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
