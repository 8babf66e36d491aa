// A process-wide net for running out of memory where no handler can be reached: under an address-space limit just
// above what the loader maps, a std::bad_alloc thrown while the libraries initialise (before main), or one that the
// unwinder itself cannot deliver, reaches std::terminate, which would abort with a core dump. This library
// initialises first of xgrad's, so its handler is in place for every other one: a bad_alloc there ends the process
// with exit 1 and a line naming the limit, as main's own handler does; anything else goes to the default handler.
#include "autograd/out_of_memory.h"

#include <cxxabi.h>
#include <unistd.h>
#include <cstdlib>
#include <exception>
#include <new>
#include <typeinfo>

namespace {

std::terminate_handler g_default_terminate = nullptr;

[[noreturn]] void terminate_on_out_of_memory() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type && (*type == typeid(std::bad_alloc) || *type == typeid(std::bad_array_new_length))) {
    xgrad::write_out_of_memory_line();
    std::_Exit(1);
  }
  if (g_default_terminate) g_default_terminate();
  std::abort();
}

// Before this library's own static initialisers (priority 101 runs first within it; the libraries that use it
// initialise after it).
__attribute__((constructor(101))) void install_terminate_handler() {
  g_default_terminate = std::set_terminate(terminate_on_out_of_memory);
}

}  // namespace

void xgrad::write_out_of_memory_line() noexcept {
  static const char kLine[] = "xgrad: error: out of memory under the address-space limit (ulimit -v); raise it\n";
  const ssize_t written = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
  (void)written;
}
