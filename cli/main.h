// The `xgrad` command line as a function, so that a user's own executable (which registers its own scalings,
// attention layers, tasks or optimizers) is the whole of xgrad plus those: `return xgrad::cli::main(argc, argv);`.
#pragma once

namespace xgrad::cli {

/// Runs the `xgrad` command line: train, sweep, experiment, probe, explain, compare, sample, settings. Returns the
/// process exit code (0 success, 1 runtime failure, 2 bad usage, 3 a diverged run); a train or sweep stopped by a
/// signal ends the process by that signal instead (a shell reports 128 + signal). May re-execute the program once to
/// select the OpenBLAS core (platform/environment.h); argv must be main's.
int main(int argc, char** argv);

}  // namespace xgrad::cli
