#include "report/tables.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "common/escape.h"

namespace xgrad::report {
using train::format_number;

namespace {

// Display width of UTF-8 text: one per code point ("±", "≤" are one column but two or three bytes).
std::size_t width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
}

// Columns whose every cell is a number (or a stand-in for one: "—", "never", "n/a", "inf") are right-aligned.
std::vector<bool> numeric_columns(const Table& t) {
  std::vector<bool> numeric(t.header.size(), !t.rows.empty());
  for (const auto& row : t.rows)
    for (std::size_t i = 0; i < row.size() && i < numeric.size(); ++i)
      numeric[i] = numeric[i] && !row[i].empty() &&
                   (std::isdigit(static_cast<unsigned char>(row[i][0])) || row[i][0] == '-' || row[i] == "—" ||
                    row[i] == "never" || row[i] == "n/a" || row[i] == "inf");
  return numeric;
}

// The one loss threshold every arm shares, or NaN when they differ (different tasks have different chance losses).
double common_loss_threshold(const Comparison& c) {
  double t = kNoValue;
  for (const ArmStats& arm : c.arms)
    if (std::isnan(t))
      t = arm.loss_threshold;
    else if (arm.loss_threshold != t)
      return kNoValue;
  return t;
}

// The settings columns both tables start with: d_k, scale, optimizer, lr (arm table only), the distinguishing keys.
std::vector<Column<ArmStats>> setting_columns(const Comparison& c, bool with_lr) {
  std::vector<std::string> keys{"d_k", "scale", "optimizer"};
  if (with_lr) keys.push_back("lr");
  for (const auto& k : distinguishing_keys(c.arms)) keys.push_back(k);
  std::vector<Column<ArmStats>> columns;
  for (const std::string& k : keys)
    columns.push_back(
        {k, "setting", [k](const ArmStats& arm) {
           return k == "scale" ? arm.scale() : k == "optimizer" ? arm.optimizer() : setting_text(arm.settings, k);
         }});
  return columns;
}

}  // namespace

std::string Table::text() const {
  // Cells hold data (run names, setting values): a newline in one would forge a row, an escape move the cursor.
  Table shown = *this;
  for (std::string& cell : shown.header) cell = escape_name(cell);
  for (auto& row : shown.rows)
    for (std::string& cell : row) cell = escape_name(cell);
  // A longer cell is printed whole, unpadded, so that one long name does not pad every other row to its length.
  std::vector<std::size_t> w(shown.header.size(), 0);
  for (std::size_t i = 0; i < shown.header.size(); ++i) w[i] = std::min(width(shown.header[i]), kMaxPaddedWidth);
  for (const auto& row : shown.rows)
    for (std::size_t i = 0; i < row.size() && i < w.size(); ++i)
      w[i] = std::max(w[i], std::min(width(row[i]), kMaxPaddedWidth));
  const std::vector<bool> numeric = numeric_columns(shown);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size() && i < w.size(); ++i) {
      const std::string pad(w[i] - std::min(w[i], width(cells[i])), ' ');
      out += (i ? "  " : "") + (numeric[i] ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : ""));
    }
    return out + "\n";
  };
  std::size_t total = 0;
  for (auto x : w) total += x;
  std::string out = line(shown.header) + std::string(total + 2 * (w.empty() ? 0 : w.size() - 1), '-') + "\n";
  for (const auto& row : shown.rows) out += line(row);
  return out;
}

std::string markdown_escape(const std::string& text) {
  std::string one_line = text;  // CR and LF would end the row or item
  std::replace_if(
      one_line.begin(), one_line.end(), [](char ch) { return ch == '\n' || ch == '\r'; }, ' ');
  // A name's ANSI escape would act on a terminal that shows report.md: written out as escape_control does.
  std::string out;
  std::size_t backslashes = 0;  // just before ch; a '|' after an odd number of them is escaped already
  for (const char ch : escape_control(one_line)) {
    out += ch == '|' && backslashes % 2 == 0 ? "\\|" : ch == '<' ? "&lt;" : std::string(1, ch);
    backslashes = ch == '\\' ? backslashes + 1 : 0;
  }
  return out;
}

std::string markdown_text(const std::string& text, bool table_cell) {
  const std::string_view markup = table_cell ? "\\`*_[]>#!~" : "\\`*_[]<>#|!~";
  std::string out;
  for (const char ch : escape_invalid_utf8(text))
    if (ch == '\n' || ch == '\r')
      out += ' ';
    else
      out += (markup.find(ch) != std::string_view::npos ? "\\" : "") + std::string(1, ch);
  return out;
}

std::string markdown_name(const std::string& name) { return markdown_text(escape_name(name), true); }

std::string Table::markdown() const {
  auto line = [&](const std::vector<std::string>& cells, bool body) {
    std::string out = "|";
    for (std::size_t i = 0; i < cells.size(); ++i) {  // cells and a setting's header (config.json's key) are data
      const std::string cell = markdown_escape(plain_cells ? markdown_text(cells[i], true) : cells[i]);
      const bool link = !body && i < header_links.size() && !header_links[i].empty();
      out += " " + (link ? "[" + cell + "](#" + header_links[i] + ")" : cell) + " |";
    }
    return out + "\n";
  };
  std::string out = line(header, false) + "|";
  for (const bool numeric : numeric_columns(*this)) out += numeric ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& row : rows) out += line(row, true);
  return out;
}

std::string format_mean_sd(const MeanSd& m, int decimals) {
  if (m.n == 0) return "—";
  return format_number(m.mean, decimals) + (m.n == 1 ? "" : " ± " + format_number(m.sd, decimals));
}

std::string short_number(double v) { return std::isfinite(v) ? fmt::format("{:.2g}", v) : std::string("—"); }

std::string format_percent(double fraction) {
  if (std::isnan(fraction)) return "—";
  if (fraction == 0.0 || fraction == 1.0) return fraction == 0.0 ? "0%" : "100%";
  return fmt::format("{:.1f}%", 100.0 * fraction);
}

std::string format_steps(std::size_t reached, std::size_t n, double mean_step) {
  if (n == 0) return "—";  // every run diverged: no run to reach it
  if (reached == 0) return "never";
  const std::string step = fmt::format("{:.0f}", mean_step);
  return reached == n ? step : fmt::format("{} ({}/{})", step, reached, n);
}

std::string format_diverged(const ArmStats& arm) {
  std::vector<long> sorted = arm.diverged_steps;
  std::sort(sorted.begin(), sorted.end());
  const std::string out = fmt::format("{}/{}", sorted.size(), arm.used.size());
  if (sorted.empty()) return out;
  std::vector<std::string> steps;  // a step metrics.csv did not say (a NaN step cell) shown as "?"
  for (const long s : sorted) steps.push_back(s >= 0 ? std::to_string(s) : "?");
  return fmt::format("{} ({} {})", out, steps.size() == 1 ? "step" : "steps", fmt::join(steps, ", "));
}

std::string format_seeds(const ArmStats& arm) {
  std::vector<std::string> notes;
  if (arm.used.size() != arm.n_seeds) notes.push_back(fmt::format("{} runs", arm.used.size()));
  if (arm.only_incomplete())
    notes.push_back("incomplete");
  else if (arm.n_incomplete > 0)
    notes.push_back(fmt::format("+{} incomplete", arm.n_incomplete));
  return std::to_string(arm.n_seeds) + (notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, ", ")));
}

std::string arm_label(const ArmStats& arm, const std::vector<std::string>& extra_keys,
                      const std::vector<std::string>& omit) {
  const auto shown = [&](const char* part) { return std::find(omit.begin(), omit.end(), part) == omit.end(); };
  std::vector<std::string> parts;
  if (shown("d_k")) parts.push_back("d_k=" + setting_text(arm.settings, "d_k"));
  if (shown("scale")) parts.push_back(arm.scale());
  if (shown("optimizer")) parts.push_back(arm.optimizer());
  if (shown("lr")) parts.push_back("lr=" + setting_text(arm.settings, "lr"));
  for (const auto& k : extra_keys) parts.push_back(k + "=" + setting_text(arm.settings, k));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::vector<std::string> shared_label_parts(const std::vector<ArmStats>& arms, std::vector<std::string> omit) {
  for (const std::string key : {"optimizer", "lr"})
    if (std::all_of(arms.begin(), arms.end(), [&](const ArmStats& arm) {
          return setting_text(arm.settings, key) == setting_text(arms.front().settings, key);
        }))
      omit.push_back(key);
  return omit;
}

std::string glossary_anchor(const std::string& term) {
  std::string out = "g-";
  for (const char ch : term)
    if (ch != '{' && ch != '}')
      out += ch == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

Table arm_table(const Comparison& c) {
  const double threshold = common_loss_threshold(c);
  const std::string near_zero = fmt::format("{:g}", train::kNearZeroGradFraction);
  using Cell = std::function<std::string(const ArmStats&)>;
  const auto sd = [](const char* statistic) -> Cell {
    return [statistic](const ArmStats& arm) { return format_mean_sd(arm.stat(statistic)); };
  };
  const auto percent = [](const char* statistic) -> Cell {
    return [statistic](const ArmStats& arm) { return format_percent(arm.stat(statistic).mean); };
  };
  const auto steps = [](const char* statistic) -> Cell {
    return [statistic](const ArmStats& arm) {
      return format_steps(arm.stat(statistic).n, arm.kept.size(), arm.stat(statistic).mean);
    };
  };
  std::vector<Column<ArmStats>> columns = setting_columns(c, true);
  columns.insert(
      columns.end(),
      {{"seeds", "seed", format_seeds},
       {"final loss", "final_loss", sd("final_loss")},
       {"final acc", "final_accuracy",
        [](const ArmStats& arm) { return format_number(arm.stat("final_accuracy").mean); }},
       {std::isnan(threshold) ? std::string("step loss≤thr") : "step loss≤" + format_number(threshold, 3),
        "step_to_loss",
        [&](const ArmStats& arm) { return std::isnan(arm.loss_threshold) ? "n/a" : steps("step_to_loss")(arm); }},
       {"step acc≥" + fmt::format("{:g}", c.accuracy_threshold), "step_to_accuracy", steps("step_to_accuracy")},
       {"mean loss (AUC)", "auc_loss", sd("auc_loss")},
       {"W_q grad =0", "frac_zero_grad_{w}", percent("frac_zero_grad_w_q")},
       {"W_k grad =0", "frac_zero_grad_{w}", percent("frac_zero_grad_w_k")},
       {"W_q grad <" + near_zero + "·step 0", "frac_near_zero_grad_{w}", percent("frac_near_zero_grad_w_q")},
       {"W_k grad <" + near_zero + "·step 0", "frac_near_zero_grad_{w}", percent("frac_near_zero_grad_w_k")},
       // The numbers of the saturation and score-gradient findings, per arm.
       {"entropy at 0", "entropy_first",
        [](const ArmStats& arm) { return format_number(arm.stat("entropy_first").mean, 2); }},
       {"saturated at 0", "saturated_first", percent("saturated_first")},
       {"score grad/loss", "score_grad_relative",
        [](const ArmStats& arm) { return short_number(arm.stat("score_grad_relative").median); }},
       {"diverged", "diverged", format_diverged},
       {"max logit at 0", "max_logit_first", sd("max_logit_first")},
       {"max logit", "max_logit_max", sd("max_logit_max")},
       {"step logit>" + fmt::format("{:g}", kLargeLogit), "step_max_logit_large", steps("step_max_logit_large")}});
  return column_table(c.arms, columns);
}

Table lr_table(const Comparison& c) {
  std::vector<Column<LrGroup>> columns;
  for (const Column<ArmStats>& s : setting_columns(c, false))  // the settings of the group's arms but lr
    columns.push_back({s.header, s.term, [&c, s](const LrGroup& g) { return s.cell(c.arms[g.arms.front()]); }});
  const auto by_lr = [&c](const LrGroup& g) {
    std::vector<std::string> out;
    for (auto a : g.arms) {
      const ArmStats& arm = c.arms[a];
      const std::size_t diverged = arm.diverged_steps.size();
      out.push_back(setting_text(arm.settings, "lr") + ": " + format_number(arm.stat("lr_objective").mean) +
                    (diverged ? fmt::format(" (diverged {}/{})", diverged, arm.used.size()) : ""));
    }
    return fmt::format("{}", fmt::join(out, ", "));
  };
  columns.insert(columns.end(),
                 {{"min(final, initial loss) by lr", "lr_objective", by_lr},
                  {"best lr", "",
                   [&c](const LrGroup& g) {
                     return std::isnan(g.sensitivity) ? format_number(g.sensitivity)
                                                      : setting_text(c.arms[g.best_arm].settings, "lr");
                   }},
                  {"LR sensitivity", "LR sensitivity", [](const LrGroup& g) { return format_number(g.sensitivity); }}});
  return column_table(c.lr_groups, columns);
}

}  // namespace xgrad::report
