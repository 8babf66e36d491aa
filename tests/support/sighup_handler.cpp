// A stand-in for UCX, which Open MPI 5 loads: a library that installs a SIGHUP handler of its own when it is loaded,
// over whatever the process started with. Preloaded (LD_PRELOAD) into xgrad by sweep_faults_nohup_library_handler.
#include <csignal>

namespace {

extern "C" void xgrad_test_on_sighup(int) {}

__attribute__((constructor)) void install_sighup_handler() { std::signal(SIGHUP, xgrad_test_on_sighup); }

}  // namespace
