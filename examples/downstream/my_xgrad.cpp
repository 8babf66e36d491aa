// my_xgrad: xgrad's command line (train, sweep, compare, probe, ...) with this project's entries registered beside
// the built-in ones by the static objects in their own files.
#include "train/cli/main.h"

int main(int argc, char** argv) { return xgrad::cli::main(argc, argv); }
