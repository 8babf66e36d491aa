// my_xgrad: xgrad's command line (train, sweep, compare, probe, ...) with this project's entries registered beside
// the built-in ones by the static objects in their own files.
#include "cli/main.h"
#include "platform/signals.h"

XGRAD_RECORD_STARTUP_SIGNALS();  // keeps a signal ignored under nohup ignored (platform/signals.h)

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
