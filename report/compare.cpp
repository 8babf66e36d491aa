#include "report/compare.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/escape.h"
#include "common/registry.h"
#include "platform/atomic_file.h"
#include "report/html.h"
#include "report/markdown.h"
#include "report/plots.h"
#include "report/preset_report.h"
#include "report/runs.h"
#include "report/stats.h"
#include "report/summary.h"
#include "report/tables.h"
#include "report/text.h"
#include "train/run_directory.h"
#include "train/shell_quote.h"
#include "train/sweep_manifest.h"

namespace xgrad::report {

namespace fs = std::filesystem;

namespace {

// A --baseline no arm holds is refused; a number matches as its value ("1e-2" is lr 0.01), in the arms' form.
void check_baseline(Comparison& c) {
  if (c.baseline.empty()) return;
  std::set<std::string> held;
  for (const ArmStats& arm : c.arms) held.insert(setting_text(arm.settings, c.axis));
  if (held.count(c.baseline)) return;
  char* end = nullptr;
  const double number = std::strtod(c.baseline.c_str(), &end);
  if (end && *end == '\0' && std::isfinite(number) && held.count(fmt::format("{:g}", number))) {
    c.baseline = fmt::format("{:g}", number);
    return;
  }
  std::string values;
  for (const auto& v : held) values += (values.empty() ? "" : ", ") + escape_name(v);
  throw std::invalid_argument("compare: --baseline: no arm has " + c.axis + " " + escape_name(c.baseline) +
                              "; the arms hold " + values);
}

// A sweep reader's refusal as a note's reason: without the "DIR: " that names the command line's argument.
std::string reason(const std::string& error) { return error.rfind("DIR: ", 0) == 0 ? error.substr(5) : error; }

// Notes on the sweeps: points not complete, entries that are no point, runs below a sweep it does not list (copied in,
// they could turn a verdict), and atomic writes cut short, whose runs are not what they seem.
std::vector<Note> sweep_notes(const CompareOptions& options, const FoundRuns& found) {
  std::vector<Note> notes;
  std::set<std::string> leftovers;
  for (const std::string& dir : found.dirs)
    for (const fs::path& f : train::leftover_partial_writes(dir)) leftovers.insert(f.string());
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    if (!fs::exists(fs::path(input) / "sweep.json", ec)) continue;
    train::SweepStanding s;
    try {
      s = train::sweep_standing(input);
    } catch (const std::exception& e) {
      notes.push_back({text("notes", "sweep_unreadable", {{"sweep", input}, {"why", reason(e.what())}})});
      continue;
    }
    for (const fs::path& f : s.leftovers) leftovers.insert(f.string());
    const std::size_t done = s.count_of(train::PointStatus::complete) + s.count_of(train::PointStatus::diverged);
    if (done == s.points) continue;
    s.count.erase(train::PointStatus::complete);
    s.count.erase(train::PointStatus::diverged);
    notes.push_back({text("notes", "sweep_unfinished",
                          {{"sweep", input},
                           {"done", done},
                           {"points", s.points},
                           {"counts", train::standing_counts(s)},
                           {"quoted", train::shell_quote_path(input)}})});
  }
  if (!found.refused.empty())
    notes.push_back({text("notes", "refused_entries", {{"count", found.refused.size()}}), found.refused});
  const std::string cut = found.search_cut ? text("notes", "unlisted_cut", {{"count", RunSearch().max_entries}}) : "";
  if (!found.unlisted.empty() || found.search_cut)
    notes.push_back({text("notes", "unlisted",
                          {{"runs", counted(found.unlisted.size(), "run")},
                           {"cut", cut},
                           {"how", text("notes", options.include_unlisted ? "unlisted_read" : "unlisted_left_out")}}),
                     found.unlisted});
  if (!leftovers.empty())
    notes.push_back({text("notes", "leftovers", {{"writes", counted(leftovers.size(), "leftover partial write")}}),
                     {leftovers.begin(), leftovers.end()}});
  return notes;
}

// Every run that loads: one unreadable run (a file error, a config.json refused) must not hide the others.
std::vector<RunRecord> load_runs(const std::vector<std::string>& dirs, ReportContext& context, std::ostream& out) {
  std::vector<RunRecord> runs;
  for (const auto& dir : dirs) {
    try {
      runs.push_back(load_run(dir));
    } catch (const std::exception& e) {
      context.skipped.push_back(dir + ": " + e.what());
    }
  }
  for (const auto& s : context.skipped) out << "skipped " << s << "\n";
  if (runs.empty())  // the error carries the first reasons: a caller that only prints it (a script, a log) learns why
    throw std::runtime_error(
        Note{fmt::format("compare: none of the {} run directories found could be read", dirs.size()), context.skipped}
            .line());
  return runs;
}

// explain.html beside the report or in the one sweep read, relative to the report's directory; "" when none.
std::string explain_page(const fs::path& out_dir, const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (fs::is_regular_file(out_dir / "explain" / "explain.html", ec)) return "explain/explain.html";
  if (inputs.size() != 1 || !fs::is_regular_file(fs::path(inputs[0]) / "explain" / "explain.html", ec)) return "";
  const fs::path relative =
      fs::relative(fs::absolute(inputs[0]) / "explain" / "explain.html", fs::absolute(out_dir), ec);
  return ec ? "" : relative.generic_string();
}

// Creates the report directory and finds out that it is writable before the figures are drawn, with the reason.
void prepare_report_dir(const fs::path& out_dir, bool plots) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    throw std::runtime_error("compare: cannot create " + out_dir.string() + ": " + ec.message() +
                             "; give another report directory with --out DIR");
  const fs::path probe = out_dir / (".xgrad-write-test-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("compare: cannot write the report into " + out_dir.string() + ": " + std::strerror(errno) +
                             "; give a writable report directory with --out DIR");
  ::close(fd);
  ::unlink(probe.c_str());
  if (plots && fs::is_symlink(fs::symlink_status(out_dir / "plots")))  // refused before anything is printed
    throw std::invalid_argument("compare: " + (out_dir / "plots").string() +
                                " is a symbolic link; compare writes only into the report directory: remove the "
                                "link or give another report directory with --out DIR");
}

// The terminal's tables and notes: arms, sweeps' standing, leftovers, LR sensitivity, incomplete runs, seeds.
void print_tables(const Comparison& c, const CompareOptions& options, const FoundRuns& found, ReportContext& context,
                  std::ostream& out) {
  out << counted(c.runs.size(), "run") << " in " << counted(c.arms.size(), "arm") << "\n";
  context.sweep_notes = sweep_notes(options, found);
  for (const Note& note : context.sweep_notes) out << "note: " << note.line() << "\n";
  out << "\n" << arm_table(c).text();
  const Table lr = lr_table(c);
  for (const auto& line : no_comparison_notes(c)) out << line << "\n";
  if (!lr.rows.empty()) out << "\nLR sensitivity (Wortsman et al. 2023, sec. 3.2):\n" << lr.text();
  for (const auto& run : c.runs)
    if (run.incomplete) out << "incomplete: " << escape_name(run.dir) << " (" << run.incomplete_reason << ")\n";
  for (const auto& line : duplicate_seed_warnings(c)) out << "warning: duplicate seed: " << line << "\n";
}

// The preset every input records, only when all record the same one, and its sections, their figures named apart from
// the others' (names from data reduce alike); else context.preset_note says why none are written.
void preset_sections(const Comparison& c, const CompareOptions& options, const fs::path& out_dir,
                     ReportContext& context, std::ostream& out) {
  std::vector<std::string> problems, named;
  std::vector<PresetRecord> records;
  for (const std::string& input : options.inputs) {
    records.push_back(read_preset_record(input));
    if (!records.back().problem.empty()) problems.push_back(records.back().problem);
    named.push_back(input + ": " + (records.back().name.empty() ? "no preset" : records.back().text()));
  }
  const bool same = std::all_of(records.begin(), records.end(), [&](const PresetRecord& r) {
    return r.name == records.front().name && r.quick == records.front().quick;
  });
  const auto& registry = Registry<PresetReport>::instance();
  const PresetReport* preset = registry.find(records.front().name);
  try {
    if (!problems.empty())
      context.preset_note = fmt::format("{}: no preset sections are written", fmt::join(problems, "; "));
    else if (!same)
      context.preset_note = text("report", "presets_differ", {{"list", fmt::format("{}", fmt::join(named, ", "))}});
    else if ((context.preset = records.front()).name.empty())
      return;
    else if (!preset)
      context.preset_note =
          text("report", "preset_unknown", {{"name", context.preset.name}, {"names", registry.joined_names()}});
    else if (preset->sections)
      context.preset_sections = preset->sections(PresetInput{c, context.preset.quick, out_dir.string()});
  } catch (const std::exception& e) {
    context.preset_note = "the sections of preset '" + context.preset.name + "' could not be computed: " + e.what();
  }
  std::set<std::string> taken;
  for (const PlotFigure& f : plot_figures()) taken.insert(f.name);
  for (const SummaryFigure& f : context.summary) taken.insert(f.name);
  for (PresetSection& section : context.preset_sections)
    for (SummaryFigure& f : section.figures) {
      const std::string base = f.name;
      for (int k = 2; !taken.insert(f.name).second; ++k) f.name = fmt::format("{}-{}", base, k);
    }
  const Fields f{{"name", context.preset.name},
                 {"quick", context.preset.quick ? " (quick)" : ""},
                 {"sections", context.preset_sections.size()}};
  out << (!context.preset_note.empty()      ? "warning: " + context.preset_note
          : context.preset_sections.empty() ? text("report", "preset_printed_alone", f)
                                            : text("report", "preset_printed", f))
      << "\n";
}

// Every figure into new_plots, their notes naming plots_dir, where they will be.
void draw_plots(const Comparison& c, const fs::path& new_plots, const fs::path& plots_dir, ReportContext& context,
                std::ostream& out) {
  context.plots = write_plots(c, new_plots.string());
  std::vector<SummaryFigure> figures = context.summary;
  for (const PresetSection& section : context.preset_sections)
    figures.insert(figures.end(), section.figures.begin(), section.figures.end());
  write_summary_plots(figures, new_plots.string(), context.plots);
  for (std::size_t at; (at = context.plots.note.find(new_plots.string())) != std::string::npos;)
    context.plots.note.replace(at, new_plots.string().size(), plots_dir.string());
  for (const auto& w : context.plots.warnings) out << "warning: plots: " << w << "\n";
  if (!context.plots.note.empty())
    out << "\nplots: " << context.plots.note << "\n";
  else
    out << "\nplots: " << context.plots.drawn.size() + context.plots.summary_drawn.size()
        << " figures (PNG and SVG) in " << plots_dir.string() << "\n";
}

// Everything is written beside its final place and renamed in at the end with stop signals held: the old report or
// the new one; should a file's rename fail, the old plots go back in place.
HtmlOutcome write_report(const Comparison& c, const fs::path& out_dir, bool plots, ReportContext& context,
                         std::ostream& out) {
  platform::remove_abandoned_temporaries(out_dir);
  platform::StagedFile report(out_dir / "report.md"), page(out_dir / "report.html");
  std::optional<platform::StagedDirectory> new_plots;
  if (plots) {
    new_plots.emplace(out_dir / "plots");
    draw_plots(c, new_plots->path(), new_plots->target(), context, out);
  }
  report.write(escape_control(report_markdown(c, context), true));
  report.finish();
  const HtmlOutcome html = write_report_html(c, context, page);
  const platform::StopSignalsHeld held;
  if (new_plots) new_plots->commit();
  try {
    report.commit();
    page.commit();
  } catch (const std::runtime_error&) {
    if (new_plots) new_plots->undo();
    throw;
  }
  return html;
}

std::size_t run_compare_unescaped(const CompareOptions& options, std::ostream& out) {
  if (options.inputs.empty()) throw std::invalid_argument("compare: no run or sweep directory given");
  RunSearch search;
  search.include_unlisted = options.include_unlisted;
  const FoundRuns found = find_run_dirs(options.inputs, search);
  ReportContext context;
  Comparison c = analyse_runs(load_runs(found.dirs, context, out), options.loss_threshold, options.accuracy_threshold,
                              options.threshold_window);
  c.axis = options.axis;
  c.baseline = options.baseline;
  check_baseline(c);
  const fs::path out_dir(options.out.empty() ? options.inputs.front() : options.out);
  prepare_report_dir(out_dir, options.plots);
  print_tables(c, options, found, context, out);
  context.out_dir = out_dir.string();
  context.plots_requested = options.plots;
  context.loss_threshold_option = options.loss_threshold;
  context.explain_page = explain_page(out_dir, options.inputs);
  context.summary = summary_figures(c);
  context.verdicts = judge(c, c.axis, baseline_of(c));  // once, for report.md and report.html
  preset_sections(c, options, out_dir, context, out);
  HtmlOutcome html;
  try {
    html = write_report(c, out_dir, options.plots, context, out);
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    throw std::runtime_error(message.rfind("compare: ", 0) == 0 ? message : "compare: " + message);
  }
  out << "report: " << (out_dir / "report.md").string() << "\n";
  out << "page: " << (out_dir / "report.html").string() << " (" << (html.bytes + 500) / 1000
      << " kB; open it in a browser, no server needed)\n";
  return c.runs.size();
}

}  // namespace

std::size_t run_compare(const CompareOptions& options, std::ostream& terminal) {
  EscapingStreambuf buf(terminal);
  std::ostream out(&buf);
  return run_compare_unescaped(options, out);
}

}  // namespace xgrad::report
