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

// The figure model every gnuplot figure is built as: panels of lines, each in a style, with optional markers (error
// bars, crosses) and horizontal reference lines. One writer (figure_script) turns it into data files and a script.
struct PlotPoint {
  double x, y;
  double lo = kNoValue, hi = kNoValue;  // an error bar's ends
};

struct PlotLine {
  enum class Mark { none, error_bars, cross };
  std::string title;  // "" : not in the key
  std::string file;   // data/<file>.dat
  LineStyle style;    // its colour may be #AARRGGBB: a run's faint line
  double width = 2;
  Mark mark = Mark::none;
  double shift = 1;  // drawn at x · shift, so that error bars at one x do not hide each other
  std::vector<std::vector<PlotPoint>> blocks = {};  // one line each (a run's)
  std::vector<std::string> block_names = {};
};

struct PlotPanel {
  std::string title, x_label, y_label;
  int log_x = 0;  // the base of a log x axis (0: linear)
  bool log_y = false;
  bool pad_y = false;               // 4% room below and above the points on a log y axis (the error bars' ends)
  double y_max = kNoValue;          // the top of the y axis (NaN: automatic; a linear axis starts at 0)
  std::vector<double> x_tics = {};  // x values labelled (empty: automatic)
  std::vector<PlotLine> lines = {};
  std::vector<std::pair<double, std::string>> references = {};  // y and title of a dotted grey line
};

struct Plot {
  std::string name, title, caption;
  std::vector<PlotPanel> panels;
  std::size_t cols = 1, rows = 1;
};

// gnuplot's dt of line_dashes()[dash]: 1 (solid on every terminal) or the pattern.
std::string dash_pattern(std::size_t dash) {
  std::string out;
  for (double v : line_dashes()[dash % line_dashes().size()]) out += (out.empty() ? "(" : ",") + fmt::format("{:g}", v);
  return out.empty() ? "1" : out + ")";
}

// gnuplot labels only powers of ten, leaving a loss axis from 1 to 6 one label: under three decades, 1-2-5 steps.
// `values`: the panel's, up to `top`; its positive finite ones are what the tics must span.
std::string log_tics(const std::vector<double>& values, double top) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double v : values)
    if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  hi = std::isfinite(top) ? std::min(hi, top) : hi;
  if (hi <= 0 || hi / lo >= 1000) return "set ytics autofreq\n";
  std::vector<double> mantissas{1, 2, 5};
  if (hi / lo < 10) mantissas = {1, 1.5, 2, 3, 4, 5, 7};
  // gnuplot's autoscale widens a log axis to whole decades; label all of them.
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = static_cast<int>(std::ceil(std::log10(hi)));
  std::string tics;
  for (int e = first; e <= last; ++e)
    for (double m : mantissas) {
      const double v = m * std::pow(10.0, e);
      if (v <= std::pow(10.0, last) * 1.0001) tics += (tics.empty() ? "" : ", ") + gnuplot_number(v);
    }
  return "set ytics (" + tics + ")\n";
}

// `line`'s plot element, its data written into dir/data (a non-drawable y a gap); "" when it has no point to draw.
std::string line_element(const fs::path& dir, const PlotPanel& p, const PlotLine& line, std::vector<double>& values) {
  const bool bars = line.mark == PlotLine::Mark::error_bars;
  std::string text = std::string("# x y") + (bars ? " low high drawn_x" : "") +
                     (line.title.empty() ? "" : " of " + escape_control(line.title)) + "\n";
  bool any = false;
  for (std::size_t b = 0; b < line.blocks.size(); ++b) {
    // escaped: a newline in a run's name would start a data line
    if (b < line.block_names.size()) text += "# " + escape_control(line.block_names[b]) + "\n";
    for (const PlotPoint& pt : line.blocks[b]) {
      const bool drawable = std::isfinite(pt.y) && (!p.log_y || pt.y > 0);
      any = any || drawable;
      text += gnuplot_number(pt.x) + " " + gnuplot_number(drawable ? pt.y : kNoValue);
      if (bars)
        text +=
            fmt::format(" {} {} {}", gnuplot_number(pt.lo), gnuplot_number(pt.hi), gnuplot_number(pt.x * line.shift));
      text += "\n";
      values.insert(values.end(), {pt.y, pt.lo, pt.hi});
    }
    text += "\n";
  }
  if (!any) return "";
  const std::string file = "data/" + line.file + ".dat";
  write_plot_file(dir / file, text);
  const int point_types[] = {7, 5, 9, 13, 11, 4, 6, 8};  // gnuplot's pt: a marker of its own per dash
  const std::string with =
      bars ? fmt::format("5:2:3:4 with yerrorlines lw {} pt {} ps 1.2", line.width, point_types[line.style.dash % 8])
      : line.mark == PlotLine::Mark::cross ? fmt::format("1:2 with points pt 2 ps 2 lw {}", line.width)
                                           : fmt::format("1:2 with lines lw {}", line.width);
  return fmt::format("{} using {} dt {} lc rgb '{}' {}", gnuplot_string(file), with, dash_pattern(line.style.dash),
                     line.style.colour, line.title.empty() ? "notitle" : "title " + gnuplot_string(line.title));
}

// A panel's commands: every axis setting said again (nothing carries over from the panel before), then the plot.
std::string panel_commands(const fs::path& dir, const PlotPanel& p) {
  std::vector<double> values;
  std::vector<std::string> elements;
  for (const PlotLine& line : p.lines)
    if (std::string e = line_element(dir, p, line, values); !e.empty()) elements.push_back(std::move(e));
  std::string out = "set title " + gnuplot_string(p.title) + "\nset xlabel " + gnuplot_string(p.x_label) +
                    "\nset ylabel " + gnuplot_string(p.y_label) + "\nset xrange [*:*]\nset xtics autofreq\n";
  if (elements.empty())
    return out +
           "unset logscale\nset yrange [*:*]\nset ytics autofreq\nset label 1 \"no data\" at graph 0.5, 0.5 "
           "center\nplot [0:1] [0:1] NaN notitle\nunset label 1\n";
  out += p.log_x ? fmt::format("set logscale x {}\n", p.log_x) : "unset logscale x\n";
  if (!p.x_tics.empty()) {
    std::string tics;
    for (double x : p.x_tics) tics += (tics.empty() ? "" : ", ") + fmt::format("\"{:g}\" {}", x, gnuplot_number(x));
    out += "set xtics (" + tics + ")\n";
    // Room on both sides of the first and last x so their error bars show.
    if (p.log_x)
      out += fmt::format("set xrange [{}:{}]\n", gnuplot_number(p.x_tics.front() / 1.25),
                         gnuplot_number(p.x_tics.back() * 1.25));
  }
  out += p.pad_y && p.log_y ? "set offsets 0, 0, graph 0.04, graph 0.04\n" : "set offsets 0, 0, 0, 0\n";
  out += p.log_y ? "set logscale y\n" + log_tics(values, p.y_max) : "unset logscale y\nset ytics autofreq\n";
  // Losses, entropies and norms are >= 0 (an sd bar may reach below).
  out += std::isfinite(p.y_max) ? fmt::format("set yrange [*:{}]\n", gnuplot_number(p.y_max))
         : p.log_y              ? "set yrange [*:*]\n"
                                : "set yrange [0:*]\n";
  for (const auto& [y, title] : p.references)
    elements.push_back(
        fmt::format("{} with lines dt 3 lw 1.5 lc rgb '#606060' title {}", gnuplot_number(y), gnuplot_string(title)));
  return out + fmt::format("plot {}\n", fmt::join(elements, ", \\\n     "));
}

// The figure's script, writing its data into dir/data: the panels once for the PNG and once for the SVG.
std::string figure_script(const fs::path& dir, const Plot& f) {
  std::string body =
      fmt::format("set multiplot layout {},{} title {} font ',12'\n", f.rows, f.cols, gnuplot_string(f.title));
  for (const PlotPanel& p : f.panels) body += panel_commands(dir, p);
  const bool one = f.panels.size() == 1;
  const std::size_t width = one ? 900 : std::max<std::size_t>(640 * f.cols, 1100),
                    height = one ? 560 : 380 * f.rows + 40;
  std::string out = "# Written by `xgrad compare`; re-run with `gnuplot " + f.name + ".gp` in this directory.\n";
  for (const std::string terminal : {"pngcairo", "svg"}) {
    const bool svg = terminal == "svg";
    out += fmt::format("set terminal {} size {},{} noenhanced font 'Sans,{}'{}\n", terminal, width, height,
                       svg ? 11 : 10, svg ? " background rgb 'white'" : "");
    out += "set output " + gnuplot_string(f.name + (svg ? ".svg" : ".png")) + "\n";
    out += "set key outside right top vertical font ',9' samplen 3\nset grid\nset format y '%g'\n";
    out += body + "unset multiplot\nset output\n\n";
  }
  return out;
}

// Writes the figures' data and scripts into `dir` (its data/ created, or std::runtime_error) and draws each with
// gnuplot if on PATH: into `drawn` (with its caption), or into `failed`. Returns what failed for the outcome's note,
// "<what> a.gp b.gp (see <dir>/gnuplot.log)", or "" when nothing did.
std::string draw_figures(const std::vector<Plot>& figures, const fs::path& dir, std::vector<PlotFigure>& drawn,
                         const std::string& what, std::vector<std::string> failed = {}) {
  std::error_code ec;
  fs::create_directories(dir / "data", ec);
  if (ec) throw std::runtime_error("cannot create " + (dir / "data").string() + ": " + ec.message());
  const bool have_gnuplot = gnuplot_available();
  for (const Plot& f : figures) {
    write_plot_file(dir / (f.name + ".gp"), figure_script(dir, f));
    if (have_gnuplot && draw_figure(dir, f.name))
      drawn.push_back({f.name, f.caption});
    else if (have_gnuplot)
      failed.push_back(f.name + ".gp");
  }
  if (failed.empty()) return "";
  return fmt::format("{} {} (see {})", what, fmt::join(failed, " "), (dir / "gnuplot.log").string());
}

// A summary figure in the model: one panel, its lines' drawable points; measured lines shifted a few percent along
// a log x so that error bars do not hide others.
Plot summary_plot(const SummaryFigure& f, std::vector<std::string>& warnings) {
  PlotPanel p{"",      f.x_label, f.y_label, !f.log_x ? 0 : f.name.find("_vs_d_k") != std::string::npos ? 2 : 10,
              f.log_y, true};
  const std::vector<LineStyle> styles = summary_styles(f, warnings);
  const auto n_measured = std::count_if(f.lines.begin(), f.lines.end(), [](const auto& l) { return !l.theory; });
  std::size_t j = 0;
  std::set<double> xs;
  for (std::size_t l = 0; l < f.lines.size(); ++l) {
    const SummaryLine& line = f.lines[l];
    // Theory, or a curve over many steps: a line, no points or error bars.
    const bool bars = !line.theory && f.tabulate;
    PlotLine out{line.label, fmt::format("{}_{}", f.name, l), styles[l], line.theory ? 1.5 : 2,
                 bars ? PlotLine::Mark::error_bars : PlotLine::Mark::none};
    const double offset = static_cast<double>(j) - 0.5 * static_cast<double>(n_measured - 1);
    out.shift = line.theory || !f.log_x ? 1.0 : std::pow(2.0, 0.05 * offset);
    std::vector<PlotPoint> points;
    for (const SummaryPoint& pt : line.points) {
      if (!std::isfinite(pt.x) || !std::isfinite(pt.y) || (f.log_x && pt.x <= 0) || (f.log_y && pt.y <= 0)) continue;
      // An error bar's low end at or below 0 cannot be drawn on a log axis: clipped to the point.
      points.push_back({pt.x, pt.y, std::isfinite(pt.lo) && (!f.log_y || pt.lo > 0) ? pt.lo : pt.y,
                        std::isfinite(pt.hi) ? pt.hi : pt.y});
      xs.insert(pt.x);
    }
    if (points.empty()) continue;
    if (!line.theory) ++j;
    out.blocks = {points};
    p.lines.push_back(std::move(out));
  }
  if (f.tabulate) p.x_tics.assign(xs.begin(), xs.end());
  return {f.name, f.title, f.caption, {p}};
}

// A quantity by step: a mean line per arm; `second` of a pair (W_k beside W_q) is dashed and lighter.
struct Quantity {
  std::string name;
  std::vector<double> RunSeries::*member;
  std::string suffix = "";
  bool second = false;
};

// A figure of quantities by step. `loss`: each run's own line too, a cross where one diverged, the loss threshold.
// Its title, y_label and caption are in report/text/figures.md.
struct StepSpec {
  std::string name;
  bool log_y;
  std::vector<Quantity> quantities;
  bool loss = false;
  std::string text(const std::string& key) const { return report::text("figures", name + "." + key); }
};

const std::vector<StepSpec>& step_specs() {
  static const std::vector<StepSpec> specs{
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

// The typical distance in steps between measured points (1 for a quantity logged every step): the median gap.
double median_gap(const std::vector<PlotPoint>& points) {
  if (points.size() < 2) return 1;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < points.size(); ++i) gaps.push_back(points[i].x - points[i - 1].x);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<long>(gaps.size() / 2), gaps.end());
  return std::max(1.0, gaps[gaps.size() / 2]);
}

// Mean over the arm's runs at each step of one series' finite values, smoothed as in report.html.
std::vector<PlotPoint> mean_over_runs(const Comparison& c, const ArmStats& arm, std::vector<double> RunSeries::*series,
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
  std::vector<PlotPoint> out;
  for (std::size_t i = 0; i < x.size(); ++i) out.push_back({x[i], y[i]});
  return out;
}

// Keeps the first point of each `stride`-step bucket and the last point.
std::vector<PlotPoint> thin(const std::vector<PlotPoint>& points, double stride) {
  if (stride <= 1) return points;
  std::vector<PlotPoint> out;
  const auto bucket = [&](std::size_t i) { return std::floor(points[i].x / stride); };
  for (std::size_t i = 0; i < points.size(); ++i)
    if (i == 0 || i + 1 == points.size() || bucket(i) != bucket(i - 1)) out.push_back(points[i]);
  return out;
}

// The arms of one panel: they differ only in scale mode.
struct ScaleGroup {
  std::string title;
  std::size_t d_k;
  std::vector<std::size_t> arms;
};

// A panel per group of arms that differ only in scale mode, each a scaled-vs-unscaled comparison, by d_k; `cols`
// set for a regular grid (every d_k has the same k > 1 panels: one row per d_k), else panels fill rows of three.
std::vector<ScaleGroup> arm_panels(const Comparison& c, std::size_t& cols) {
  const std::vector<std::string> omit = shared_label_parts(c.arms, {"scale"});
  const auto extra = distinguishing_keys(c.arms);
  std::vector<ScaleGroup> panels;
  for (const std::vector<std::size_t>& arms : arm_groups(c, "scale")) {
    const ArmStats& first = c.arms[arms.front()];
    panels.push_back({arm_label(first, extra, omit), first.d_k(), arms});
  }
  std::stable_sort(panels.begin(), panels.end(),
                   [](const ScaleGroup& x, const ScaleGroup& y) { return x.d_k < y.d_k; });
  std::map<std::size_t, std::size_t> per_d_k;
  for (const auto& p : panels) ++per_d_k[p.d_k];
  bool regular = per_d_k.size() > 1;
  for (const auto& [d_k, n] : per_d_k) regular = regular && n == per_d_k.begin()->second && n > 1 && n <= 4;
  cols = regular ? per_d_k.begin()->second : std::min<std::size_t>(panels.size(), 3);
  return panels;
}

std::string arm_title(const Comparison& c, const ArmStats& arm) {
  const std::size_t n = arm.runs.size();
  const auto n_diverged = std::count_if(arm.runs.begin(), arm.runs.end(), [&](auto i) { return c.runs[i].diverged; });
  return fmt::format("{} ({} run{}{}{})", scale_label(arm), n, n == 1 ? "" : "s",
                     arm.n_incomplete ? fmt::format(", {} incomplete", arm.n_incomplete) : std::string(),
                     n_diverged ? fmt::format(", {} diverged: not in the mean", n_diverged) : std::string());
}

// One figure of quantities by step being built; `gap`: the widest median gap between measured steps.
struct StepFigure {
  const Comparison& c;
  const StepSpec& spec;
  double half_width, stride_mean, stride_runs;  // the smoothing's, and the thinning strides of mean and run lines
  std::vector<std::string>& warnings;
  double gap = 1;
};

// Each run's loss (faint, a block per run) and a cross where one diverged, at its last loss by then. The loss axis tops
// at 1.5 × the highest initial loss, so a diverging run does not flatten the others (unless every run diverged: then
// the blow-up is the picture); `top` and `stable` gather that.
void add_run_losses(const StepFigure& f, std::size_t a, const LineStyle& style, PlotPanel& p,
                    std::vector<PlotLine>& crosses, double& top, bool& stable) {
  PlotLine runs{"", fmt::format("arm{}_runs", a), {"#99" + style.colour.substr(1), style.dash}, 0.8};
  PlotLine cross{f.c.arms[a].scale() + ": diverged", fmt::format("arm{}_diverged", a), {style.colour, 0}, 2};
  cross.mark = PlotLine::Mark::cross;
  cross.blocks.emplace_back();
  const auto positive = [](const PlotPoint& pt) { return std::isfinite(pt.y) && pt.y > 0; };
  for (auto i : f.c.arms[a].runs) {
    const RunRecord& run = f.c.runs[i];
    std::vector<PlotPoint> points;
    for (std::size_t r = 0; r < run.series.size(); ++r) points.push_back({run.series.step[r], run.series.loss[r]});
    runs.blocks.push_back(thin(points, f.stride_runs));
    runs.block_names.push_back(run.dir);
    const auto first = std::find_if(points.begin(), points.end(), positive);
    if (first != points.end()) top = std::max(top, 1.5 * first->y);
    const auto last = std::find_if(points.rbegin(), points.rend(), [&](const PlotPoint& pt) {  // its loss then
      return positive(pt) && pt.x <= static_cast<double>(run.diverged_step);
    });
    if (run.diverged && run.diverged_step >= 0 && last != points.rend())
      cross.blocks[0].push_back({static_cast<double>(run.diverged_step), last->y});
    stable = stable || !run.diverged;
  }
  p.lines.push_back(std::move(runs));
  crosses.push_back(std::move(cross));
}

PlotPanel step_panel(StepFigure& f, const ScaleGroup& arms) {
  PlotPanel p{arms.title, "step", f.spec.text("y_label"), 0, f.spec.log_y};
  std::vector<PlotLine> crosses;
  double top = 0;
  bool stable = false;
  for (auto a : arms.arms) {
    const LineStyle style = scaling_style(f.c.arms[a].scale(), f.warnings);
    if (f.spec.loss) add_run_losses(f, a, style, p, crosses, top, stable);
    for (const Quantity& q : f.spec.quantities) {
      const std::vector<PlotPoint> mean = mean_over_runs(f.c, f.c.arms[a], q.member, f.half_width);
      f.gap = std::max(f.gap, median_gap(mean));
      // The second quantity of a pair dashed in a lighter shade, the others in the scaling's style.
      p.lines.push_back({arm_title(f.c, f.c.arms[a]) + q.suffix, fmt::format("arm{}_{}", a, q.name),
                         q.second ? LineStyle{lighter(style.colour, 0.5), 1} : style, f.spec.loss ? 2.5 : 2});
      p.lines.back().blocks = {thin(mean, f.stride_mean)};
    }
  }
  if (stable && top > 0) p.y_max = top;
  for (PlotLine& cross : crosses) {
    for (PlotPoint& pt : cross.blocks[0])
      if (stable && top > 0) pt.y = std::min(pt.y, top / 1.1);
    p.lines.push_back(std::move(cross));
  }
  const double t = f.c.arms[arms.arms.front()].loss_threshold;
  if (f.spec.loss && t > 0 &&
      std::all_of(arms.arms.begin(), arms.arms.end(), [&](std::size_t a) { return f.c.arms[a].loss_threshold == t; }))
    p.references.push_back({t, "loss threshold " + train::format_number(t, 3)});
  return p;
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

}  // namespace

const std::vector<PlotFigure>& plot_figures() {
  static const std::vector<PlotFigure> figures = [] {
    std::vector<PlotFigure> f;
    for (const auto& s : step_specs()) f.push_back({s.name, s.text("caption")});
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
  double max_rows = 1;
  for (const auto& run : c.runs) max_rows = std::max(max_rows, static_cast<double>(run.series.size()));
  std::size_t cols = 1;
  const std::vector<ScaleGroup> panels = arm_panels(c, cols);
  std::vector<Plot> figures;
  for (const StepSpec& spec : step_specs()) {
    StepFigure f{
        c, spec, smoothing_half_width(c), std::ceil(max_rows / 1500.0), std::ceil(max_rows / 600.0), outcome.warnings};
    Plot& figure =
        figures.emplace_back(Plot{spec.name,
                                  "",
                                  spec.text("caption") + (spec.loss ? ". Scale modes: " + styles_text(c) : ""),
                                  {},
                                  cols,
                                  (panels.size() + cols - 1) / cols});
    for (const ScaleGroup& arms : panels) figure.panels.push_back(step_panel(f, arms));
    figure.title = spec.text("title") + smoothing_title(f);  // after the panels: it says their widest gap
  }
  std::error_code ec;
  fs::remove(fs::path(plots_dir) / "gnuplot.log", ec);
  outcome.note = draw_figures(figures, plots_dir, outcome.drawn, "gnuplot failed for:");
  if (!gnuplot_available())
    outcome.note = "gnuplot not found on PATH: plots skipped (data files and .gp scripts are in " + plots_dir +
                   "; install gnuplot-nox and run `gnuplot <figure>.gp` there)";
  return outcome;
}

void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir,
                         PlotOutcome& outcome) {
  std::vector<Plot> drawable;
  std::vector<std::string> unsafe;
  for (const SummaryFigure& f : figures) {
    if (is_safe_file_stem(f.name))
      drawable.push_back(summary_plot(f, outcome.warnings));
    else  // a preset's name built from the data without safe_file_stem
      unsafe.push_back(escape_control(f.name) + " (not a safe file name: nothing written)");
  }
  const std::string note =
      draw_figures(drawable, plots_dir, outcome.summary_drawn, "gnuplot failed for summary figure(s):", unsafe);
  if (!note.empty()) outcome.note += (outcome.note.empty() ? "" : "; ") + note;
}

}  // namespace xgrad::report
