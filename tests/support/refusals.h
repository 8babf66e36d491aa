// Bad invocations of the xgrad executable and what each must answer: an exit code and a message on stderr. One
// helper for the tests that hold such a table.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/support/process.h"

namespace xgrad::testing {

/// A bad invocation of xgrad: its arguments, the exit code it must end with, a part of what it must print on stderr.
struct Refusal {
  std::vector<std::string> args;
  int exit_code = 2;
  std::string message;
};

/// Runs `xgrad ARGS`; checks its exit code and that stderr holds the message. Returns what it did, for more checks.
inline ProcessResult check_refused(const Refusal& refusal) {
  std::string line;
  for (const auto& a : refusal.args) line += " " + a;
  INFO("xgrad" << line);
  const ProcessResult r = run_xgrad(refusal.args);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == refusal.exit_code);
  CHECK(r.err.find(refusal.message) != std::string::npos);
  return r;
}

/// check_refused, and the answer is xgrad's one line for a refused command: stderr is one line, "xgrad: ...".
inline ProcessResult check_refused_in_one_line(const Refusal& refusal) {
  const ProcessResult r = check_refused(refusal);
  INFO("xgrad " << (refusal.args.empty() ? "" : refusal.args[0]) << " said: " << r.err);
  CHECK(r.err.rfind("xgrad: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  return r;
}

/// check_refused_in_one_line for every row of `table`.
inline void check_refusals(const std::vector<Refusal>& table) {
  for (const Refusal& refusal : table) check_refused_in_one_line(refusal);
}

}  // namespace xgrad::testing
