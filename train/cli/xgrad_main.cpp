// The `xgrad` executable: the command line with xgrad's built-in registry entries.
#include "train/cli/main.h"

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
