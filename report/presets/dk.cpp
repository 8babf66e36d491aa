// The report of preset `dk` (its grid and question: cli/presets/dk.cpp): the usual report only. Registered with no
// sections, so that `xgrad compare` on its sweep directory knows the preset and says it adds none.
#include "report/preset_report.h"

namespace xgrad::report::presets::dk {
namespace {

const Registration<PresetReport> dk_registration{PresetReport{"dk", 0, nullptr}};

}  // namespace
}  // namespace xgrad::report::presets::dk
