#include "report/plots.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
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

namespace xgrad::report {

namespace fs = std::filesystem;

namespace {

struct Point {
  double step;
  double value;
};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0;
  void add(double v) {
    if (!std::isfinite(v) || v <= 0) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  void add(const Range& r) {
    lo = std::min(lo, r.lo);
    hi = std::max(hi, r.hi);
  }
  bool empty() const { return hi <= 0; }
};

enum class Kind { loss, grad_norm, entropy, score_std };

struct FigureSpec {
  Kind kind;
  std::string name;
  std::string title;
  std::string ylabel;
  bool log_y;
  std::string caption;  // for report.md
};

const std::vector<FigureSpec>& figure_specs() {
  static const std::vector<FigureSpec> specs{
      {Kind::loss, "loss", "Training loss by step; thin lines: each run, thick: mean over seeds",
       "loss (nats, log scale)", true,
       "One panel per group of arms identical in every setting but the scale mode (per d_k, and per any other "
       "setting that differs, named in the panel title), scale modes in colour "
       "(red: unscaled, blue: sqrt_dk). Thin lines are single runs, thick lines the mean over the seeds that did "
       "not diverge. A cross marks where a run diverged (at its last loss, or at the top of the axis); the dotted "
       "line is the loss threshold"},
      {Kind::grad_norm, "grad_norm",
       "Gradient norm of W_q (solid, dark) and W_k (dashed, light), all layers; mean over seeds",
       "gradient norm (log scale)", true,
       "L2 norm over all layers of the gradient of the query (solid, the mode's colour) and key (dashed, a lighter "
       "shade of it) weights, mean over seeds. "
       "Steps where it was exactly zero cannot be drawn on a log axis and leave gaps (see the zero-grad columns)"},
      {Kind::entropy, "entropy", "Attention entropy, first layer, mean over heads and queries; mean over seeds",
       "entropy (nats)", false,
       "Mean attention entropy of the first layer: low means peaked (saturated) attention. Steps where the trainer "
       "did not measure attention are skipped"},
      {Kind::score_std, "score_std", "Std of the scaled attention scores (softmax input), first layer; mean over seeds",
       "score std (log scale)", true,
       "Standard deviation of the first layer's attention scores after the mode's scaling (the softmax input): the "
       "growth of the attention logits"},
  };
  return specs;
}

// How a scaling's lines are drawn: colour RRGGBB (no '#') and style 1 + its index in nn::scaling_dash_styles(),
// which picks both its dash pattern (dash_pattern) and its point type (point_type).
struct ScalingStyle {
  std::string colour;
  int dash = 1;
};

// gnuplot's dt of style `dash` (1-based, nn::scaling_dash_styles() order): solid, dashed, dotted, dash-dot,
// dash-dot-dot, then patterns of its own (long dash, long dash-dot, dash-dash-dot), so eight scalings drawn on one
// panel differ in dash as well as in colour; beyond eight the patterns repeat.
std::string dash_pattern(int dash) {
  static const char* const patterns[] = {"1", "2", "3", "4", "5", "(24,10)", "(24,8,3,8)", "(10,6,10,6,2,6)"};
  return patterns[(dash - 1) % 8];
}

// gnuplot's pt of style `dash`: filled circle, square, triangle, diamond, inverted triangle, then open square,
// circle, triangle: a marker of its own per style.
int point_type(int dash) {
  static const int types[] = {7, 5, 9, 13, 11, 4, 6, 8};
  return types[(dash - 1) % 8];
}

bool is_hex_colour(const std::string& s) {
  return s.size() == 7 && s[0] == '#' &&
         std::all_of(s.begin() + 1, s.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
}

// The registered entry's colour and dash style, the same in every panel. A scaling this build does not know (a run
// written by a build with its own scalings) gets a colour from a fixed palette (Okabe & Ito's colour-blind-safe
// hues), chosen by a hash of its name so it keeps its colour across comparisons, and a warning.
ScalingStyle style_of(const std::string& scale, std::vector<std::string>& warnings) {
  const nn::ScalingEntry* entry = Registry<nn::ScalingEntry>::instance().find(scale);
  if (entry && is_hex_colour(entry->colour)) {
    const auto& dashes = nn::scaling_dash_styles();
    const auto it = std::find(dashes.begin(), dashes.end(), entry->dash);
    return {entry->colour.substr(1), it == dashes.end() ? 1 : static_cast<int>(it - dashes.begin()) + 1};
  }
  static const std::vector<std::string> palette{"E69F00", "56B4E9", "009E73", "D55E00", "CC79A7", "0072B2", "000000"};
  std::uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char ch : scale) hash = (hash ^ ch) * 16777619u;
  const std::string colour = palette[hash % palette.size()];
  // Every arm and figure of the scale asks again: the reader needs to be told once.
  std::string warning = fmt::format(entry ? "scaling '{}' declares colour '{}', not #RRGGBB; drawn in #{}"
                                          : "scaling '{}' is not registered in this build{}; drawn in #{}",
                                    scale, entry ? entry->colour : std::string(), colour);
  if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end()) warnings.push_back(std::move(warning));
  return {colour, 1};
}

// `colour` (RRGGBB) mixed with white: W_k is drawn in a lighter shade of its scale mode's colour than W_q.
std::string lighter(const std::string& colour, double white) {
  std::string out;
  for (std::size_t i = 0; i + 1 < colour.size(); i += 2) {
    const double v = static_cast<double>(std::stoi(colour.substr(i, 2), nullptr, 16));
    out += fmt::format("{:02X}", static_cast<int>(std::lround(v + (255.0 - v) * white)));
  }
  return out;
}

// The typical distance in steps between measured points (1 for a quantity logged every step): the median gap.
double median_gap(const std::vector<Point>& points) {
  if (points.size() < 2) return 1;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < points.size(); ++i) gaps.push_back(points[i].step - points[i - 1].step);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<long>(gaps.size() / 2), gaps.end());
  return std::max(1.0, gaps[gaps.size() / 2]);
}

// Mean over the arm's runs at each step of the finite values of one series.
std::vector<Point> mean_over_runs(const Comparison& c, const ArmStats& arm, std::vector<double> RunSeries::*series) {
  std::map<double, std::pair<double, std::size_t>> by_step;
  for (auto i : arm.runs) {
    // A diverged run is left out of the mean, as of every statistic of its arm (its own line and cross still show
    // it): its last steps before the blow-up would decide the mean there.
    if (c.runs[i].diverged) continue;
    const RunSeries& s = c.runs[i].series;
    const std::vector<double>& v = s.*series;
    for (std::size_t r = 0; r < s.size(); ++r)
      if (std::isfinite(v[r]) && std::isfinite(s.step[r])) {
        auto& acc = by_step[s.step[r]];
        acc.first += v[r];
        ++acc.second;
      }
  }
  std::vector<Point> out;
  out.reserve(by_step.size());
  for (const auto& [step, acc] : by_step) out.push_back({step, acc.first / static_cast<double>(acc.second)});
  return out;
}

// Centred moving average over the points within half_width steps (points sorted by step). The window shrinks
// symmetrically at both ends so the first and last values stay what was measured (the value at step 0 matters).
std::vector<Point> smooth(const std::vector<Point>& points, double half_width) {
  if (half_width <= 0 || points.empty()) return points;
  std::vector<double> prefix(points.size() + 1, 0.0);
  for (std::size_t i = 0; i < points.size(); ++i) prefix[i + 1] = prefix[i] + points[i].value;
  auto by_step = [](const Point& p, double s) { return p.step < s; };
  std::vector<Point> out(points.size());
  const double first = points.front().step, last = points.back().step;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double s = points[i].step;
    const double h = std::min({half_width, s - first, last - s});
    const auto lo = std::lower_bound(points.begin(), points.end(), s - h, by_step) - points.begin();
    const auto hi =
        std::lower_bound(points.begin(), points.end(), std::nextafter(s + h, INFINITY), by_step) - points.begin();
    out[i] = {s, (prefix[hi] - prefix[lo]) / static_cast<double>(hi - lo)};
  }
  return out;
}

// Keeps the first point of each `stride`-step bucket and the last point.
std::vector<Point> thin(const std::vector<Point>& points, double stride) {
  if (stride <= 1) return points;
  std::vector<Point> out;
  double last_bucket = -1;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double bucket = std::floor(points[i].step / stride);
    if (bucket != last_bucket || i + 1 == points.size()) out.push_back(points[i]);
    last_bucket = bucket;
  }
  return out;
}

bool drawable(const std::vector<Point>& points, bool log_y) {
  for (const auto& p : points)
    if (std::isfinite(p.value) && (!log_y || p.value > 0)) return true;
  return false;
}

// The plot files are written into a directory of this process's own (the caller's staged one), by both compare
// and explain: errors name the file and the reason, the caller says which command it was.
std::ofstream open_for_writing(const fs::path& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(platform::system_error_text("writing " + path.string()));
  return out;
}

// Closes `out`, which a full disk may fail only when the last bytes are written.
void close_written(std::ofstream& out, const fs::path& path) {
  out.close();
  if (!out) throw std::runtime_error(platform::system_error_text("writing " + path.string()));
}

void write_points(const fs::path& path, const std::vector<Point>& points, bool log_y) {
  std::ofstream out = open_for_writing(path);
  out << "# step value\n";
  for (const auto& p : points)
    out << gnuplot_number(p.step) << " " << (log_y && !(p.value > 0) ? "NaN" : gnuplot_number(p.value)) << "\n";
  close_written(out, path);
}

// Every run's loss, one block per run (a blank line breaks the line between runs). Each diverged run adds
// (diverged step, its last finite loss) to `diverged`; `first_losses` gets each run's first finite loss.
bool write_run_losses(const Comparison& c, const ArmStats& arm, double stride, const fs::path& path,
                      std::vector<Point>& diverged, std::vector<double>& first_losses, Range& range) {
  std::ofstream out = open_for_writing(path);
  bool any = false;
  for (auto i : arm.runs) {
    const RunRecord& run = c.runs[i];
    out << "# " << escape_control(run.dir) << "\n";  // a newline in a name would start a data line
    std::vector<Point> points;
    for (std::size_t r = 0; r < run.series.size(); ++r) points.push_back({run.series.step[r], run.series.loss[r]});
    for (const auto& p : thin(points, stride)) {
      const bool ok = std::isfinite(p.value) && p.value > 0;
      out << gnuplot_number(p.step) << " " << (ok ? gnuplot_number(p.value) : "NaN") << "\n";
      any = any || ok;
      range.add(p.value);
    }
    out << "\n";
    for (const auto& p : points)
      if (std::isfinite(p.value) && p.value > 0) {
        first_losses.push_back(p.value);
        break;
      }
    if (run.diverged)
      for (auto p = points.rbegin(); p != points.rend(); ++p)
        if (std::isfinite(p->value) && p->value > 0) {
          diverged.push_back({static_cast<double>(run.diverged_step), p->value});
          break;
        }
  }
  close_written(out, path);
  return any;
}

std::string line_style(const std::string& colour, double width, bool faint, int dash = 1) {
  return fmt::format("with lines lw {} dt {} lc rgb '#{}{}'", width, dash_pattern(dash), faint ? "99" : "", colour);
}

// Log-axis tics: gnuplot labels only powers of ten, which leaves a loss axis from 1 to 6 with one label; over
// less than three decades, label 1-2-5 (and 3 over less than one decade) steps instead.
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

struct ArmData {
  std::string colour;                        // RRGGBB
  int dash = 1;                              // gnuplot dash type of the arm's scaling
  std::map<std::string, std::string> files;  // series name → data file, only for drawable series
  std::map<std::string, Range> ranges;       // series name → range of its positive values
  std::vector<Point> diverged;               // (diverged step, last finite loss) per diverged run
  std::vector<double> first_losses;          // each run's first finite loss
};

// The arms of one panel: they differ only in scale mode.
struct Panel {
  std::string title;
  std::size_t d_k;
  std::vector<std::size_t> arms;
};

}  // namespace

std::string scaling_colour(const std::string& scale) {
  std::vector<std::string> warnings;  // write_plots reports them
  return "#" + style_of(scale, warnings).colour;
}

const std::vector<PlotFigure>& plot_figures() {
  static const std::vector<PlotFigure> figures = [] {
    std::vector<PlotFigure> f;
    for (const auto& s : figure_specs()) f.push_back({s.name, s.caption});
    return f;
  }();
  return figures;
}

std::string gnuplot_number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : std::string("NaN"); }

std::string gnuplot_string(const std::string& s) {
  // Single quotes: gnuplot expands backticks (a shell command) and backslash escapes only inside double quotes, and
  // the terminals are set noenhanced. A quote cannot be doubled inside one (two doubled quotes in a row fail to
  // parse in gnuplot 5.4), so a string holding quotes is a concatenation of single-quoted parts and "\047", which
  // holds no backtick. A newline would end the command and a control character could reach a terminal through
  // gnuplot.log: escape_control writes them out visibly.
  const std::string shown = escape_control(s);
  if (shown.find('\'') == std::string::npos) return "'" + shown + "'";
  std::string out = "(", part;
  auto append = [&](const std::string& token) { out += (out.size() > 1 ? "." : "") + token; };
  for (char ch : shown) {
    if (ch != '\'') {
      part += ch;
      continue;
    }
    if (!part.empty()) append("'" + part + "'");
    part.clear();
    append("\"\\047\"");
  }
  if (!part.empty()) append("'" + part + "'");
  return out + ")";
}

bool gnuplot_available() { return !platform::find_program("gnuplot").empty(); }

namespace {

// One smoothing window and one thinning stride for all lines, from the longest run.
struct Smoothing {
  double half_width;                     // a window of ~1/75 of the run
  double stride_mean;                    // of the arms' mean lines
  double stride_runs;                    // of each run's loss line
  std::map<std::string, double> gap_of;  // series name → the widest median gap between measured steps of any arm
};

Smoothing smoothing_of(const Comparison& c) {
  double max_rows = 1;
  for (const auto& run : c.runs) max_rows = std::max(max_rows, static_cast<double>(run.series.size()));
  return {std::floor(max_rows / 150.0), std::ceil(max_rows / 1500.0), std::ceil(max_rows / 600.0), {}};
}

// Each arm's data files (its mean lines and its runs' losses) under dir/data, and what the figures need of them.
std::vector<ArmData> write_arm_data(const Comparison& c, const fs::path& dir, Smoothing& smoothing,
                                    std::vector<std::string>& warnings) {
  std::vector<ArmData> arms(c.arms.size());
  for (std::size_t a = 0; a < c.arms.size(); ++a) {
    const ArmStats& arm = c.arms[a];
    ArmData& d = arms[a];
    const ScalingStyle style = style_of(arm.scale(), warnings);
    d.colour = style.colour;
    d.dash = style.dash;
    const std::string stem = fmt::format("data/arm{}_", a);
    auto put = [&](const std::string& series, std::vector<double> RunSeries::*member, bool log_y) {
      const std::vector<Point> measured = mean_over_runs(c, arm, member);
      smoothing.gap_of[series] = std::max(smoothing.gap_of[series], median_gap(measured));
      const std::vector<Point> points = thin(smooth(measured, smoothing.half_width), smoothing.stride_mean);
      if (!drawable(points, log_y)) return;
      write_points(dir / (stem + series + ".dat"), points, log_y);
      d.files[series] = stem + series + ".dat";
      for (const auto& pt : points) d.ranges[series].add(pt.value);
    };
    put("loss", &RunSeries::loss, true);
    put("w_q", &RunSeries::grad_norm_w_q, true);
    put("w_k", &RunSeries::grad_norm_w_k, true);
    put("entropy", &RunSeries::entropy, false);
    put("score_std", &RunSeries::score_std, true);
    if (write_run_losses(c, arm, smoothing.stride_runs, dir / (stem + "runs.dat"), d.diverged, d.first_losses,
                         d.ranges["runs"]))
      d.files["runs"] = stem + "runs.dat";
  }
  return arms;
}

struct PanelGrid {
  std::vector<Panel> panels;
  std::size_t cols, rows;
};

// Panels: arms that differ only in scale mode (scale_groups), so each panel is a scaled-vs-unscaled comparison;
// each d_k starts a new row. Titles leave out the settings every arm shares.
PanelGrid panel_grid(const Comparison& c) {
  std::vector<std::string> omit{"scale"};
  for (const std::string key : {"optimizer", "lr"}) {
    bool same = true;
    for (const ArmStats& arm : c.arms)
      same = same && setting_text(arm.settings, key) == setting_text(c.arms[0].settings, key);
    if (same) omit.push_back(key);
  }
  const auto extra = distinguishing_keys(c.arms);
  PanelGrid g;
  for (const ScaleGroup& group : scale_groups(c.arms)) {
    const ArmStats& first = c.arms[group.arms.front()];
    g.panels.push_back({arm_label(first, extra, omit), first.d_k(), group.arms});
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

// smooth() averages the points within +-half_width steps; for a quantity measured every `gap` steps (attention
// statistics: every log_every steps) that window holds fewer points, possibly one, and the title says so.
std::string smoothing_title(const FigureSpec& spec, const Smoothing& s) {
  if (s.half_width <= 0) return "";
  std::vector<std::string> series{"loss"};
  if (spec.kind == Kind::grad_norm) series = {"w_q", "w_k"};
  if (spec.kind == Kind::entropy) series = {"entropy"};
  if (spec.kind == Kind::score_std) series = {"score_std"};
  double gap = 1;
  for (const auto& name : series)
    if (s.gap_of.count(name)) gap = std::max(gap, s.gap_of.at(name));
  const double window = 2 * s.half_width + 1;
  if (gap <= 1) return fmt::format("; means smoothed over {:.0f} steps", window);
  const double points = std::floor(2 * s.half_width / gap) + 1;
  if (points < 2) return fmt::format("; means not smoothed (measured every {:.0f} steps)", gap);
  return fmt::format("; means smoothed over {:.0f} steps ({:.0f} measurements, one every {:.0f} steps)", window, points,
                     gap);
}

// An arm's line title: its scaling, runs, incomplete and diverged runs.
std::string arm_title(const Comparison& c, const ArmStats& arm) {
  const std::size_t n = arm.runs.size();
  std::size_t n_diverged = 0;
  for (auto i : arm.runs) n_diverged += c.runs[i].diverged ? 1 : 0;
  return fmt::format("{} ({} run{}{}{})", scale_label(arm), n, n == 1 ? "" : "s",
                     arm.n_incomplete ? fmt::format(", {} incomplete", arm.n_incomplete) : std::string(),
                     n_diverged ? fmt::format(", {} diverged: not in the mean", n_diverged) : std::string());
}

// What one panel of a figure plots: a line per arm and series, the range of their values, and for the loss the
// top of the axis, 1.5 × the highest initial loss, so a diverging run does not flatten the others (unless every
// run diverged: then the blow-up is the picture).
struct PanelLines {
  std::vector<std::string> elements;
  Range range;
  double y_max = 0;
  bool stable = false;
};

void add_arm_lines(const FigureSpec& spec, const Comparison& c, const ArmStats& arm, const ArmData& d, PanelLines& p) {
  const std::string title = arm_title(c, arm);
  auto has = [&](const std::string& s) { return d.files.count(s) > 0; };
  auto add_range = [&](std::initializer_list<const char*> series) {
    for (const std::string s : series)
      if (d.ranges.count(s)) p.range.add(d.ranges.at(s));
  };
  switch (spec.kind) {
    case Kind::loss:
      for (double l : d.first_losses) p.y_max = std::max(p.y_max, 1.5 * l);
      for (auto i : arm.runs) p.stable = p.stable || !c.runs[i].diverged;
      add_range({"runs", "loss"});
      if (has("runs"))
        p.elements.push_back(
            fmt::format("'{}' using 1:2 {} notitle", d.files.at("runs"), line_style(d.colour, 0.8, true, d.dash)));
      if (has("loss"))
        p.elements.push_back(fmt::format("'{}' using 1:2 {} title {}", d.files.at("loss"),
                                         line_style(d.colour, 2.5, false, d.dash), gnuplot_string(title)));
      break;
    case Kind::grad_norm:
      add_range({"w_q", "w_k"});
      if (has("w_q"))
        p.elements.push_back(fmt::format("'{}' using 1:2 {} title {}", d.files.at("w_q"),
                                         line_style(d.colour, 2, false, d.dash), gnuplot_string(title + ": W_q")));
      if (has("w_k"))
        p.elements.push_back(fmt::format("'{}' using 1:2 {} title {}", d.files.at("w_k"),
                                         line_style(lighter(d.colour, 0.5), 2, false, 2),
                                         gnuplot_string(title + ": W_k")));
      break;
    case Kind::entropy:
    case Kind::score_std: {
      const std::string series = spec.kind == Kind::entropy ? "entropy" : "score_std";
      add_range({series.c_str()});
      if (has(series))
        p.elements.push_back(fmt::format("'{}' using 1:2 {} title {}", d.files.at(series),
                                         line_style(d.colour, 2, false, d.dash), gnuplot_string(title)));
      break;
    }
  }
}

// The loss panel's extras: a cross per diverged run at the step it stopped (at its last loss or the top of the
// axis), the threshold line when the panel's arms share it (arms of different tasks have different ones), and the
// y range.
std::string loss_panel_extras(const Comparison& c, const Panel& panel, const std::vector<ArmData>& arms,
                              const fs::path& dir, PanelLines& p) {
  if (!p.stable) p.y_max = 0;
  for (auto a : panel.arms) {
    const ArmData& d = arms[a];
    if (d.diverged.empty()) continue;
    std::vector<Point> marks = d.diverged;
    for (auto& m : marks)
      if (p.y_max > 0) m.value = std::min(m.value, p.y_max / 1.1);
    const std::string file = fmt::format("data/arm{}_diverged.dat", a);
    write_points(dir / file, marks, true);
    p.elements.push_back(fmt::format("'{}' using 1:2 with points pt 2 ps 2 lw 2 lc rgb '#{}' title {}", file, d.colour,
                                     gnuplot_string(c.arms[a].scale() + ": diverged")));
  }
  const double t = c.arms[panel.arms.front()].loss_threshold;
  bool shared = t > 0;
  for (auto a : panel.arms) shared = shared && c.arms[a].loss_threshold == t;
  if (shared)
    p.elements.push_back(fmt::format("{} with lines dt 3 lw 1.5 lc rgb '#606060' title {}", gnuplot_number(t),
                                     gnuplot_string("loss threshold " + train::format_number(t, 3))));
  if (p.y_max > 0) p.range.hi = std::min(p.range.hi, p.y_max);
  return p.y_max > 0 ? fmt::format("set yrange [*:{}]\n", gnuplot_number(p.y_max)) : "set yrange [*:*]\n";
}

// The gnuplot commands of one panel of a figure.
std::string panel_commands(const FigureSpec& spec, const Comparison& c, const Panel& panel,
                           const std::vector<ArmData>& arms, const fs::path& dir) {
  PanelLines p;
  for (auto a : panel.arms) add_arm_lines(spec, c, c.arms[a], arms[a], p);
  std::string body = "set title " + gnuplot_string(panel.title) + "\n";
  body += "set xlabel \"step\"\nset ylabel " + gnuplot_string(spec.ylabel) + "\n";
  body += spec.log_y ? "set logscale y\n" : "unset logscale y\n";
  if (p.elements.empty())
    return body +
           "unset logscale y\nset label 1 \"no data\" at graph 0.5, 0.5 center\nplot [0:1] [0:1] NaN notitle\n"
           "unset label 1\n";
  if (spec.kind == Kind::loss)
    body += loss_panel_extras(c, panel, arms, dir, p);
  else
    body += spec.kind == Kind::entropy ? "set yrange [0:*]\n" : "set yrange [*:*]\n";
  if (spec.log_y) body += log_tics(p.range);
  body += "plot ";
  for (std::size_t i = 0; i < p.elements.size(); ++i) body += (i ? ", \\\n     " : "") + p.elements[i];
  return body + "\n";
}

// The figure's script: the panels once for the PNG and once for the SVG.
std::string figure_script(const FigureSpec& spec, const PanelGrid& grid, const std::string& body,
                          const std::string& title) {
  const std::size_t width = std::max<std::size_t>(640 * grid.cols, 1100), height = 380 * grid.rows + 40;
  std::string script = "# Written by `xgrad compare`; re-run with `gnuplot " + spec.name + ".gp` in this directory.\n";
  for (const auto& [terminal, extension] :
       std::vector<std::pair<std::string, std::string>>{{"pngcairo", "png"}, {"svg", "svg"}}) {
    script += fmt::format("set terminal {} size {},{} noenhanced font 'Sans,{}'{}\n", terminal, width, height,
                          terminal == "svg" ? 11 : 10, terminal == "svg" ? " background rgb 'white'" : "");
    script += "set output " + gnuplot_string(spec.name + "." + extension) + "\n";
    script += "set key outside right top vertical font ',9' samplen 2\nset grid\nset format y '%g'\n";
    script += fmt::format("set multiplot layout {},{} title {} font ',12'\n", grid.rows, grid.cols, title);
    script += body;
    script += "unset multiplot\nset output\n\n";
  }
  return script;
}

void write_script(const fs::path& path, const std::string& script) {
  std::ofstream out = open_for_writing(path);
  out << script;
  close_written(out, path);
}

}  // namespace

bool draw_figure(const std::string& plots_dir, const std::string& name) {
  const fs::path dir(plots_dir);
  std::error_code ec;
  // Names come from the data (an optimizer, a setting's value): one that could be an option, a path or a pattern
  // to gnuplot is never handed to it.
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

namespace {

std::string plots_note(bool have_gnuplot, const std::vector<std::string>& failed, const fs::path& dir) {
  if (!have_gnuplot)
    return "gnuplot not found on PATH: plots skipped (data files and .gp scripts are in " + dir.string() +
           "; install gnuplot-nox and run `gnuplot <figure>.gp` there)";
  if (failed.empty()) return "";
  std::string note = "gnuplot failed for:";
  for (const auto& f : failed) note += " " + f + ".gp";
  return note + " (see " + (dir / "gnuplot.log").string() + ")";
}

}  // namespace

PlotOutcome write_plots(const Comparison& c, const std::string& plots_dir) {
  PlotOutcome outcome;
  const fs::path dir(plots_dir);
  std::error_code ec;
  fs::create_directories(dir / "data", ec);
  if (ec) throw std::runtime_error("cannot create " + (dir / "data").string() + ": " + ec.message());
  Smoothing smoothing = smoothing_of(c);
  const std::vector<ArmData> arms = write_arm_data(c, dir, smoothing, outcome.warnings);
  const PanelGrid grid = panel_grid(c);
  std::vector<std::string> failed;
  const bool have_gnuplot = gnuplot_available();
  fs::remove(dir / "gnuplot.log", ec);
  for (const FigureSpec& spec : figure_specs()) {
    std::string body;
    for (const Panel& panel : grid.panels) body += panel_commands(spec, c, panel, arms, dir);
    write_script(dir / (spec.name + ".gp"),
                 figure_script(spec, grid, body, gnuplot_string(spec.title + smoothing_title(spec, smoothing))));
    if (!have_gnuplot) continue;
    if (draw_figure(dir, spec.name))
      outcome.drawn.push_back({spec.name, spec.caption});
    else
      failed.push_back(spec.name);
  }
  outcome.note = plots_note(have_gnuplot, failed, dir);
  return outcome;
}

namespace {

// What a summary figure plots: a line per drawable SummaryLine, the x values, the range of y with error bars.
struct SummaryLines {
  std::vector<std::string> elements;
  std::set<double> xs;
  Range range;
};

// The drawable points of a line: finite, and > 0 on a log axis.
std::vector<const SummaryPoint*> drawable_points(const SummaryFigure& f, const SummaryLine& line) {
  std::vector<const SummaryPoint*> points;
  for (const SummaryPoint& p : line.points)
    if (std::isfinite(p.x) && std::isfinite(p.y) && (!f.log_x || p.x > 0) && (!f.log_y || p.y > 0))
      points.push_back(&p);
  return points;
}

// The line's data file: x y low high drawn_x, drawn_x = x · shift.
void write_summary_data(const fs::path& path, const SummaryFigure& f, const SummaryLine& line,
                        const std::vector<const SummaryPoint*>& points, double shift, SummaryLines& s) {
  std::ofstream out = open_for_writing(path);
  out << "# " << escape_control(line.label) << "\n# x y low high drawn_x\n";
  for (const SummaryPoint* p : points) {
    // An error bar's low end at or below 0 cannot be drawn on a log axis: clipped to the point.
    const double lo = std::isfinite(p->lo) && (!f.log_y || p->lo > 0) ? p->lo : p->y;
    const double hi = std::isfinite(p->hi) ? p->hi : p->y;
    out << gnuplot_number(p->x) << " " << gnuplot_number(p->y) << " " << gnuplot_number(lo) << " " << gnuplot_number(hi)
        << " " << gnuplot_number(p->x * shift) << "\n";
    s.xs.insert(p->x);
    s.range.add(p->y);
    s.range.add(lo);
    s.range.add(hi);
  }
  close_written(out, path);
}

// The plot element of a measured line: the scaling's own dash and point; further lines of one scaling (other
// optimizers, widths) the next styles (`k` of them so far).
std::string summary_element(const SummaryFigure& f, const SummaryLine& line, const std::string& file,
                            const ScalingStyle& style, int k) {
  const int dash = (style.dash - 1 + k) % 8 + 1;
  if (!f.tabulate)  // a curve over many steps: a line, no points or error bars
    return fmt::format("{} using 1:2 with lines lw 2 dt {} lc rgb '#{}' title {}", gnuplot_string(file),
                       dash_pattern(dash), style.colour, gnuplot_string(line.label));
  return fmt::format(
      "{} using 5:2:3:4 with yerrorlines lw 2 dt {} pt {} ps 1.2 lc rgb '#{}' "
      "title {}",
      gnuplot_string(file), dash_pattern(dash), point_type(dash), style.colour, gnuplot_string(line.label));
}

// Every line's data file and plot element. Lines share their x values; each is drawn shifted by a few percent of
// the log x axis so that error bars at one d_k (lr) do not hide each other. The data files keep the true x in
// column 1.
SummaryLines write_summary_lines(const SummaryFigure& f, const fs::path& dir, std::vector<std::string>& warnings) {
  SummaryLines s;
  std::map<std::string, int> lines_of_scale;  // how many lines of each scaling so far: their point type
  std::size_t n_measured = 0, j = 0;
  for (const SummaryLine& line : f.lines) n_measured += line.theory ? 0 : 1;
  for (std::size_t l = 0; l < f.lines.size(); ++l) {
    const SummaryLine& line = f.lines[l];
    const std::vector<const SummaryPoint*> points = drawable_points(f, line);
    if (points.empty()) continue;
    const std::string file = fmt::format("data/{}_{}.dat", f.name, l);
    const double offset = static_cast<double>(j) - 0.5 * static_cast<double>(n_measured - 1);
    const double shift = line.theory || !f.log_x ? 1.0 : std::pow(2.0, 0.05 * offset);
    if (!line.theory) ++j;
    write_summary_data(dir / file, f, line, points, shift, s);
    const ScalingStyle style = style_of(line.scale, warnings);
    if (line.theory)
      s.elements.push_back(fmt::format("{} using 1:2 with lines dt 2 lw 1.5 lc rgb '#{}' title {}",
                                       gnuplot_string(file), lighter(style.colour, 0.3), gnuplot_string(line.label)));
    else
      s.elements.push_back(summary_element(f, line, file, style, lines_of_scale[line.scale]++));
  }
  return s;
}

// The figure's commands: title, axes (tics at the measured x of a table), and the plot.
std::string summary_body(const SummaryFigure& f, const SummaryLines& s) {
  std::string body;
  body += "set title " + gnuplot_string(f.title) + "\n";
  body += "set xlabel " + gnuplot_string(f.x_label) + "\nset ylabel " + gnuplot_string(f.y_label) + "\n";
  const bool d_k_axis = f.name.find("_vs_d_k") != std::string::npos;
  if (f.log_x) body += d_k_axis ? "set logscale x 2\n" : "set logscale x 10\n";
  if (!s.xs.empty() && f.tabulate) {
    std::string tics;
    for (double x : s.xs) tics += (tics.empty() ? "" : ", ") + fmt::format("\"{:g}\" {}", x, gnuplot_number(x));
    body += "set xtics (" + tics + ")\n";
    // Room on both sides of the first and last x so their error bars show.
    const double lo = *s.xs.begin(), hi = *s.xs.rbegin();
    const double pad = f.log_x ? 1.25 : 0;
    if (f.log_x && lo > 0)
      body += fmt::format("set xrange [{}:{}]\n", gnuplot_number(lo / pad), gnuplot_number(hi * pad));
  }
  if (f.log_y)
    body += "set logscale y\nset offsets 0, 0, graph 0.04, graph 0.04\n" + log_tics(s.range);
  else
    body += "set yrange [0:*]\n";  // losses and entropies are >= 0 (an sd bar may reach below)
  if (s.elements.empty())
    return body + "unset logscale\nset label 1 \"no data\" at graph 0.5, 0.5 center\nplot [0:1] [0:1] NaN notitle\n";
  body += "plot ";
  for (std::size_t i = 0; i < s.elements.size(); ++i) body += (i ? ", \\\n     " : "") + s.elements[i];
  return body + "\n";
}

std::string summary_script(const std::string& name, const std::string& body) {
  std::string script = "# Written by `xgrad compare`; re-run with `gnuplot " + name + ".gp` in this directory.\n";
  for (const auto& [terminal, extension] :
       std::vector<std::pair<std::string, std::string>>{{"pngcairo", "png"}, {"svg", "svg"}}) {
    script += fmt::format("set terminal {} size 900,560 noenhanced font 'Sans,{}'{}\n", terminal,
                          terminal == "svg" ? 11 : 10, terminal == "svg" ? " background rgb 'white'" : "");
    script += "set output " + gnuplot_string(name + "." + extension) + "\n";
    script += "set key outside right top vertical font ',9' samplen 3\nset grid\nset format y '%g'\n";
    script += body;
    script +=
        "set output\nunset logscale\nset xtics autofreq\nset ytics autofreq\nset offsets 0, 0, 0, 0\n"
        "set xrange [*:*]\nset yrange [*:*]\n\n";
  }
  return script;
}

}  // namespace

void write_summary_plots(const std::vector<SummaryFigure>& figures, const std::string& plots_dir,
                         PlotOutcome& outcome) {
  const fs::path dir(plots_dir);
  std::error_code ec;
  fs::create_directories(dir / "data", ec);
  if (ec) throw std::runtime_error("cannot create " + (dir / "data").string() + ": " + ec.message());
  const bool have_gnuplot = gnuplot_available();
  std::vector<std::string> failed;
  for (const SummaryFigure& f : figures) {
    if (!is_safe_file_stem(f.name)) {  // a preset's name built from the data without safe_file_stem
      failed.push_back(escape_control(f.name) + " (not a safe file name: nothing written)");
      continue;
    }
    const SummaryLines lines = write_summary_lines(f, dir, outcome.warnings);
    write_script(dir / (f.name + ".gp"), summary_script(f.name, summary_body(f, lines)));
    if (!have_gnuplot) continue;
    if (draw_figure(dir, f.name))
      outcome.summary_drawn.push_back({f.name, f.caption});
    else
      failed.push_back(f.name + ".gp");
  }
  if (!failed.empty()) {
    std::string note = "gnuplot failed for summary figure(s):";
    for (const auto& f : failed) note += " " + f;
    note += " (see " + (dir / "gnuplot.log").string() + ")";
    outcome.note += (outcome.note.empty() ? "" : "; ") + note;
  }
}

}  // namespace xgrad::report
