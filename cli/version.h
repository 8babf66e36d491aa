// `xgrad --version`.
#pragma once

#include <ostream>

namespace xgrad::cli {

/// Writes what a bug report needs to say which build ran: the version, the commit it was built from and the
/// libraries, BLAS kernel and thread counts of this machine (platform::environment_json).
void print_version(std::ostream& out);

}  // namespace xgrad::cli
