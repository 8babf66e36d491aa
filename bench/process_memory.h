// Resident memory of this process, read from /proc (Linux), in MiB.
#pragma once

namespace xgrad::bench {

/// Current resident set size (VmRSS); -1 if unavailable.
double current_rss_mib();
/// Peak resident set size since start or the last reset_peak_rss (VmHWM); -1 if unavailable.
double peak_rss_mib();
/// Resets the peak to the current RSS (writes 5 to /proc/self/clear_refs, Linux >= 4.0), so that each benchmarked
/// size reports its own peak. Returns false if the kernel refused (the peak then covers the whole process).
bool reset_peak_rss();

}  // namespace xgrad::bench
