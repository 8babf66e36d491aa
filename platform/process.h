// The one way xgrad runs another program (gnuplot, sbatch): an argument vector handed to exec, never a shell command
// line, so that no name from the data (a run directory, an optimizer in config.json, a figure) is ever parsed by a
// shell.
#pragma once

#include <string>
#include <vector>

namespace xgrad::platform {

/// Where a program runs and where its output goes. By default: this process's working directory, stdout and stderr
/// captured together (ProgramResult::output).
struct ProgramOptions {
  std::string working_directory;  // "" : this process's
  std::string output_file;        // stdout and stderr appended to this file (created 0644; a symbolic link refused)
};

/// How a program ended and what it wrote.
struct ProgramResult {
  int exit_code = -1;  // its exit status, or -1 when a signal ended it
  int signal = 0;      // the signal that ended it, or 0
  std::string output;  // stdout and stderr interleaved ("" when they went to ProgramOptions::output_file)
  bool succeeded() const { return exit_code == 0; }
};

/// The path of the executable `program` as a shell's `command -v` finds it: `program` itself when it holds a '/',
/// else the first executable regular file named so in a directory of $PATH (an empty entry: the working directory).
/// "" when there is none.
std::string find_program(const std::string& program);

/// Runs `argv` (argv[0] found by find_program) to its end, with stdin from /dev/null, no descriptor of this process
/// but stdin, stdout and stderr, the signal mask cleared, and waits for it. Throws std::runtime_error naming the
/// program (and the file or directory) when it cannot start: argv empty, not found, the working directory or output
/// file cannot be opened, posix_spawn failed. A program that runs and fails is a result, not an exception.
ProgramResult run_program(const std::vector<std::string>& argv, const ProgramOptions& options = {});

}  // namespace xgrad::platform
