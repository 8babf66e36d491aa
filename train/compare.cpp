#include "train/compare.h"

#include <stdexcept>

namespace xgrad::train {

std::size_t run_compare(const CompareOptions&, std::ostream&) {
  throw std::runtime_error("compare: not implemented yet");
}

}  // namespace xgrad::train
