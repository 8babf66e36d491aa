// Signals the way a long-running command should treat them: a disposition the user chose to ignore stays ignored,
// and a signal is named as a shell user knows it.
#pragma once

#include <csignal>
#include <string>

#include "platform/address_space.h"

namespace xgrad::platform {

/// The signals that ask xgrad to stop after a checkpoint: SIGINT (Ctrl-C), SIGTERM (kill, a scheduler), SIGHUP (the
/// terminal went away).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

/// "SIGHUP", "SIGKILL", ... for the signals of POSIX; "signal N" for any other.
std::string signal_name(int signal);

/// Installs `handler` (with sigaction flags `flags`) for `signal` unless the signal is ignored, or was ignored when
/// the process started (record_startup_signals): `nohup` ignores SIGHUP and a non-interactive shell's `&` ignores
/// SIGINT so that the command survives them, and a handler would undo that. A signal ignored at start-up that a
/// library has caught since is ignored again. Returns whether the handler was installed; `previous` (if given) gets
/// the disposition it replaced.
bool catch_unless_ignored(int signal, void (*handler)(int), int flags, struct sigaction* previous = nullptr);

/// Records which of kStopSignals the process was started with ignored. Called from the executable's .preinit_array
/// (XGRAD_RECORD_STARTUP_SIGNALS), which runs before any shared library's initializer: UCX, which Open MPI 5 loads,
/// installs a SIGHUP handler of its own when it is loaded, so that by main() an ignored SIGHUP no longer looks ignored.
void record_startup_signals(int argc, char** argv, char** envp);

/// Sets every stop signal that was ignored at start-up back to SIG_IGN: before an exec, which resets a caught signal
/// to its default, so that the new image starts with what the user chose.
void restore_startup_ignored_signals();

/// Ends this process by `signal` with its default action, after flushing stdio: a process that stopped because of a
/// signal (after writing its checkpoint) ends as if the signal had killed it, so that a shell running it in a loop
/// or script stops too (bash stops a loop only when its command died of the SIGINT) and reports 128 + the signal.
/// Returns 128 + signal, the exit status to use, only if the process is still alive after that.
int end_by_signal(int signal);

/// How long a run asked to stop by a signal may take to reach the end of its step (where it sees the request and
/// writes its checkpoint) before arm_stop_watchdog ends it. Generous: a step cut short loses the work since the last
/// checkpoint, and a user who does not want to wait sends the signal again.
inline constexpr unsigned kStopGraceSeconds = 60;

/// For a handler of the stop signal `signal`: unless disarmed within `seconds`, the process says on stderr that it
/// did not stop and ends by `signal` with its default action (128 + signal to a shell), without a checkpoint. A run
/// that cannot progress (a library that retries an allocation forever, a step that never ends) would otherwise
/// ignore the signal for good. Uses SIGALRM; the first call arms it, later ones do nothing. Async-signal-safe.
void arm_stop_watchdog(int signal, unsigned seconds = kStopGraceSeconds) noexcept;

/// Cancels arm_stop_watchdog: the run has seen the request and is stopping.
void disarm_stop_watchdog() noexcept;

}  // namespace xgrad::platform

/// Put once in an executable's main file (xgrad's own and a downstream project's): runs record_startup_signals and
/// fit_blas_to_address_space (platform/address_space.h) before the shared libraries initialise.
#define XGRAD_RECORD_STARTUP_SIGNALS()                                                                               \
  __attribute__((section(".preinit_array"), used)) static void (*const xgrad_startup_signals)(int, char**, char**) = \
      &::xgrad::platform::record_startup_signals;                                                                    \
  __attribute__((section(".preinit_array"), used)) static void (*const xgrad_startup_blas)(int, char**, char**) =    \
      &::xgrad::platform::fit_blas_to_address_space
