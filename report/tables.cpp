#include "report/tables.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "common/escape.h"

namespace xgrad::report {
using train::format_number;

namespace {

// Display width of UTF-8 text: one per code point ("±", "≤" are one column but two or three bytes).
std::size_t width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool looks_numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s == "—" || s == "never" ||
                        s == "n/a" || s == "inf");
}

// Columns whose every cell is a number (or a stand-in for one) are right-aligned.
std::vector<bool> numeric_columns(const Table& t) {
  std::vector<bool> numeric(t.header.size(), !t.rows.empty());
  for (const auto& row : t.rows)
    for (std::size_t i = 0; i < row.size() && i < numeric.size(); ++i) numeric[i] = numeric[i] && looks_numeric(row[i]);
  return numeric;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The one loss threshold every arm shares, or NaN when they differ (different tasks have different chance losses).
double common_loss_threshold(const Comparison& c) {
  double t = kNoValue;
  for (const ArmStats& arm : c.arms) {
    if (std::isnan(t))
      t = arm.loss_threshold;
    else if (arm.loss_threshold != t)
      return kNoValue;
  }
  return t;
}

std::vector<std::string> setting_header(const std::vector<std::string>& extra, bool with_lr) {
  std::vector<std::string> h{"d_k", "scale", "optimizer"};
  if (with_lr) h.push_back("lr");
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

std::vector<std::string> setting_cells(const ArmStats& arm, const std::vector<std::string>& extra, bool with_lr) {
  std::vector<std::string> cells{setting_text(arm.settings, "d_k"), arm.scale(), arm.optimizer()};
  if (with_lr) cells.push_back(setting_text(arm.settings, "lr"));
  for (const auto& k : extra) cells.push_back(setting_text(arm.settings, k));
  return cells;
}

}  // namespace

std::string Table::text() const {
  // Cells hold data (run names, setting values): a newline in one would forge a row, an escape move the cursor.
  Table shown = *this;
  for (std::string& cell : shown.header) cell = escape_name(cell);
  for (auto& row : shown.rows)
    for (std::string& cell : row) cell = escape_name(cell);
  // A column is padded to its widest cell up to kMaxPaddedWidth; a longer cell is printed whole, unpadded, so that
  // one long name does not pad every other row to its length.
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
      const bool right = numeric[i];
      out += (i ? "  " : "") + (right ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : ""));
    }
    return out + "\n";
  };
  std::string out = line(shown.header);
  std::size_t total = 0;
  for (auto x : w) total += x;
  out += std::string(total + 2 * (w.empty() ? 0 : w.size() - 1), '-') + "\n";
  for (const auto& row : shown.rows) out += line(row);
  return out;
}

std::string markdown_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t backslashes = 0;  // just before text[i]; a '|' after an odd number of them is escaped already
  for (std::size_t i = 0; i < text.size(); backslashes = text[i] == '\\' ? backslashes + 1 : 0, ++i) {
    const char ch = text[i];
    if (ch == '|' && backslashes % 2 == 0)
      out += "\\|";
    else if (ch == '\n' || ch == '\r')
      out += ' ';
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F ||
             (static_cast<unsigned char>(ch) == 0xC2 && i + 1 < text.size() &&
              static_cast<unsigned char>(text[i + 1]) >= 0x80 && static_cast<unsigned char>(text[i + 1]) <= 0x9F)) {
      // A name's ANSI escape would act on a terminal that shows report.md: written out as escape_control does.
      out += escape_control(text.substr(i, static_cast<unsigned char>(ch) == 0xC2 ? 2 : 1));
      if (static_cast<unsigned char>(ch) == 0xC2) ++i;
    } else if (ch == '<')
      out += "&lt;";
    else
      out += ch;
  }
  return out;
}

std::string markdown_text(const std::string& text, bool table_cell) {
  const std::string valid = escape_invalid_utf8(text);
  std::string out;
  for (const char ch : valid) {
    if (ch == '\n' || ch == '\r') {
      out += ' ';
      continue;
    }
    const std::string_view markup = table_cell ? "\\`*_[]>#!~" : "\\`*_[]<>#|!~";
    if (markup.find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

std::string markdown_name(const std::string& name) { return markdown_text(escape_name(name), true); }

std::string Table::markdown() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const auto& c : cells) out += " " + markdown_escape(c) + " |";
    return out + "\n";
  };
  std::vector<std::string> shown = header;
  for (std::size_t i = 0; i < shown.size() && i < header_links.size(); ++i)
    if (!header_links[i].empty()) shown[i] = "[" + shown[i] + "](#" + header_links[i] + ")";
  std::string out = line(shown);
  out += "|";
  const std::vector<bool> numeric = numeric_columns(*this);
  for (std::size_t i = 0; i < header.size(); ++i) out += numeric[i] ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& row : rows) {
    if (!plain_cells) {
      out += line(row);
      continue;
    }
    std::vector<std::string> inert;
    for (const auto& cell : row) inert.push_back(markdown_text(cell, true));
    out += line(inert);
  }
  return out;
}

std::string format_mean_sd(const MeanSd& m, int decimals) {
  if (m.n == 0) return "—";
  if (m.n == 1) return format_number(m.mean, decimals);
  return format_number(m.mean, decimals) + " ± " + format_number(m.sd, decimals);
}

std::string format_percent(double fraction) {
  if (std::isnan(fraction)) return "—";
  if (fraction == 0.0) return "0%";
  if (fraction == 1.0) return "100%";
  return fmt::format("{:.1f}%", 100.0 * fraction);
}

std::string format_steps(std::size_t reached, std::size_t n, double mean_step) {
  if (n == 0) return "—";  // every run diverged: no run to reach it
  if (reached == 0) return "never";
  const std::string step = fmt::format("{:.0f}", mean_step);
  return reached == n ? step : fmt::format("{} ({}/{})", step, reached, n);
}

std::string format_diverged(const ArmStats& arm) {
  std::string out = fmt::format("{}/{}", arm.diverged_steps.size(), arm.used.size());
  if (arm.diverged_steps.empty()) return out;
  std::vector<long> steps = arm.diverged_steps;
  std::sort(steps.begin(), steps.end());
  out += steps.size() == 1 ? " (step " : " (steps ";
  for (std::size_t i = 0; i < steps.size(); ++i) out += (i ? ", " : "") + std::to_string(steps[i]);
  return out + ")";
}

std::string format_seeds(const ArmStats& arm) {
  std::string notes;
  auto note = [&](const std::string& n) { notes += (notes.empty() ? "" : ", ") + n; };
  if (arm.used.size() != arm.n_seeds) note(fmt::format("{} runs", arm.used.size()));
  if (arm.only_incomplete())
    note("incomplete");
  else if (arm.n_incomplete > 0)
    note(fmt::format("+{} incomplete", arm.n_incomplete));
  return std::to_string(arm.n_seeds) + (notes.empty() ? "" : " (" + notes + ")");
}

std::string arm_label(const ArmStats& arm, const std::vector<std::string>& extra_keys,
                      const std::vector<std::string>& omit) {
  std::vector<std::string> parts;
  if (!contains(omit, "d_k")) parts.push_back("d_k=" + setting_text(arm.settings, "d_k"));
  if (!contains(omit, "scale")) parts.push_back(arm.scale());
  if (!contains(omit, "optimizer")) parts.push_back(arm.optimizer());
  if (!contains(omit, "lr")) parts.push_back("lr=" + setting_text(arm.settings, "lr"));
  for (const auto& k : extra_keys) parts.push_back(k + "=" + setting_text(arm.settings, k));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

std::string glossary_anchor(const std::string& term) {
  std::string out = "g-";
  for (const char ch : term)
    if (ch == ' ')
      out += '-';
    else if (ch != '{' && ch != '}')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

Table arm_table(const Comparison& c) {
  const auto extra = distinguishing_keys(c.arms);
  const double threshold = common_loss_threshold(c);
  const std::string near_zero = fmt::format("{:g}", train::kNearZeroGradFraction);
  Table t;
  t.plain_cells = true;
  t.header = setting_header(extra, true);
  const std::vector<std::string> rest{
      "seeds",
      "final loss",
      "final acc",
      std::isnan(threshold) ? std::string("step loss≤thr") : "step loss≤" + format_number(threshold, 3),
      "step acc≥" + fmt::format("{:g}", c.accuracy_threshold),
      "mean loss (AUC)",
      "W_q grad =0",
      "W_k grad =0",
      "W_q grad <" + near_zero + "·step 0",
      "W_k grad <" + near_zero + "·step 0",
      "diverged"};
  t.header.insert(t.header.end(), rest.begin(), rest.end());
  t.header_links.assign(t.header.size() - rest.size(), glossary_anchor("setting"));
  for (const char* term :
       {"seed", "final_loss", "final_accuracy", "step_to_loss", "step_to_accuracy", "auc_loss", "frac_zero_grad_{w}",
        "frac_zero_grad_{w}", "frac_near_zero_grad_{w}", "frac_near_zero_grad_{w}", "diverged"})
    t.header_links.push_back(glossary_anchor(term));
  for (const ArmStats& arm : c.arms) {
    std::vector<std::string> row = setting_cells(arm, extra, true);
    const std::size_t n = arm.kept.size();
    const std::vector<std::string> cells{
        format_seeds(arm),
        format_mean_sd(arm.stat("final_loss")),
        format_number(arm.stat("final_accuracy").mean),
        std::isnan(arm.loss_threshold) ? std::string("n/a")
                                       : format_steps(arm.stat("step_to_loss").n, n, arm.stat("step_to_loss").mean),
        format_steps(arm.stat("step_to_accuracy").n, n, arm.stat("step_to_accuracy").mean),
        format_mean_sd(arm.stat("auc_loss")),
        format_percent(arm.stat("frac_zero_grad_w_q").mean),
        format_percent(arm.stat("frac_zero_grad_w_k").mean),
        format_percent(arm.stat("frac_near_zero_grad_w_q").mean),
        format_percent(arm.stat("frac_near_zero_grad_w_k").mean),
        format_diverged(arm)};
    row.insert(row.end(), cells.begin(), cells.end());
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table lr_table(const Comparison& c) {
  const auto extra = distinguishing_keys(c.arms);
  Table t;
  t.plain_cells = true;
  t.header = setting_header(extra, false);
  const std::vector<std::string> rest{"min(final, initial loss) by lr", "best lr", "LR sensitivity"};
  t.header.insert(t.header.end(), rest.begin(), rest.end());
  for (const LrGroup& g : c.lr_groups) {
    const ArmStats& first = c.arms[g.arms.front()];
    std::vector<std::string> row = setting_cells(first, extra, false);
    std::string by_lr;
    for (auto a : g.arms) {
      const ArmStats& arm = c.arms[a];
      by_lr += (by_lr.empty() ? "" : ", ") + setting_text(arm.settings, "lr") + ": " +
               format_number(arm.stat("lr_objective").mean);
      if (!arm.diverged_steps.empty())
        by_lr += fmt::format(" (diverged {}/{})", arm.diverged_steps.size(), arm.used.size());
    }
    row.push_back(by_lr);
    row.push_back(setting_text(c.arms[g.best_arm].settings, "lr"));
    row.push_back(format_number(g.sensitivity));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace xgrad::report
