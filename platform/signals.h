// Signals the way a long-running command should treat them: a disposition the user chose to ignore stays ignored,
// and a signal is named as a shell user knows it.
#pragma once

#include <csignal>
#include <string>

namespace xgrad::platform {

/// The signals that ask xgrad to stop after a checkpoint: SIGINT (Ctrl-C), SIGTERM (kill, a scheduler), SIGHUP (the
/// terminal went away).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

/// "SIGHUP", "SIGKILL", ... for the signals of POSIX; "signal N" for any other.
std::string signal_name(int signal);

/// Installs `handler` (with sigaction flags `flags`) for `signal` unless the signal is ignored: `nohup` ignores
/// SIGHUP and a non-interactive shell's `&` ignores SIGINT so that the command survives them, and a handler would
/// undo that. Returns whether the handler was installed; `previous` (if given) gets the disposition it replaced.
bool catch_unless_ignored(int signal, void (*handler)(int), int flags, struct sigaction* previous = nullptr);

/// Ends this process by `signal` with its default action, after flushing stdio: a process that stopped because of a
/// signal (after writing its checkpoint) ends as if the signal had killed it, so that a shell running it in a loop
/// or script stops too (bash stops a loop only when its command died of the SIGINT) and reports 128 + the signal.
/// Returns 128 + signal, the exit status to use, only if the process is still alive after that.
int end_by_signal(int signal);

}  // namespace xgrad::platform
