// The line xgrad prints when it runs out of memory where no handler that allocates can run.
#pragma once

namespace xgrad {

/// Writes "xgrad: error: out of memory under the address-space limit (ulimit -v); raise it" and a newline to stderr
/// with one write(2), allocating nothing. Safe in a terminate handler and after std::bad_alloc.
void write_out_of_memory_line() noexcept;

}  // namespace xgrad
