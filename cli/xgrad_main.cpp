// The `xgrad` executable: the command line with xgrad's built-in registry entries.
#include "cli/main.h"
#include "platform/signals.h"

XGRAD_RECORD_STARTUP_SIGNALS();

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
