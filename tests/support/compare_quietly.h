// `xgrad compare` run in the test's own process, its console output dropped: for the tests that read what compare
// writes (report.md, report.html) rather than what it prints.
#pragma once

#include <cstddef>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "report/compare.h"

namespace xgrad::testing {

/// `xgrad compare INPUTS --out OUT --plots false`; the number of runs it read. Throws what run_compare throws.
inline std::size_t compare_quietly(const std::vector<std::string>& inputs, const std::filesystem::path& out) {
  report::CompareOptions options;
  options.inputs = inputs;
  options.out = out.string();
  options.plots = false;
  std::ostringstream sink;
  return report::run_compare(options, sink);
}

}  // namespace xgrad::testing
