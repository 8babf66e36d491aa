// The matmul tests of tests/test_ops.cpp (2-D and batched operands) and tests/test_ops_shape.cpp (1-D operands): a
// table of operand shapes, each checked the same way against a reference.
#pragma once

#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "autograd/ops.h"
#include "tests/support/op_testing.h"

namespace xgrad::testing {

/// Operand shapes of a matmul and the shape of its result.
struct MatmulCase {
  shape_t a, b, out;
};

/// For every case, on seeded random float64 operands: the result has shape `out`, equals `reference(a, b, c)` within
/// 1e-12, and the gradients pass the finite-difference check.
template <class Reference>
void check_matmul_cases(const std::vector<MatmulCase>& cases, std::mt19937& gen, const Reference& reference) {
  for (const MatmulCase& c : cases) {
    INFO(shape_str(c.a) << " @ " << shape_str(c.b));
    DTensor a = rand_input(c.a, gen), b = rand_input(c.b, gen);
    const DTensor out = matmul(a, b);
    CHECK(out.shape() == c.out);
    CHECK_CLOSE(out.value(), reference(a.value(), b.value(), c), 1e-12);
    CHECK_GRADIENT([](const Inputs& in) { return matmul(in[0], in[1]); }, {a, b});
  }
}

}  // namespace xgrad::testing
