#include "bench/process_memory.h"

#include <fstream>
#include <string>

namespace xgrad::bench {

namespace {
double status_field_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() && line[field.size()] == ':')
      return std::stod(line.substr(field.size() + 1)) / 1024.0;  // the kernel reports kB
  return -1;
}
}  // namespace

double current_rss_mib() { return status_field_mib("VmRSS"); }
double peak_rss_mib() { return status_field_mib("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace xgrad::bench
