#include "platform/signals.h"

#include <unistd.h>

#include <cstdio>

namespace xgrad::platform {

std::string signal_name(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal " + std::to_string(signal);
  }
}

namespace {
// Plain zero-initialised storage: record_startup_signals runs before any constructor of this library.
bool ignored_at_startup[NSIG];

// Sets `signal`'s handler (a function, SIG_IGN or SIG_DFL) with an empty mask. Async-signal-safe (sigaction only).
int set_handler(int signal, void (*handler)(int), int flags = 0, struct sigaction* previous = nullptr) noexcept {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = flags;
  return sigaction(signal, &action, previous);
}
}  // namespace

static_assert(NSIG > SIGTERM && NSIG > SIGHUP && NSIG > SIGINT);

void record_startup_signals(int, char**, char**) {
  for (int signal : kStopSignals) {
    struct sigaction current {};
    ignored_at_startup[signal] =
        sigaction(signal, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN;
  }
}

void restore_startup_ignored_signals() {
  for (int signal : kStopSignals)
    if (ignored_at_startup[signal]) set_handler(signal, SIG_IGN);
}

bool catch_unless_ignored(int signal, void (*handler)(int), int flags, struct sigaction* previous) {
  struct sigaction current {};
  if (sigaction(signal, nullptr, &current) != 0) return false;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) return false;
  if (signal > 0 && signal < NSIG && ignored_at_startup[signal]) {
    set_handler(signal, SIG_IGN);
    return false;
  }
  return set_handler(signal, handler, flags, previous) == 0;
}

namespace {
// Ends the process by `signal` as if no handler had been installed (async-signal-safe: sigaction, sigprocmask, raise).
void raise_with_default_action(int signal) noexcept {
  set_handler(signal, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(signal);
}

volatile sig_atomic_t g_watched_signal = 0;  // the stop signal a watchdog is armed for, 0 when none

extern "C" void xgrad_on_stop_watchdog(int) {
  const int signal = g_watched_signal;
  if (signal == 0) return;
  static const char message[] =
      "xgrad: the run did not reach the end of its step after the stop signal (it cannot progress); ending it "
      "without a checkpoint\n";
  (void)!write(STDERR_FILENO, message, sizeof message - 1);
  raise_with_default_action(signal);
  _exit(128 + signal);
}
}  // namespace

void arm_stop_watchdog(int signal, unsigned seconds) noexcept {
  if (g_watched_signal != 0) return;
  g_watched_signal = signal;
  set_handler(SIGALRM, xgrad_on_stop_watchdog);
  alarm(seconds);
}

void disarm_stop_watchdog() noexcept {
  alarm(0);
  g_watched_signal = 0;
}

int end_by_signal(int signal) {
  std::fflush(nullptr);
  raise_with_default_action(signal);
  return 128 + signal;
}

}  // namespace xgrad::platform
