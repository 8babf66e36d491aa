// The one file that holds the version and commit (compile definitions set in cli/CMakeLists.txt): the rest of the
// library compiles as one unity build, which a file with definitions of its own would leave.
#include "cli/version.h"

#include <string>

#include <fmt/format.h>
#include <CLI/Version.hpp>
#include <nlohmann/json.hpp>

#include "platform/environment.h"
#include "train/config.h"

namespace xgrad::cli {

void print_version(std::ostream& out) {
  out << "xgrad " << XGRAD_VERSION << " (commit " << XGRAD_GIT_COMMIT << ")\n";
  nlohmann::json env = platform::environment_json();
  env["cli11"] = CLI11_VERSION;
  env["fmt"] = std::to_string(FMT_VERSION / 10000) + "." + std::to_string(FMT_VERSION / 100 % 100) + "." +
               std::to_string(FMT_VERSION % 100);
  // The thread counts are this process's (OpenBLAS's own default until a run sets them): a run uses --threads.
  const std::size_t run_threads = train::TrainConfig().threads;
  for (const auto& [key, value] : env.items())
    out << "  " << key << ": " << (value.is_string() ? value.get<std::string>() : value.dump())
        << (key == "blas_threads" || key == "xgrad_threads"
                ? fmt::format(" (this process before a run sets them; a run uses --threads, default {})", run_threads)
                : std::string())
        << "\n";
}

}  // namespace xgrad::cli
