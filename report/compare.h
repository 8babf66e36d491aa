// `xgrad compare DIR...`: reads run directories (report/runs.h), groups them into arms that differ only in seed, and
// reports: a table, gnuplot plots, report.md with sentences from the numbers, and report.html (report/html.h).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace xgrad::report {

struct CompareOptions {
  std::vector<std::string> inputs;    // run or sweep directories
  std::string out;                    // where report.md, report.html and plots/ go (created); empty: the first input
  double loss_threshold = -1;         // "steps to reach loss <= x"; < 0: half the chance loss
  double accuracy_threshold = 0.9;    // "steps to reach accuracy >= x"
  bool plots = true;                  // draw plots with gnuplot (skipped with a note if gnuplot is missing)
  std::size_t threshold_window = 10;  // steps-to-threshold use the trailing mean over this many steps (1: raw)
  bool include_unlisted = false;      // also read the run directories below a sweep that its sweep.json does not list
  std::string axis = "scale";         // the claims judge arms that differ only in this setting (an arm setting)
  std::string baseline;               // ... against the arms holding this value of it; "" for the reference scaling
};

/// Prints the comparison table to `out` and writes report.md, report.html (+ plots). Returns the number of runs read.
/// Throws std::invalid_argument when an input is not a directory or holds no run, std::runtime_error on I/O errors.
std::size_t run_compare(const CompareOptions& options, std::ostream& out);

}  // namespace xgrad::report
