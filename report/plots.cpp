#include "report/plots.h"
#include "report/claims.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/escape.h"
#include "common/file_name.h"
#include "nn/scaling.h"
#include "platform/atomic_file.h"
#include "platform/process.h"
#include "report/tables.h"
#include "report/text.h"

namespace xgrad::report {

namespace fs = std::filesystem;

namespace {

struct Point {
  double step;
  double value;
};

// The positive finite values of a log axis: what its tics must span.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0;
  void add(double v) {
    if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool empty() const { return hi <= 0; }
};

// One mean line per arm of a figure; `second` of a pair (W_k beside W_q) is dashed and lighter.
struct Series {
  std::string name;
  std::vector<double> RunSeries::*member;
  std::string suffix = "";
  bool second = false;
};

// A figure of quantities by step. `loss`: each run's own line too, a cross where one diverged, the loss threshold.
// Its title, y_label and caption are in report/text/figures.md.
struct FigureSpec {
  std::string name;
  bool log_y;
  std::vector<Series> series;
  bool loss = false;
  std::string text(const std::string& key) const { return report::text("figures", name + "." + key); }
};

const std::vector<FigureSpec>& figure_specs() {
  static const std::vector<FigureSpec> specs{
      {"loss", true, {{"loss", &RunSeries::loss}}, true},
      {"grad_norm",
       true,
       {{"w_q", &RunSeries::grad_norm_w_q, ": W_q"}, {"w_k", &RunSeries::grad_norm_w_k, ": W_k", true}}},
      {"entropy", false, {{"entropy", &RunSeries::entropy}}},
      {"score_std", true, {{"score_std", &RunSeries::score_std}}}};
  return specs;
}

// "none #CC6677 solid, sqrt_dk #332288 dashed": the styles of the comparison's scalings, for the loss caption.
std::string styles_text(const Comparison& c) {
  std::vector<std::string> warnings;  // the figures report them
  std::string out;
  for (const ArmStats& arm : c.arms) {
    const LineStyle style = scaling_style(arm.scale(), warnings);
    const std::string text = arm.scale() + " " + style.colour + " " + nn::scaling_dash_styles()[style.dash];
    if (out.find(text) == std::string::npos) out += (out.empty() ? "" : ", ") + text;
  }
  return out;
}

// gnuplot's dt of line_dashes()[dash]: 1 (solid on every terminal) or the pattern.
std::string dash_pattern(std::size_t dash) {
  std::string out;
  for (double v : line_dashes()[dash % line_dashes().size()]) out += (out.empty() ? "(" : ",") + fmt::format("{:g}", v);
  return out.empty() ? "1" : out + ")";
}

std::string line_style(const std::string& colour, double width, bool faint, std::size_t dash) {
  return fmt::format("with lines lw {} dt {} lc rgb '#{}{}'", width, dash_pattern(dash), faint ? "99" : "",
                     colour.substr(1));
}

// The typical distance in steps between measured points (1 for a quantity logged every step): the median gap.
double median_gap(const std::vector<Point>& points) {
  if (points.size() < 2) return 1;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < points.size(); ++i) gaps.push_back(points[i].step - points[i - 1].step);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<long>(gaps.size() / 2), gaps.end());
  return std::max(1.0, gaps[gaps.size() / 2]);
}

// Mean over the arm's runs at each step of one series' finite values, smoothed as in report.html.
std::vector<Point> mean_over_runs(const Comparison& c, const ArmStats& arm, std::vector<double> RunSeries::*series,
                                  double half_width) {
  std::map<double, std::pair<double, std::size_t>> by_step;
  for (auto i : arm.runs) {
    // A diverged run is left out of the mean, as of every statistic of its arm (its own line and cross still show
    // it): its last steps before the blow-up would decide the mean there.
    if (c.runs[i].diverged) continue;
    const RunSeries& s = c.runs[i].series;
    for (std::size_t r = 0; r < s.size(); ++r)
      if (std::isfinite((s.*series)[r]) && std::isfinite(s.step[r])) {
        by_step[s.step[r]].first += (s.*series)[r];
        ++by_step[s.step[r]].second;
      }
  }
  std::vector<double> x, y;
  for (const auto& [step, acc] : by_step) {
    x.push_back(step);
    y.push_back(acc.first / static_cast<double>(acc.second));
  }
  y = smooth(x, y, half_width);
  std::vector<Point> out;
  for (std::size_t i = 0; i < x.size(); ++i) out.push_back({x[i], y[i]});
  return out;
}

// Keeps the first point of each `stride`-step bucket and the last point.
std::vector<Point> thin(const std::vector<Point>& points, double stride) {
  if (stride <= 1) return points;
  std::vector<Point> out;
  const auto bucket = [&](std::size_t i) { return std::floor(points[i].step / stride); };
  for (std::size_t i = 0; i < points.size(); ++i)
    if (i == 0 || i + 1 == points.size() || bucket(i) != bucket(i - 1)) out.push_back(points[i]);
  return out;
}

std::string point_lines(const std::vector<Point>& points, bool log_y) {
  std::string out;
  for (const auto& p : points)
    out += gnuplot_number(p.step) + " " + (log_y && !(p.value > 0) ? "NaN" : gnuplot_number(p.value)) + "\n";
  return out;
}

// gnuplot labels only powers of ten, leaving a loss axis from 1 to 6 one label: under three decades, 1-2-5 steps.
std::string log_tics(const Range& range) {
  if (range.empty() || range.hi / range.lo >= 1000) return "set ytics autofreq\n";
  std::vector<double> mantissas{1, 2, 5};
  if (range.hi / range.lo < 10) mantissas = {1, 1.5, 2, 3, 4, 5, 7};
  // gnuplot's autoscale widens a log axis to whole decades; label all of them.
  const int first = static_cast<int>(std::floor(std::log10(range.lo)));
  const int last = static_cast<int>(std::ceil(std::log10(range.hi)));
  std::string tics;
  for (int e = first; e <= last; ++e)
    for (double m : mantissas) {
      const double v = m * std::pow(10.0, e);
      if (v <= std::pow(10.0, last) * 1.0001) tics += (tics.empty() ? "" : ", ") + gnuplot_number(v);
    }
  return "set ytics (" + tics + ")\n";
}

// `elements` as one plot command, an element per line; a "no data" label when there is none.
std::string plot_command(const std::vector<std::string>& elements) {
  if (elements.empty()) return "set label 1 \"no data\" at graph 0.5, 0.5 center\nplot [0:1] [0:1] NaN notitle\n";
  return fmt::format("plot {}\n", fmt::join(elements, ", \\\n     "));
}

// A figure's script: `body` once for the PNG and once for the SVG, each followed by `reset`.
std::string script(const std::string& name, std::size_t width, std::size_t height, const std::string& samplen,
                   const std::string& body, const std::string& reset) {
  std::string out = "# Written by `xgrad compare`; re-run with `gnuplot " + name + ".gp` in this directory.\n";
  for (const std::string terminal : {"pngcairo", "svg"}) {
    const bool svg = terminal == "svg";
    out += fmt::format("set terminal {} size {},{} noenhanced font 'Sans,{}'{}\n", terminal, width, height,
                       svg ? 11 : 10, svg ? " background rgb 'white'" : "");
    out += "set output " + gnuplot_string(name + (svg ? ".svg" : ".png")) + "\n";
    out += "set key outside right top vertical font ',9' samplen " + samplen + "\nset grid\nset format y '%g'\n";
    out += body + "set output\n" + reset + "\n";
  }
  return out;
}

// The figures' scripts in `dir` (its data/ created, or std::runtime_error), drawn when gnuplot is on PATH.
struct Drawer {
  fs::path dir;
  bool have_gnuplot = false;
  std::vector<std::string> failed = {};
  explicit Drawer(const std::string& plots_dir) : dir(plots_dir) {
    std::error_code ec;
    fs::create_directories(dir / "data", ec);
    if (ec) throw std::runtime_error("cannot create " + (dir / "data").string() + ": " + ec.message());
    have_gnuplot = gnuplot_available();
  }
  // Writes the script `name`.gp and, with gnuplot, draws it: into `drawn` (with its caption) or `failed`.
  void figure(const std::string& name, const std::string& text, const std::string& caption,
              std::vector<PlotFigure>& drawn) {
    write_plot_file(dir / (name + ".gp"), text);
    if (have_gnuplot && draw_figure(dir, name))
      drawn.push_back({name, caption});
    else if (have_gnuplot)
      failed.push_back(name + ".gp");
  }
  // What failed, for the outcome's note: "<what> a.gp b.gp (see <dir>/gnuplot.log)", or "" when nothing did.
  std::string failed_note(const std::string& what) const {
    if (failed.empty()) return "";
    return fmt::format("{} {} (see {})", what, fmt::join(failed, " "), (dir / "gnuplot.log").string());
  }
};

// The arms of one panel: they differ only in scale mode.
struct Panel {
  std::string title;
  std::size_t d_k;
  std::vector<std::size_t> arms;
};

struct PanelGrid {
  std::vector<Panel> panels;
  std::size_t cols, rows;
};

// A panel per group of arms that differ only in scale mode: each is a scaled-vs-unscaled comparison.
PanelGrid panel_grid(const Comparison& c) {
  const std::vector<std::string> omit = shared_label_parts(c.arms, {"scale"});
  const auto extra = distinguishing_keys(c.arms);
  PanelGrid g;
  for (const std::vector<std::size_t>& arms : arm_groups(c, "scale")) {
    const ArmStats& first = c.arms[arms.front()];
    g.panels.push_back({arm_label(first, extra, omit), first.d_k(), arms});
  }
  std::stable_sort(g.panels.begin(), g.panels.end(), [](const Panel& x, const Panel& y) { return x.d_k < y.d_k; });
  std::map<std::size_t, std::size_t> per_d_k;
  for (const auto& p : g.panels) ++per_d_k[p.d_k];
  // A regular grid (every d_k has the same k > 1 panels) gets one row per d_k; otherwise panels fill the rows.
  bool regular = per_d_k.size() > 1;
  for (const auto& [d_k, n] : per_d_k) regular = regular && n == per_d_k.begin()->second && n > 1 && n <= 4;
  g.cols = regular ? per_d_k.begin()->second : std::min<std::size_t>(g.panels.size(), 3);
  g.rows = (g.panels.size() + g.cols - 1) / g.cols;
  return g;
}

std::string arm_title(const Comparison& c, const ArmStats& arm) {
  const std::size_t n = arm.runs.size();
  const auto n_diverged = std::count_if(arm.runs.begin(), arm.runs.end(), [&](auto i) { return c.runs[i].diverged; });
  return fmt::format("{} ({} run{}{}{})", scale_label(arm), n, n == 1 ? "" : "s",
                     arm.n_incomplete ? fmt::format(", {} incomplete", arm.n_incomplete) : std::string(),
                     n_diverged ? fmt::format(", {} diverged: not in the mean", n_diverged) : std::string());
}

// One figure of quantities by step being written; `gap`: the widest median gap between measured steps.
struct StepFigure {
  const Comparison& c;
  const fs::path& dir;
  const FigureSpec& spec;
  double half_width, stride_mean, stride_runs;  // the smoothing's, and the thinning strides of mean and run lines
  std::vector<std::string>& warnings;
  double gap = 1;
};

// What one panel plots. The loss axis tops at 1.5 × the highest initial loss, so a diverging run does not flatten
// the others (unless every run diverged: then the blow-up is the picture).
struct PanelLines {
  std::vector<std::string> elements;
  Range range;
  double y_max = 0;
  bool stable = false;
  std::map<std::size_t, std::vector<Point>> diverged;  // by arm
};

// Every run's loss in data/arm<a>_runs.dat, one block per run. False when no run has a loss to draw.
bool write_run_losses(StepFigure& f, std::size_t a, PanelLines& p) {
  std::string text;
  bool any = false;
  const auto positive = [](const Point& pt) { return std::isfinite(pt.value) && pt.value > 0; };
  for (auto i : f.c.arms[a].runs) {
    const RunRecord& run = f.c.runs[i];
    text += "# " + escape_control(run.dir) + "\n";  // a newline in a name would start a data line
    std::vector<Point> points;
    for (std::size_t r = 0; r < run.series.size(); ++r) points.push_back({run.series.step[r], run.series.loss[r]});
    const std::vector<Point> drawn = thin(points, f.stride_runs);
    for (const auto& pt : drawn) {
      any = any || positive(pt);
      p.range.add(pt.value);
    }
    text += point_lines(drawn, true) + "\n";
    const auto first = std::find_if(points.begin(), points.end(), positive);
    if (first != points.end()) p.y_max = std::max(p.y_max, 1.5 * first->value);
    const auto last = std::find_if(points.rbegin(), points.rend(), positive);
    if (run.diverged && last != points.rend())
      p.diverged[a].push_back({static_cast<double>(run.diverged_step), last->value});
    p.stable = p.stable || !run.diverged;
  }
  write_plot_file(f.dir / fmt::format("data/arm{}_runs.dat", a), text);
  return any;
}

void add_arm_lines(StepFigure& f, std::size_t a, PanelLines& p) {
  const std::string title = arm_title(f.c, f.c.arms[a]);
  const LineStyle style = scaling_style(f.c.arms[a].scale(), f.warnings);
  if (f.spec.loss && write_run_losses(f, a, p))
    p.elements.push_back(
        fmt::format("'data/arm{}_runs.dat' using 1:2 {} notitle", a, line_style(style.colour, 0.8, true, style.dash)));
  for (const Series& s : f.spec.series) {
    const std::vector<Point> mean = mean_over_runs(f.c, f.c.arms[a], s.member, f.half_width);
    f.gap = std::max(f.gap, median_gap(mean));
    const std::vector<Point> points = thin(mean, f.stride_mean);
    if (std::none_of(points.begin(), points.end(),
                     [&](const Point& pt) { return std::isfinite(pt.value) && (!f.spec.log_y || pt.value > 0); }))
      continue;
    const std::string file = fmt::format("data/arm{}_{}.dat", a, s.name);
    write_plot_file(f.dir / file, "# step value\n" + point_lines(points, f.spec.log_y));
    for (const auto& pt : points) p.range.add(pt.value);
    // The second quantity of a pair dashed in a lighter shade, the others in the scaling's style.
    const std::string line = line_style(s.second ? lighter(style.colour, 0.5) : style.colour, f.spec.loss ? 2.5 : 2,
                                        false, s.second ? 1 : style.dash);
    p.elements.push_back(fmt::format("'{}' using 1:2 {} title {}", file, line, gnuplot_string(title + s.suffix)));
  }
}

// The loss panel's extras: a cross per diverged run, the threshold line when the arms share it, the y range.
std::string loss_panel_extras(StepFigure& f, const Panel& panel, PanelLines& p) {
  if (!p.stable) p.y_max = 0;
  for (auto& [a, marks] : p.diverged) {
    for (auto& m : marks)
      if (p.y_max > 0) m.value = std::min(m.value, p.y_max / 1.1);
    const std::string file = fmt::format("data/arm{}_diverged.dat", a);
    write_plot_file(f.dir / file, "# step value\n" + point_lines(marks, true));
    p.elements.push_back(fmt::format("'{}' using 1:2 with points pt 2 ps 2 lw 2 lc rgb '{}' title {}", file,
                                     scaling_style(f.c.arms[a].scale(), f.warnings).colour,
                                     gnuplot_string(f.c.arms[a].scale() + ": diverged")));
  }
  const double t = f.c.arms[panel.arms.front()].loss_threshold;
  if (t > 0 &&
      std::all_of(panel.arms.begin(), panel.arms.end(), [&](std::size_t a) { return f.c.arms[a].loss_threshold == t; }))
    p.elements.push_back(fmt::format("{} with lines dt 3 lw 1.5 lc rgb '#606060' title {}", gnuplot_number(t),
                                     gnuplot_string("loss threshold " + train::format_number(t, 3))));
  if (p.y_max > 0) p.range.hi = std::min(p.range.hi, p.y_max);
  return p.y_max > 0 ? fmt::format("set yrange [*:{}]\n", gnuplot_number(p.y_max)) : "set yrange [*:*]\n";
}

std::string panel_commands(StepFigure& f, const Panel& panel) {
  PanelLines p;
  for (auto a : panel.arms) add_arm_lines(f, a, p);
  std::string body = "set title " + gnuplot_string(panel.title) + "\n";
  body += "set xlabel \"step\"\nset ylabel " + gnuplot_string(f.spec.text("y_label")) + "\n";
  body += f.spec.log_y ? "set logscale y\n" : "unset logscale y\n";
  if (p.elements.empty()) return body + "unset logscale y\n" + plot_command({}) + "unset label 1\n";
  body += f.spec.loss ? loss_panel_extras(f, panel, p) : f.spec.log_y ? "set yrange [*:*]\n" : "set yrange [0:*]\n";
  if (f.spec.log_y) body += log_tics(p.range);
  return body + plot_command(p.elements);
}

// A quantity measured every `gap` steps has fewer points in the window, possibly one: the title says so.
std::string smoothing_title(const StepFigure& f) {
  if (f.half_width <= 0) return "";
  const double window = 2 * f.half_width + 1;
  if (f.gap <= 1) return fmt::format("; means smoothed over {:.0f} steps", window);
  const double points = std::floor(2 * f.half_width / f.gap) + 1;
  if (points < 2) return fmt::format("; means not smoothed (measured every {:.0f} steps)", f.gap);
  return fmt::format("; means smoothed over {:.0f} steps ({:.0f} measurements, one every {:.0f} steps)", window, points,
                     f.gap);
}

// What a summary figure plots: a line per drawable SummaryLine, the x values, the range of y with error bars.
struct SummaryLines {
  std::vector<std::string> elements;
  std::set<double> xs;
  Range range;
};

// The line's drawable points as "x y low high x·shift". False when there is none.
bool write_summary_data(const fs::path& path, const SummaryFigure& f, const SummaryLine& line, double shift,
                        SummaryLines& s) {
  std::string text = "# " + escape_control(line.label) + "\n# x y low high drawn_x\n";
  bool any = false;
  for (const SummaryPoint& p : line.points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y) || (f.log_x && p.x <= 0) || (f.log_y && p.y <= 0)) continue;
    // An error bar's low end at or below 0 cannot be drawn on a log axis: clipped to the point.
    const double lo = std::isfinite(p.lo) && (!f.log_y || p.lo > 0) ? p.lo : p.y;
    const double hi = std::isfinite(p.hi) ? p.hi : p.y;
    text += fmt::format("{} {} {} {} {}\n", gnuplot_number(p.x), gnuplot_number(p.y), gnuplot_number(lo),
                        gnuplot_number(hi), gnuplot_number(p.x * shift));
    any = true;
    s.xs.insert(p.x);
    for (double v : {p.y, lo, hi}) s.range.add(v);
  }
  if (any) write_plot_file(path, text);
  return any;
}

// Every line's data and plot element; measured lines shifted a few percent along x so error bars do not hide others.
SummaryLines write_summary_lines(const SummaryFigure& f, const fs::path& dir, std::vector<std::string>& warnings) {
  SummaryLines s;
  const std::vector<LineStyle> styles = summary_styles(f, warnings);
  const auto n_measured = std::count_if(f.lines.begin(), f.lines.end(), [](const auto& l) { return !l.theory; });
  std::size_t j = 0;
  const int point_types[] = {7, 5, 9, 13, 11, 4, 6, 8};  // gnuplot's pt: a marker of its own per dash
  for (std::size_t l = 0; l < f.lines.size(); ++l) {
    const SummaryLine& line = f.lines[l];
    const std::string file = fmt::format("data/{}_{}.dat", f.name, l);
    const double offset = static_cast<double>(j) - 0.5 * static_cast<double>(n_measured - 1);
    const double shift = line.theory || !f.log_x ? 1.0 : std::pow(2.0, 0.05 * offset);
    if (!write_summary_data(dir / file, f, line, shift, s)) continue;
    if (!line.theory) ++j;
    const std::string style = fmt::format("dt {} lc rgb '{}' title {}", dash_pattern(styles[l].dash), styles[l].colour,
                                          gnuplot_string(line.label));
    if (line.theory || !f.tabulate)  // theory, or a curve over many steps: a line, no points or error bars
      s.elements.push_back(gnuplot_string(file) + " using 1:2 with lines lw " + (line.theory ? "1.5 " : "2 ") + style);
    else
      s.elements.push_back(fmt::format("{} using 5:2:3:4 with yerrorlines lw 2 pt {} ps 1.2 {}", gnuplot_string(file),
                                       point_types[styles[l].dash % 8], style));
  }
  return s;
}

// The figure's commands: title, axes (tics at the measured x of a table), and the plot.
std::string summary_body(const SummaryFigure& f, const SummaryLines& s) {
  std::string body = "set title " + gnuplot_string(f.title) + "\n";
  body += "set xlabel " + gnuplot_string(f.x_label) + "\nset ylabel " + gnuplot_string(f.y_label) + "\n";
  const bool d_k_axis = f.name.find("_vs_d_k") != std::string::npos;
  if (f.log_x) body += d_k_axis ? "set logscale x 2\n" : "set logscale x 10\n";
  if (!s.xs.empty() && f.tabulate) {
    std::string tics;
    for (double x : s.xs) tics += (tics.empty() ? "" : ", ") + fmt::format("\"{:g}\" {}", x, gnuplot_number(x));
    body += "set xtics (" + tics + ")\n";
    // Room on both sides of the first and last x so their error bars show.
    const double lo = *s.xs.begin(), hi = *s.xs.rbegin();
    if (f.log_x && lo > 0)
      body += fmt::format("set xrange [{}:{}]\n", gnuplot_number(lo / 1.25), gnuplot_number(hi * 1.25));
  }
  if (f.log_y)
    body += "set logscale y\nset offsets 0, 0, graph 0.04, graph 0.04\n" + log_tics(s.range);
  else
    body += "set yrange [0:*]\n";  // losses and entropies are >= 0 (an sd bar may reach below)
  return body + (s.elements.empty() ? "unset logscale\n" : "") + plot_command(s.elements);
}

}  // namespace

const std::vector<PlotFigure>& plot_figures() {
  static const std::vector<PlotFigure> figures = [] {
    std::vector<PlotFigure> f;
    for (const auto& s : figure_specs()) f.push_back({s.name, s.text("caption")});
    return f;
  }();
  return figures;
}

std::string gnuplot_number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : std::string("NaN"); }

std::string gnuplot_string(const std::string& s) {
  // Single quotes: gnuplot expands backticks and escapes only inside double quotes; a doubled quote fails to parse
  // in gnuplot 5.4 when two follow each other, hence "\047". Newlines and controls: escape_control.
  const std::string shown = escape_control(s);
  if (shown.find('\'') == std::string::npos) return "'" + shown + "'";
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t quote = shown.find('\''); begin <= shown.size(); quote = shown.find('\'', begin)) {
    const std::size_t end = std::min(quote, shown.size());
    if (end > begin) parts.push_back("'" + shown.substr(begin, end - begin) + "'");
    if (quote != std::string::npos) parts.push_back("\"\\047\"");
    begin = end + 1;
  }
  return fmt::format("({})", fmt::join(parts, "."));
}

bool gnuplot_available() { return !platform::find_program("gnuplot").empty(); }

void write_plot_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();  // a full disk may show only when the last bytes are written
  if (!out) throw std::runtime_error(platform::system_error_text("writing " + path));
}

bool draw_figure(const std::string& plots_dir, const std::string& name) {
  const fs::path dir(plots_dir);
  std::error_code ec;
  // Names come from the data: one that could be an option, a path or a pattern is never handed to gnuplot.
  if (!is_safe_file_stem(name)) return false;
  for (const std::string ext : {".png", ".svg"}) fs::remove(dir / (name + ext), ec);
  platform::ProgramOptions options;
  options.working_directory = dir.string();
  options.output_file = (dir / "gnuplot.log").string();
  try {
    if (!platform::run_program({"gnuplot", name + ".gp"}, options).succeeded()) return false;
  } catch (const std::runtime_error&) {  // gnuplot gone since gnuplot_available, or gnuplot.log a link
    return false;
  }
  return fs::exists(dir / (name + ".png")) && fs::exists(dir / (name + ".svg"));
}

PlotOutcome write_plots(const Comparison& c, const std::string& plots_dir) {
  PlotOutcome outcome;
  Drawer d(plots_dir);
  double max_rows = 1;
  for (const auto& run : c.runs) max_rows = std::max(max_rows, static_cast<double>(run.series.size()));
  const PanelGrid grid = panel_grid(c);
  std::error_code ec;
  fs::remove(d.dir / "gnuplot.log", ec);
  const double half_width = smoothing_half_width(c), stride_mean = std::ceil(max_rows / 1500.0),
               stride_runs = std::ceil(max_rows / 600.0);
  for (const FigureSpec& spec : figure_specs()) {
    StepFigure f{c, d.dir, spec, half_width, stride_mean, stride_runs, outcome.warnings};
    std::string panels;
    for (const Panel& panel : grid.panels) panels += panel_commands(f, panel);
    const std::string body = fmt::format("set multiplot layout {},{} title {} font ',12'\n", grid.rows, grid.cols,
                                         gnuplot_string(spec.text("title") + smoothing_title(f)));
    d.figure(spec.name,
             script(spec.name, std::max<std::size_t>(640 * grid.cols, 1100), 380 * grid.rows + 40, "2",
                    body + panels + "unset multiplot\n", ""),
             spec.text("caption") + (spec.loss ? ". Scale modes: " + styles_text(c) : ""), outcome.drawn);
  }
  outcome.note = d.have_gnuplot ? d.failed_note("gnuplot failed for:")
                                : "gnuplot not found on PATH: plots skipped (data files and .gp scripts are in " +
                                      d.dir.string() + "; install gnuplot-nox and run `gnuplot <figure>.gp` there)";
  return outcome;
}

void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir,
                         PlotOutcome& outcome) {
  Drawer d(plots_dir);
  for (const SummaryFigure& f : figures) {
    if (!is_safe_file_stem(f.name)) {  // a preset's name built from the data without safe_file_stem
      d.failed.push_back(escape_control(f.name) + " (not a safe file name: nothing written)");
      continue;
    }
    const std::string reset =
        "unset logscale\nset xtics autofreq\nset ytics autofreq\nset offsets 0, 0, 0, 0\nset xrange [*:*]\nset "
        "yrange [*:*]\n";
    d.figure(f.name,
             script(f.name, 900, 560, "3", summary_body(f, write_summary_lines(f, d.dir, outcome.warnings)), reset),
             f.caption, outcome.summary_drawn);
  }
  const std::string note = d.failed_note("gnuplot failed for summary figure(s):");
  if (!note.empty()) outcome.note += (outcome.note.empty() ? "" : "; ") + note;
}

}  // namespace xgrad::report
