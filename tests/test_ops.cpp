// Every op of autograd/ops.h: float64 finite-difference gradient checks (xgrad::gradcheck) on small seeded random
// inputs, forward values against hand-computed numbers, and the xgrad::Error each op raises on bad input.
//
// One TEST_CASE per op family; inside it, SUBCASEs separate gradients, values and errors. Inputs are tiny because
// gradcheck evaluates the function three times per input element.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xview.hpp>

#include "autograd/blas.h"
#include "autograd/kernels/parallel.h"
#include "autograd/ops.h"
#include "tests/support/matmul_cases.h"
#include "tests/support/op_testing.h"

using namespace xgrad;
using namespace xgrad::testing;

// ---- elementwise, broadcasting ---------------------------------------------------------------------------------

// add/sub/mul/div: gradients of both operands reduce correctly back through NumPy broadcasting (size-1 dims,
// differing ranks, 0-d scalars on either side), and the output has the broadcast shape.
TEST_CASE("add, sub, mul, div: gradients under NumPy broadcasting") {
  std::mt19937 gen(101);
  struct BinaryOp {
    const char* name;
    DTensor (*fn)(const DTensor&, const DTensor&);
  };
  const BinaryOp ops[] = {{"add", &xgrad::add<double>},
                          {"sub", &xgrad::sub<double>},
                          {"mul", &xgrad::mul<double>},
                          {"div", &xgrad::div<double>}};
  struct ShapeCase {
    shape_t a, b, out;
  };
  const ShapeCase cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},        // same shape
      {{2, 1, 3}, {4, 3}, {2, 4, 3}},  // a size-1 dim and differing ranks
      {{4, 3}, {2, 1, 3}, {2, 4, 3}},  // the same, operands swapped
      {{2, 3}, {}, {2, 3}},            // 0-d scalar on the right
      {{}, {2, 3}, {2, 3}},            // 0-d scalar on the left
      {{3, 1}, {1, 4}, {3, 4}},        // both operands broadcast
      {{3}, {2, 1}, {2, 3}},           // rank 1 against rank 2
      {{1}, {}, {1}},                  // one element against 0-d
  };
  for (const auto& op : ops) {
    for (const auto& c : cases) {
      INFO(op.name << ": " << shape_str(c.a) << " with " << shape_str(c.b));
      DTensor a = rand_input(c.a, gen);
      // The divisor stays in [0.5, 1.5): away from the pole of 1/b.
      DTensor b = std::string(op.name) == "div" ? rand_input(c.b, gen, 0.5, 1.5) : rand_input(c.b, gen);
      CHECK(op.fn(a, b).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return op.fn(in[0], in[1]); }, {a, b});
    }
  }
}

// The operators route to the ops; a constant operand gets no gradient; one tensor used as both operands gets the
// sum of both paths.
TEST_CASE("add, sub, mul, div: operators, constant operands and a tensor used twice") {
  std::mt19937 gen(102);
  DTensor a = rand_input({2, 3}, gen, 0.5, 1.5);
  DTensor c(uniform({3}, gen, 0.5, 1.5), false);  // constant: gradcheck skips it

  SUBCASE("gradients") {
    CHECK_GRADIENT([&](const Inputs& in) { return in[0] + c; }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return c - in[0]; }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return in[0] * c; }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return c / in[0]; }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return in[0] * in[0]; }, {a});          // d/da = 2a
    CHECK_GRADIENT([](const Inputs& in) { return in[0] / in[0] + in[0]; }, {a});  // d/da = 1
    CHECK_GRADIENT([](const Inputs& in) { return -(in[0] - in[0] * in[0]); }, {a});
  }
  SUBCASE("values") {
    const DTensor x(xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
    const DTensor y(xt::xarray<double>{10, 20, 30});
    CHECK_CLOSE((x + y).value(), (xt::xarray<double>{{11, 22, 33}, {14, 25, 36}}), 1e-12);
    CHECK_CLOSE((x - y).value(), (xt::xarray<double>{{-9, -18, -27}, {-6, -15, -24}}), 1e-12);
    CHECK_CLOSE((x * y).value(), (xt::xarray<double>{{10, 40, 90}, {40, 100, 180}}), 1e-12);
    CHECK_CLOSE((y / x).value(), (xt::xarray<double>{{10, 10, 10}, {2.5, 4, 5}}), 1e-12);
  }
  SUBCASE("errors") {
    const DTensor p(xt::xarray<double>::from_shape({2, 3})), q(xt::xarray<double>::from_shape({4, 3}));
    CHECK_ERROR("add: ", add(p, q));
    CHECK_ERROR("sub: ", sub(p, q));
    CHECK_ERROR("mul: ", mul(p, q));
    CHECK_ERROR("div: ", div(p, q));
  }
}

// add_scalar, mul_scalar, pow_scalar, neg and the operators built on them (a + s, a - s, s * a, a / s).
TEST_CASE("add_scalar, mul_scalar, pow_scalar, neg") {
  std::mt19937 gen(103);
  DTensor a = rand_input({2, 3}, gen);              // any sign
  DTensor pos = rand_input({2, 3}, gen, 0.3, 2.0);  // for fractional and negative exponents

  SUBCASE("gradients") {
    CHECK_GRADIENT([](const Inputs& in) { return add_scalar(in[0], 2.5); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return mul_scalar(in[0], -1.5); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return neg(in[0]); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return (in[0] + 1.0) * 3.0 - 2.0; }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return 0.5 * in[0] / 4.0; }, {a});
    for (double p : {2.0, 3.0}) {
      INFO("p = " << p << " on inputs of any sign");
      CHECK_GRADIENT([p](const Inputs& in) { return pow_scalar(in[0], p); }, {a});
    }
    for (double p : {0.5, -1.5, 1.7, -2.0}) {
      INFO("p = " << p << " on positive inputs");
      CHECK_GRADIENT([p](const Inputs& in) { return pow_scalar(in[0], p); }, {pos});
    }
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{1.f, 2.f, 4.f});
    CHECK_CLOSE(add_scalar(x, 0.5).value(), (xt::xarray<double>{1.5, 2.5, 4.5}), 1e-6);
    CHECK_CLOSE(mul_scalar(x, -2.0).value(), (xt::xarray<double>{-2, -4, -8}), 1e-6);
    CHECK_CLOSE(pow_scalar(x, 0.5).value(), (xt::xarray<double>{1, std::sqrt(2.0), 2}), 1e-6);
    CHECK_CLOSE(pow_scalar(x, -1.0).value(), (xt::xarray<double>{1, 0.5, 0.25}), 1e-6);
    CHECK_CLOSE(neg(x).value(), (xt::xarray<double>{-1, -2, -4}), 1e-6);
  }
}

// Smooth unary functions, each on a domain where it is differentiable.
TEST_CASE("exp, log, sqrt, tanh, sigmoid, gelu") {
  std::mt19937 gen(104);

  SUBCASE("gradients") {
    DTensor a = rand_input({2, 3}, gen, -2.0, 2.0);
    DTensor pos = rand_input({2, 3}, gen, 0.2, 3.0);  // log and sqrt: positive inputs only
    DTensor wide = rand_input({3, 4}, gen, -4.0, 4.0);
    CHECK_GRADIENT([](const Inputs& in) { return exp(in[0]); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return log(in[0]); }, {pos});
    CHECK_GRADIENT([](const Inputs& in) { return sqrt(in[0]); }, {pos});
    CHECK_GRADIENT([](const Inputs& in) { return tanh(in[0]); }, {wide});
    CHECK_GRADIENT([](const Inputs& in) { return sigmoid(in[0]); }, {wide});
    CHECK_GRADIENT([](const Inputs& in) { return gelu(in[0]); }, {wide});
    CHECK_GRADIENT([](const Inputs& in) { return log(exp(in[0]) + 1.0); }, {a});  // a chain of them
  }
  SUBCASE("values") {
    const DTensor x(xt::xarray<double>{-1.0, 0.0, 1.0, 3.0});
    CHECK_CLOSE(exp(x).value(), (xt::xarray<double>{0.36787944117144233, 1, 2.718281828459045, 20.085536923187668}),
                1e-12);
    CHECK_CLOSE(tanh(x).value(), (xt::xarray<double>{-0.7615941559557649, 0, 0.7615941559557649, 0.9950547536867305}),
                1e-12);
    CHECK_CLOSE(sigmoid(x).value(),
                (xt::xarray<double>{0.2689414213699951, 0.5, 0.7310585786300049, 0.9525741268224334}), 1e-12);
    // tanh-approximated GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    CHECK_CLOSE(gelu(x).value(), (xt::xarray<double>{-0.15880800939172324, 0, 0.8411919906082768, 2.996362607918227}),
                1e-12);
    const DTensor p(xt::xarray<double>{1.0, 4.0, std::exp(2.0)});
    CHECK_CLOSE(log(p).value(), (xt::xarray<double>{0, std::log(4.0), 2}), 1e-12);
    CHECK_CLOSE(sqrt(p).value(), (xt::xarray<double>{1, 2, std::exp(1.0)}), 1e-12);
    // log(0) is -inf as in IEEE arithmetic (documented).
    CHECK(log(DTensor(xt::xarray<double>{0.0})).value()(0) == -std::numeric_limits<double>::infinity());
  }
}

// relu: random inputs away from 0, plus two inputs exactly at 0. gradcheck must see the kinks and pass them (the
// analytic 0 lies between the one-sided derivatives 0 and 1); the documented gradient at exactly 0 is 0.
TEST_CASE("relu: gradient including inputs exactly at the kink") {
  std::mt19937 gen(105);
  DTensor a = away_from_zero({2, 4}, gen);
  a.mutable_value().data()[1] = 0.0;
  a.mutable_value().data()[6] = 0.0;
  const GradcheckResult r = gradcheck([](const Inputs& in) { return relu(in[0]); }, {a});
  INFO(r.message);
  CHECK(r.ok);
  CHECK(r.kinks == 2);

  DTensor x(xt::xarray<double>{-1.0, 0.0, 2.0}, true);
  const DTensor y = relu(x);
  CHECK_CLOSE(y.value(), (xt::xarray<double>{0, 0, 2}), 0.0);
  sum(y).backward();
  CHECK_CLOSE(x.grad(), (xt::xarray<double>{0, 0, 1}), 0.0);
}

// ---- reductions ------------------------------------------------------------------------------------------------

// sum and mean over all elements (→ 0-d) and over axis lists: negative, unsorted, several, with and without keepdim.
TEST_CASE("sum, mean: all elements and over axes") {
  std::mt19937 gen(106);
  DTensor a = rand_input({2, 3, 4}, gen);
  struct AxesCase {
    std::vector<int> axes;
    bool keepdim;
    shape_t out;
  };
  const AxesCase cases[] = {
      {{1}, false, {2, 4}},        {{1}, true, {2, 1, 4}}, {{-1}, false, {2, 3}},
      {{-1}, true, {2, 3, 1}},     {{0, 2}, false, {3}},   {{2, 0}, true, {1, 3, 1}},
      {{-3, -1}, true, {1, 3, 1}}, {{0, 1, 2}, false, {}}, {{0, -2, 2}, true, {1, 1, 1}},
  };

  SUBCASE("gradients") {
    CHECK(sum(a).shape() == shape_t{});
    CHECK(mean(a).shape() == shape_t{});
    CHECK_GRADIENT([](const Inputs& in) { return sum(in[0]); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return mean(in[0]); }, {a});
    for (const auto& c : cases) {
      std::ostringstream axes;
      for (int ax : c.axes) axes << ax << ' ';
      INFO("axes " << axes.str() << (c.keepdim ? "keepdim" : "no keepdim"));
      CHECK(sum(a, c.axes, c.keepdim).shape() == c.out);
      CHECK(mean(a, c.axes, c.keepdim).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return sum(in[0], c.axes, c.keepdim); }, {a});
      CHECK_GRADIENT([&](const Inputs& in) { return mean(in[0], c.axes, c.keepdim); }, {a});
    }
    // A 0-d input: "all elements" is the one element.
    DTensor s(xt::xarray<double>(2.5), true);
    CHECK_GRADIENT([](const Inputs& in) { return sum(in[0]) * in[0]; }, {s});
    CHECK_GRADIENT([](const Inputs& in) { return mean(in[0]) * in[0]; }, {s});
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
    CHECK(sum(x).item() == doctest::Approx(21.0));
    CHECK(mean(x).item() == doctest::Approx(3.5));
    CHECK_CLOSE(sum(x, {0}).value(), (xt::xarray<double>{5, 7, 9}), 1e-6);
    CHECK_CLOSE(mean(x, {-1}).value(), (xt::xarray<double>{2, 5}), 1e-6);
    CHECK_CLOSE(mean(x, {-1}, true).value(), reshaped<double>({2, 5}, {2, 1}), 1e-6);
    CHECK_CLOSE(mean(x, {1, 0}).value(), (xt::xarray<double>(3.5)), 1e-6);
    // Reduced axes in the middle (summed token embeddings [B, T, S, d]) and non-contiguous ones, against xtensor;
    // the gradient of each is every input's weight in the weighted sum.
    std::mt19937 g(7);
    const DTensor y = rand_input({2, 3, 2, 4}, g);
    for (const std::vector<int>& axes : std::vector<std::vector<int>>{{2}, {1, 2}, {0, 2}, {1, 3}, {0, 1}}) {
      std::vector<std::size_t> ax(axes.begin(), axes.end());
      INFO("axes " << axes.front() << ", " << axes.back());
      CHECK_CLOSE(sum(y, axes).value(), xt::xarray<double>(xt::sum(y.value(), ax)), 1e-12);
      DTensor leaf(y.value(), true);
      const DTensor out = sum(leaf, axes, true);
      xt::xarray<double> w = xt::xarray<double>::from_shape(out.shape());
      for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<double>(i + 1);
      sum(out * DTensor(w)).backward();
      CHECK_CLOSE(leaf.grad(), xt::xarray<double>(xt::broadcast(w, y.shape())), 0.0);
    }
  }
  SUBCASE("errors") {
    CHECK_ERROR("sum: ", sum(a, {3}));
    CHECK_ERROR("sum: ", sum(a, {-4}));
    CHECK_ERROR("sum: ", sum(a, {0, -3}));  // repeated axis
    CHECK_ERROR("mean: ", mean(a, {5}));
    CHECK_ERROR("mean: ", mean(a, {1, 1}));
  }
}

// ---- shape ops ---------------------------------------------------------------------------------------------------

// reshape (with -1), permute (negative dims), transpose: gradients route every element back to where it came from,
// and the forward places elements where NumPy would.
TEST_CASE("reshape, permute, transpose") {
  std::mt19937 gen(107);
  DTensor a = rand_input({2, 3, 4}, gen);

  SUBCASE("gradients") {
    struct ReshapeCase {
      std::vector<std::int64_t> shape;
      shape_t out;
    };
    const ReshapeCase reshapes[] = {
        {{4, -1}, {4, 6}}, {{-1}, {24}}, {{3, 1, -1}, {3, 1, 8}}, {{2, 12}, {2, 12}}, {{-1, 2, 2}, {6, 2, 2}}};
    for (const auto& c : reshapes) {
      INFO("reshape to " << shape_str(c.out));
      CHECK(reshape(a, c.shape).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return reshape(in[0], c.shape); }, {a});
    }
    DTensor one(xt::xarray<double>{1.5}, true);
    CHECK(reshape(one, {}).shape() == shape_t{});
    CHECK_GRADIENT([](const Inputs& in) { return reshape(in[0], {}) * in[0]; }, {one});

    struct PermuteCase {
      std::vector<int> dims;
      shape_t out;
    };
    const PermuteCase permutes[] = {
        {{2, 0, 1}, {4, 2, 3}}, {{1, 0, 2}, {3, 2, 4}}, {{-1, -3, -2}, {4, 2, 3}}, {{0, 1, 2}, {2, 3, 4}}};
    for (const auto& c : permutes) {
      INFO("permute to " << shape_str(c.out));
      CHECK(permute(a, c.dims).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return permute(in[0], c.dims); }, {a});
    }
    CHECK(transpose(a, 0, 2).shape() == shape_t{4, 3, 2});
    CHECK(transpose(a, -1, -2).shape() == shape_t{2, 4, 3});
    CHECK_GRADIENT([](const Inputs& in) { return transpose(in[0], 0, 2); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return transpose(in[0], -1, -2); }, {a});
    // Composed: a transpose feeding a reshape reads the permuted order, not the storage order.
    CHECK_GRADIENT([](const Inputs& in) { return reshape(transpose(in[0], 0, 1), {-1, 4}); }, {a});
  }
  SUBCASE("values") {
    const auto& v = a.value();
    const auto p = permute(a, {2, 0, 1}).value();  // out(k, i, j) = in(i, j, k)
    const auto t = transpose(a, 0, 2).value();     // out(k, j, i) = in(i, j, k)
    bool permuted = true, transposed = true;
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 4; ++k) {
          permuted = permuted && p(k, i, j) == v(i, j, k);
          transposed = transposed && t(k, j, i) == v(i, j, k);
        }
    CHECK(permuted);
    CHECK(transposed);
    const Tensor x(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
    CHECK_CLOSE(reshape(x, {3, -1}).value(), (xt::xarray<double>{{1, 2}, {3, 4}, {5, 6}}), 0.0);
    CHECK_CLOSE(transpose(x, 0, 1).value(), (xt::xarray<double>{{1, 4}, {2, 5}, {3, 6}}), 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("reshape: ", reshape(a, {5, 5}));   // 25 != 24 elements
    CHECK_ERROR("reshape: ", reshape(a, {-1, 5}));  // 24 is not a multiple of 5
    CHECK_ERROR("reshape: ", reshape(a, {-1, -1}));
    CHECK_ERROR("reshape: ", reshape(a, {-2, -12}));
    CHECK_ERROR("permute: ", permute(a, {0, 0, 1}));   // repeated axis
    CHECK_ERROR("permute: ", permute(a, {0, 2, -1}));  // repeated through a negative axis
    CHECK_ERROR("permute: ", permute(a, {0, 1}));
    CHECK_ERROR("permute: ", permute(a, {0, 1, 3}));
    CHECK_ERROR("transpose: ", transpose(a, 0, 3));
    // The message also names the shapes.
    CHECK_THROWS_WITH_AS(reshape(a, {5, 5}), doctest::Contains("[2, 3, 4]"), Error);
  }
}

// ---- matrix product ----------------------------------------------------------------------------------------------

// matmul: 2-D @ 2-D, the folded [..., M, K] @ [K, N] path, batched 4-D, broadcast batch dims, and a 2-D operand
// against a batched one. Values against a brute-force reference and against hand-computed numbers.
TEST_CASE("matmul") {
  std::mt19937 gen(108);
  const std::vector<MatmulCase> cases = {
      {{3, 4}, {4, 2}, {3, 2}},                    // 2-D @ 2-D
      {{2, 3, 4}, {4, 2}, {2, 3, 2}},              // 3-D @ 2-D: all rows in one GEMM
      {{2, 2, 3, 4}, {2, 2, 4, 2}, {2, 2, 3, 2}},  // batched 4-D @ 4-D
      {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},     // batch dims broadcast: [2, 1] with [5]
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},              // 2-D @ batched 3-D
      {{1, 3, 4}, {2, 4, 2}, {2, 3, 2}},           // size-1 batch dim on the left
      {{2, 3, 4}, {1, 4, 2}, {2, 3, 2}},           // size-1 batch dim on the right
  };

  SUBCASE("gradients and values against a reference") {
    check_matmul_cases(cases, gen,
                       [](const auto& a, const auto& b, const MatmulCase&) { return reference_matmul(a, b); });
    // One tensor on both sides: a @ a^T gets the gradient of both paths.
    DTensor a = rand_input({3, 4}, gen);
    CHECK_GRADIENT([](const Inputs& in) { return matmul(in[0], transpose(in[0], 0, 1)); }, {a});
    // Only one operand requires a gradient.
    DTensor w(uniform({4, 2}, gen), false);
    DTensor x = rand_input({2, 3, 4}, gen);
    CHECK_GRADIENT([&](const Inputs& in) { return matmul(in[0], w); }, {x});
  }
  SUBCASE("hand-computed values") {
    const Tensor a(xt::xarray<float>{{1, 2}, {3, 4}}), b(xt::xarray<float>{{5, 6}, {7, 8}});
    CHECK_CLOSE(matmul(a, b).value(), (xt::xarray<double>{{19, 22}, {43, 50}}), 0.0);
    const Tensor r(reshaped<float>({1, 0, -1}, {1, 3})), s(reshaped<float>({2, 3, 4}, {3, 1}));  // [1,3] @ [3,1]
    CHECK_CLOSE(matmul(r, s).value(), reshaped<double>({-2}, {1, 1}), 0.0);
    // [2, 1, 2] @ [2, 2]: each batch row times the same matrix.
    const Tensor rows(xt::xarray<float>{{{1, 1}}, {{2, -1}}});
    CHECK_CLOSE(matmul(rows, b).value(), (xt::xarray<double>{{{12, 14}}, {{3, 4}}}), 0.0);
  }
  SUBCASE("errors") {
    const Tensor m23(xt::xarray<float>::from_shape({2, 3})), m45(xt::xarray<float>::from_shape({4, 5}));
    CHECK_ERROR("matmul: ", matmul(m23, m45));  // inner sizes 3 and 4
    CHECK_THROWS_WITH_AS(matmul(m23, m45), doctest::Contains("[2, 3] @ [4, 5]"), Error);
    const Tensor v3(xt::xarray<float>::from_shape({3})), m34(xt::xarray<float>::from_shape({3, 4}));
    CHECK(matmul(v3, m34).shape() == shape_t{4});       // 1-D operands follow numpy.matmul (test_ops_shape.cpp)
    CHECK_ERROR("matmul: ", matmul(scalar(1.f), m34));  // 0-d operand
    const Tensor b234(xt::xarray<float>::from_shape({2, 3, 4})), b345(xt::xarray<float>::from_shape({3, 4, 5}));
    CHECK_ERROR("matmul: ", matmul(b234, b345));  // batch dims 2 and 3 do not broadcast
  }
}

// ---- neural-network ops ------------------------------------------------------------------------------------------

// softmax and log_softmax over the last axis, including inputs far from 0 (the row max is subtracted).
TEST_CASE("softmax, log_softmax") {
  std::mt19937 gen(109);

  SUBCASE("gradients") {
    for (const shape_t& shape : {shape_t{3, 5}, shape_t{2, 2, 4}, shape_t{4}}) {
      INFO("shape " << shape_str(shape));
      DTensor a = rand_input(shape, gen, -3.0, 3.0);
      CHECK_GRADIENT([](const Inputs& in) { return softmax(in[0]); }, {a});
      CHECK_GRADIENT([](const Inputs& in) { return log_softmax(in[0]); }, {a});
    }
    DTensor big = rand_input({2, 3}, gen, 40.0, 45.0);
    CHECK_GRADIENT([](const Inputs& in) { return softmax(in[0]); }, {big});
    CHECK_GRADIENT([](const Inputs& in) { return log_softmax(in[0]); }, {big});
  }
  SUBCASE("values") {
    const xt::xarray<double> p{0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
    const xt::xarray<double> lp{-2.40760596444438, -1.4076059644443801, -0.4076059644443803};
    CHECK_CLOSE(softmax(Tensor(xt::xarray<float>{1, 2, 3})).value(), p, 1e-6);
    CHECK_CLOSE(log_softmax(Tensor(xt::xarray<float>{1, 2, 3})).value(), lp, 1e-6);
    // Shifting a row changes nothing and large logits do not overflow.
    CHECK_CLOSE(softmax(Tensor(xt::xarray<float>{1001, 1002, 1003})).value(), p, 1e-6);
    CHECK_CLOSE(log_softmax(Tensor(xt::xarray<float>{-1001, -1000, -999})).value(), lp, 1e-4);
    // Rows are independent: each row of a 2-D input sums to 1.
    const Tensor x(xt::xarray<float>{{1, 2, 3}, {0, 0, 0}});
    CHECK_CLOSE(softmax(x).value(), (xt::xarray<double>{{p(0), p(1), p(2)}, {1. / 3, 1. / 3, 1. / 3}}), 1e-6);
  }
  SUBCASE("errors") {
    const Tensor s = scalar(1.f);
    CHECK_ERROR("softmax: ", softmax(s));
    CHECK_ERROR("log_softmax: ", log_softmax(s));
  }
}

// log_softmax in float near a large max: computed as (x - max) - log(sum), the result keeps float precision where
// x - (max + log(sum)) lost it (max + log(sum) rounds log(sum) to the ulp of 1300, 1.2e-4). Checked against the
// same op in float64, over random rows with large offsets and the reported row [1300, 1292.5].
TEST_CASE("log_softmax in float matches float64 for large logits") {
  const Tensor reported(xt::xarray<float>{1300.f, 1292.5f});
  // float64: -log(1 + exp(-7.5)) = -5.5298e-4 (PyTorch float32 gives -5.530e-4)
  const double want = -std::log1p(std::exp(-7.5));
  CHECK(log_softmax(reported).value()(0) == doctest::Approx(want).epsilon(1e-5));
  std::mt19937 gen(1300);
  for (const double offset : {0.0, 1e3, -1e3, 3e4}) {
    INFO("offset " << offset);
    const xt::xarray<double> x = uniform({16, 7}, gen, offset - 10.0, offset + 10.0);
    const xt::xarray<float> xf = xt::cast<float>(x);
    const xt::xarray<double> exact = log_softmax(DTensor(xt::cast<double>(xf))).value();
    const xt::xarray<double> got = xt::cast<double>(log_softmax(Tensor(xf)).value());
    // x - max is exact in float (Sterbenz); what is left is the float sum and log: a few ulp of 1 + |result|.
    CHECK(xt::all(xt::abs(got - exact) <= 4e-7 * (1.0 + xt::abs(exact))));
  }
}

// masked_fill: masked positions hold the value and pass no gradient; the mask broadcasts to the input's shape.
TEST_CASE("masked_fill") {
  std::mt19937 gen(110);
  DTensor a = rand_input({3, 4}, gen);
  xt::xarray<bool> full{{true, false, false, true}, {false, false, true, false}, {true, true, false, false}};
  xt::xarray<bool> cols{{false, true, false, true}};  // [1, 4]
  xt::xarray<bool> rows = reshaped<bool>({true, false, false}, {3, 1});

  SUBCASE("gradients") {
    for (const auto* mask : {&full, &cols, &rows}) {
      INFO("mask shape " << shape_str(shape_of(*mask)));
      CHECK_GRADIENT([mask](const Inputs& in) { return masked_fill(in[0], *mask, 0.75); }, {a});
    }
    // The usual attention use: mask with -inf, then softmax (some positions of every row masked).
    CHECK_GRADIENT(
        [&](const Inputs& in) { return softmax(masked_fill(in[0], full, -std::numeric_limits<double>::infinity())); },
        {a});
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}});
    CHECK_CLOSE(masked_fill(x, full, -1.0).value(),
                (xt::xarray<double>{{-1, 2, 3, -1}, {5, 6, -1, 8}, {-1, -1, 11, 12}}), 0.0);
    CHECK_CLOSE(masked_fill(x, cols, 0.0).value(), (xt::xarray<double>{{1, 0, 3, 0}, {5, 0, 7, 0}, {9, 0, 11, 0}}),
                0.0);
    CHECK_CLOSE(softmax(masked_fill(x, cols, -INFINITY)).value()(0, 0), 0.11920292202211755, 1e-6);  // 1/(1+e^2)
  }
  SUBCASE("errors") {
    CHECK_ERROR("masked_fill: ", masked_fill(a, xt::xarray<bool>::from_shape({2, 4}), 0.0));     // does not broadcast
    CHECK_ERROR("masked_fill: ", masked_fill(a, xt::xarray<bool>::from_shape({2, 3, 4}), 0.0));  // broadcasts past a
  }
}

// Documented: a softmax row whose every entry is -inf (fully masked) is all zeros, not NaN, and passes zero gradient.
TEST_CASE("softmax of a fully masked row: zeros, zero gradient, no NaN") {
  xt::xarray<bool> mask{{false, true, false, true}, {true, true, true, true}, {false, false, false, false}};

  SUBCASE("float32, as in training") {
    Tensor a(xt::xarray<float>{{0.5f, -1.f, 2.f, 0.f}, {1.f, 2.f, 3.f, 4.f}, {-0.5f, 0.25f, 1.f, 3.f}}, true);
    const Tensor p = softmax(masked_fill(a, mask, -INFINITY));
    CHECK(all_finite(p.value()));
    CHECK_CLOSE(xt::view(p.value(), 1), (xt::xarray<double>{0, 0, 0, 0}), 0.0);
    CHECK(xt::sum(xt::view(p.value(), 0))() == doctest::Approx(1.0));
    CHECK(xt::sum(xt::view(p.value(), 2))() == doctest::Approx(1.0));
    p.backward(xt::xarray<float>{{1, 2, 3, 4}, {5, 6, 7, 8}, {-1, 0, 1, 2}});
    CHECK(all_finite(a.grad()));
    CHECK_CLOSE(xt::view(a.grad(), 1), (xt::xarray<double>{0, 0, 0, 0}), 0.0);
    CHECK(a.grad()(0, 1) == 0.f);  // masked in a partially masked row
    CHECK(a.grad()(0, 3) == 0.f);
  }
  SUBCASE("float64 gradient check") {
    std::mt19937 gen(111);
    DTensor a = rand_input({3, 4}, gen);
    CHECK_GRADIENT([&](const Inputs& in) { return softmax(masked_fill(in[0], mask, -INFINITY)); }, {a});
  }
}

// layer_norm over the last axis with and without weight/bias, on 2-D and 3-D inputs.
TEST_CASE("layer_norm") {
  std::mt19937 gen(112);

  SUBCASE("gradients") {
    DTensor x = rand_input({3, 5}, gen), w = rand_input({5}, gen, 0.5, 1.5), b = rand_input({5}, gen);
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], DTensor(), DTensor()); }, {x});
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], in[1], DTensor()); }, {x, w});
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], DTensor(), in[1]); }, {x, b});
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 0.1); }, {x, w, b});
    DTensor x3 = rand_input({2, 2, 4}, gen), w4 = rand_input({4}, gen, 0.5, 1.5), b4 = rand_input({4}, gen);
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); }, {x3, w4, b4});
    // Constant weight and bias: only x is checked.
    const DTensor wc = w.detach(), bc = b.detach();
    CHECK_GRADIENT([&](const Inputs& in) { return layer_norm(in[0], wc, bc); }, {x});
  }
  SUBCASE("values") {
    // Row [1, 2, 3, 4]: mean 2.5, biased variance 1.25.
    const Tensor x(xt::xarray<float>{{1, 2, 3, 4}});
    const double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
    const xt::xarray<double> xhat{{-1.5 * rstd, -0.5 * rstd, 0.5 * rstd, 1.5 * rstd}};
    CHECK_CLOSE(layer_norm(x, Tensor(), Tensor()).value(), xhat, 1e-6);
    const Tensor w(xt::xarray<float>{2, 0.5, 1, -1}), b(xt::xarray<float>{0.1f, 0.2f, 0.3f, 0.4f});
    CHECK_CLOSE(layer_norm(x, w, b).value(),
                (xt::xarray<double>{{-3 * rstd + 0.1, -0.25 * rstd + 0.2, 0.5 * rstd + 0.3, -1.5 * rstd + 0.4}}), 1e-6);
    // eps is added to the variance: with eps = 0.75 the variance term is exactly 2.
    const double r2 = 1.0 / std::sqrt(2.0);
    CHECK_CLOSE(layer_norm(x, Tensor(), Tensor(), 0.75).value(),
                (xt::xarray<double>{{-1.5 * r2, -0.5 * r2, 0.5 * r2, 1.5 * r2}}), 1e-6);
  }
  SUBCASE("errors") {
    const Tensor x(xt::xarray<float>::from_shape({2, 5}));
    const Tensor w4(xt::xarray<float>::from_shape({4})), w51(xt::xarray<float>::from_shape({5, 1}));
    CHECK_ERROR("layer_norm: ", layer_norm(x, w4, Tensor()));   // weight of the wrong size
    CHECK_ERROR("layer_norm: ", layer_norm(x, Tensor(), w51));  // bias of the wrong rank
    CHECK_ERROR("layer_norm: ", layer_norm(scalar(1.f), Tensor(), Tensor()));
  }
}

// layer_norm over several trailing axes (normalized_shape, as torch.nn.functional.layer_norm): one mean and variance
// per group of trailing elements, weight and bias of normalized_shape.
TEST_CASE("layer_norm over several trailing axes") {
  std::mt19937 gen(116);

  SUBCASE("gradients") {
    DTensor x = rand_input({2, 3, 4}, gen), w = rand_input({3, 4}, gen, 0.5, 1.5), b = rand_input({3, 4}, gen);
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); }, {x, w, b});
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], {3, 4}, DTensor(), DTensor()); }, {x});
    DTensor all = rand_input({2, 3, 2}, gen), w_all = rand_input({2, 3, 2}, gen, 0.5, 1.5);
    CHECK_GRADIENT([](const Inputs& in) { return layer_norm(in[0], {2, 3, 2}, in[1], DTensor(), 0.1); }, {all, w_all});
  }
  SUBCASE("values") {
    // Equals layer_norm over the last axis of x with the normalised axes flattened into one.
    const xt::xarray<double> x = uniform({2, 3, 4}, gen), w = uniform({3, 4}, gen), b = uniform({3, 4}, gen);
    const DTensor got = layer_norm(DTensor(x), {3, 4}, DTensor(w), DTensor(b));
    const DTensor flat =
        layer_norm(DTensor(reshaped(x, {2, 12})), DTensor(reshaped(w, {12})), DTensor(reshaped(b, {12})));
    CHECK_CLOSE(got.value(), reshaped(flat.value(), {2, 3, 4}), 1e-12);
    // One trailing axis is the four-argument form, bit for bit.
    const xt::xarray<float> xf = xt::cast<float>(x);
    const xt::xarray<float> wf = xt::cast<float>(xt::xarray<double>(xt::view(w, 0))),
                            bf = xt::cast<float>(xt::xarray<double>(xt::view(b, 0)));
    CHECK(layer_norm(Tensor(xf), {4}, Tensor(wf), Tensor(bf)).value() ==
          layer_norm(Tensor(xf), Tensor(wf), Tensor(bf)).value());
  }
  SUBCASE("errors") {
    const Tensor x(xt::xarray<float>::from_shape({2, 3, 4}));
    const Tensor w34(xt::xarray<float>::from_shape({3, 4})), w12(xt::xarray<float>::from_shape({12}));
    CHECK_ERROR("normalized_shape [4, 3]", layer_norm(x, {4, 3}, Tensor(), Tensor()));  // not the trailing axes
    CHECK_ERROR("normalized_shape [1, 2, 3, 4]", layer_norm(x, {1, 2, 3, 4}, Tensor(), Tensor()));  // too many
    CHECK_ERROR("normalized_shape []", layer_norm(x, shape_t{}, Tensor(), Tensor()));
    CHECK_ERROR("weight/bias must have shape [3, 4]", layer_norm(x, {3, 4}, w12, Tensor()));
    CHECK_ERROR("weight/bias must have shape [3, 4]", layer_norm(x, {3, 4}, w34, w12));
    const Tensor empty(xt::xarray<float>::from_shape({2, 0}));
    CHECK_ERROR("is empty", layer_norm(empty, {0}, Tensor(), Tensor()));
  }
}

// embedding: gathered rows; a row picked several times accumulates the gradient of every pick.
TEST_CASE("embedding") {
  std::mt19937 gen(113);
  DTensor w = rand_input({5, 3}, gen);

  SUBCASE("gradients") {
    const index_array repeated{{0, 2, 2}, {4, 0, 1}};
    CHECK(embedding(w, repeated).shape() == shape_t{2, 3, 3});
    CHECK_GRADIENT([&](const Inputs& in) { return embedding(in[0], repeated); }, {w});
    const index_array same{3, 3, 3, 3};
    CHECK_GRADIENT([&](const Inputs& in) { return embedding(in[0], same); }, {w});
    index_array one = index_array::from_shape({});  // 0-d index → one row [D]
    one() = 4;
    CHECK(embedding(w, one).shape() == shape_t{3});
    CHECK_GRADIENT([&](const Inputs& in) { return embedding(in[0], one); }, {w});
  }
  SUBCASE("values") {
    Tensor table(xt::xarray<float>{{0, 1}, {10, 11}, {20, 21}}, true);
    const Tensor out = embedding(table, index_array{2, 0, 2});
    CHECK_CLOSE(out.value(), (xt::xarray<double>{{20, 21}, {0, 1}, {20, 21}}), 0.0);
    sum(out).backward();
    CHECK_CLOSE(table.grad(), (xt::xarray<double>{{1, 1}, {0, 0}, {2, 2}}), 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("embedding: ", embedding(w, index_array{0, 5}));  // V = 5
    CHECK_ERROR("embedding: ", embedding(w, index_array{-1, 0}));
    CHECK_THROWS_WITH_AS(embedding(w, index_array{0, 1, 7}), doctest::Contains("index 7"), Error);
    const DTensor flat(xt::xarray<double>::from_shape({5}));
    CHECK_ERROR("embedding: ", embedding(flat, index_array{0}));  // weight must be 2-D
  }
}

/// Gradient checks of a loss with ignored (-1) targets: on [4, 5] logits in [-2, 2] with targets t2, then on
/// [2, 3, 4] logits in [-range3, range3]. Returns the [4, 5] logits for further checks.
template <class Loss>
DTensor check_masked_loss_gradients(const Loss& loss, std::mt19937& gen, const index_array& t2, double range3) {
  DTensor l2 = rand_input({4, 5}, gen, -2.0, 2.0);
  CHECK_GRADIENT([&](const Inputs& in) { return loss(in[0], t2); }, {l2});
  DTensor l3 = rand_input({2, 3, 4}, gen, -range3, range3);
  const index_array t3{{0, 3, -1}, {2, -1, 1}};
  CHECK_GRADIENT([&](const Inputs& in) { return loss(in[0], t3); }, {l3});
  return l2;
}

// z_loss: mean of logsumexp(logits)^2 over positions whose target is not ignore_index (PaLM's auxiliary loss).
TEST_CASE("z_loss") {
  std::mt19937 gen(115);
  SUBCASE("gradients") {
    const index_array t2{1, -1, 3, -1};
    DTensor l2 = check_masked_loss_gradients([](const auto& l, const auto& t) { return z_loss(l, t); }, gen, t2, 3.0);
    // The loss the trainer minimises with --z-loss: cross-entropy plus coefficient times z-loss.
    CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t2) + z_loss(in[0], t2) * 1e-2; }, {l2});
  }
  SUBCASE("values") {
    // Uniform logits over 3 classes: log Z = log 3 at each counted row; ignored rows do not count.
    CHECK(z_loss(Tensor(xt::xarray<float>{{0, 0, 0}, {50, 0, 0}}), index_array{1, -1}).item() ==
          doctest::Approx(std::log(3.0) * std::log(3.0)));
    // The mean of (log Z_i)^2 by hand, in double.
    const DTensor l(uniform({3, 4}, gen, -2.0, 2.0));
    double expected = 0;
    for (std::size_t i : {0, 2}) {
      double z = 0;
      for (std::size_t j = 0; j < 4; ++j) z += std::exp(l.value()(i, j));
      expected += std::log(z) * std::log(z) / 2;
    }
    CHECK(z_loss(l, index_array{2, -1, 0}).item() == doctest::Approx(expected).epsilon(1e-12));
    CHECK(z_loss(Tensor(xt::xarray<float>{{1, 2}, {3, 4}}), index_array{-1, -1}).item() == 0.f);
  }
  SUBCASE("errors") {
    CHECK_ERROR("z_loss: targets of shape", z_loss(Tensor(xt::xarray<float>{{1, 2}}), index_array{0, 1}));
  }
}

// cross_entropy: mean over positions whose target is not ignore_index, 1-D/2-D/3-D logits.
TEST_CASE("cross_entropy") {
  std::mt19937 gen(114);

  SUBCASE("gradients") {
    DTensor l2 = check_masked_loss_gradients([](const auto& l, const auto& t) { return cross_entropy(l, t); }, gen,
                                             index_array{1, -1, 3, -1}, 2.0);
    DTensor l1 = rand_input({5}, gen, -2.0, 2.0);
    index_array t0 = index_array::from_shape({});
    t0() = 2;
    CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t0); }, {l1});
    // A custom ignore_index: positions with target 2 drop out, -1 is then out of range (see errors).
    const index_array t2b{1, 2, 3, 2};
    CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t2b, 2); }, {l2});
    // Large logits in double: still stable.
    DTensor big = rand_input({3, 4}, gen, -300.0, 300.0);
    CHECK_GRADIENT([](const Inputs& in) { return cross_entropy(in[0], index_array{0, 3, 1}); }, {big});
  }
  SUBCASE("values") {
    // Uniform logits: log C.
    CHECK(cross_entropy(Tensor(xt::xarray<float>{{0, 0, 0}}), index_array{1}).item() == doctest::Approx(std::log(3.0)));
    // Ignored positions do not enter the mean's denominator.
    CHECK(cross_entropy(Tensor(xt::xarray<float>{{0, 0, 0}, {100, 0, 0}}), index_array{0, -1}).item() ==
          doctest::Approx(std::log(3.0)));
    // Equals -mean(log_softmax(logits)[i, t_i]) over the kept positions.
    const DTensor l(uniform({3, 4}, gen, -2.0, 2.0));
    const auto lp = log_softmax(l).value();
    CHECK(cross_entropy(l, index_array{2, -1, 0}).item() == doctest::Approx(-(lp(0, 2) + lp(2, 0)) / 2).epsilon(1e-12));
    // Far-apart float32 logits: logsumexp([-431, 279, 427]) - (-431) = 858 exactly in float; the gradient is
    // softmax - onehot = [-1, 0, 1] and finite.
    Tensor far(xt::xarray<float>{-431.f, 279.f, 427.f}, true);
    index_array t = index_array::from_shape({});
    t() = 0;
    const Tensor loss = cross_entropy(far, t);
    CHECK(loss.item() == 858.f);
    loss.backward();
    CHECK(all_finite(far.grad()));
    CHECK_CLOSE(far.grad(), (xt::xarray<double>{-1, 0, 1}), 1e-6);
    // No position carries a target: loss 0 and zero gradient (documented).
    Tensor none(xt::xarray<float>{{1, 2}, {3, 4}}, true);
    const Tensor zero = cross_entropy(none, index_array{-1, -1});
    CHECK(zero.item() == 0.f);
    zero.backward();
    CHECK_CLOSE(none.grad(), (xt::xarray<double>{{0, 0}, {0, 0}}), 0.0);
  }
  SUBCASE("errors") {
    const Tensor logits(xt::xarray<float>::from_shape({4, 5}));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 5, 1, 2}));   // C = 5
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, -2, 1, 2}));  // negative, not ignore_index
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, -1, 1, 2}, 7));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 1, 2}));  // targets [3] vs logits [4, 5]
  }
}

// cross_entropy's reduction (as torch.nn.functional.cross_entropy): none keeps one loss per position (0 where the
// target is ignored), sum adds them, mean (the default) divides the sum by the counted positions.
TEST_CASE("cross_entropy reduction: none, sum, mean") {
  std::mt19937 gen(117);
  const index_array t2{1, -1, 3, 0};
  const index_array t3{{0, 3, -1}, {2, -1, 1}};

  SUBCASE("gradients") {
    DTensor l2 = rand_input({4, 5}, gen, -2.0, 2.0), l3 = rand_input({2, 3, 4}, gen, -2.0, 2.0);
    for (const Reduction reduction : {Reduction::none, Reduction::sum, Reduction::mean}) {
      INFO("reduction " << static_cast<int>(reduction));
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t2, -1, 0.0, reduction); }, {l2});
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t3, -1, 0.0, reduction); }, {l3});
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t2, -1, 0.2, reduction); }, {l2});
    }
  }
  SUBCASE("values") {
    const DTensor l(uniform({4, 5}, gen, -2.0, 2.0));
    const auto lp = log_softmax(l).value();
    const DTensor none = cross_entropy(l, t2, -1, 0.0, Reduction::none);
    CHECK_CLOSE(none.value(), (xt::xarray<double>{-lp(0, 1), 0.0, -lp(2, 3), -lp(3, 0)}), 1e-12);
    const double total = -(lp(0, 1) + lp(2, 3) + lp(3, 0));
    CHECK(cross_entropy(l, t2, -1, 0.0, Reduction::sum).item() == doctest::Approx(total).epsilon(1e-12));
    CHECK(cross_entropy(l, t2, -1, 0.0, Reduction::mean).item() == doctest::Approx(total / 3).epsilon(1e-12));
    CHECK(cross_entropy(l, t2).item() == cross_entropy(l, t2, -1, 0.0, Reduction::mean).item());
    // none keeps the targets' shape; smoothing applies per position.
    const DTensor l3(uniform({2, 3, 4}, gen, -2.0, 2.0));
    const DTensor n3 = cross_entropy(l3, t3, -1, 0.1, Reduction::none);
    REQUIRE(n3.shape() == shape_t{2, 3});
    CHECK(n3.value()(0, 2) == 0.0);
    CHECK(n3.value()(1, 1) == 0.0);
    CHECK(xt::sum(n3.value())() ==
          doctest::Approx(cross_entropy(l3, t3, -1, 0.1, Reduction::sum).item()).epsilon(1e-12));
    // No counted position: sum is 0 with zero gradient; none is all zeros.
    DTensor z(uniform({2, 3}, gen), true);
    const DTensor s = cross_entropy(z, index_array{-1, -1}, -1, 0.0, Reduction::sum);
    CHECK(s.item() == 0.0);
    s.backward();
    CHECK_CLOSE(z.grad(), (xt::xarray<double>{{0, 0, 0}, {0, 0, 0}}), 0.0);
    CHECK_CLOSE(cross_entropy(z, index_array{-1, -1}, -1, 0.0, Reduction::none).value(), (xt::xarray<double>{0, 0}),
                0.0);
  }
}

// ---- composition -------------------------------------------------------------------------------------------------

// A tiny causal self-attention block with a residual and layer norm: gradients through several ops at once, with
// tensors reused on several paths.
TEST_CASE("ops compose: a small attention block") {
  std::mt19937 gen(115);
  DTensor x = rand_input({2, 3, 4}, gen), wq = rand_input({4, 4}, gen), wk = rand_input({4, 4}, gen),
          wv = rand_input({4, 4}, gen);
  const xt::xarray<bool> causal{{false, true, true}, {false, false, true}, {false, false, false}};
  auto block = [&](const Inputs& in) {
    const DTensor q = matmul(in[0], in[1]), k = matmul(in[0], in[2]), v = matmul(in[0], in[3]);
    const DTensor scores = masked_fill(matmul(q, transpose(k, -1, -2)) * 0.5, causal, -INFINITY);
    const DTensor y = in[0] + matmul(softmax(scores), v);
    return gelu(layer_norm(y, DTensor(), DTensor()));
  };
  CHECK_GRADIENT(block, {x, wq, wk, wv});
}

// ---- edge cases found in review ------------------------------------------------------------------------------

TEST_CASE("log_softmax of a fully masked row is all -inf with zero gradient, never NaN") {
  DTensor x(xt::xarray<double>{-INFINITY, -INFINITY, -INFINITY}, true);
  DTensor y = log_softmax(x);
  for (std::size_t j = 0; j < 3; ++j) CHECK(y.value()(j) == -INFINITY);
  y.backward(xt::xarray<double>{1.0, 2.0, 3.0});
  for (std::size_t j = 0; j < 3; ++j) CHECK(x.grad()(j) == 0.0);
}

TEST_CASE("pow_scalar with exponent 0 has zero gradient, also at x = 0") {
  DTensor x(xt::xarray<double>{0.0, 2.0}, true);
  sum(pow_scalar(x, 0.0)).backward();
  CHECK(x.grad()(0) == 0.0);
  CHECK(x.grad()(1) == 0.0);
}

TEST_CASE("empty tensors: reductions over a zero-length axis and broadcasting backward give zeros, never crash") {
  Tensor a = ones<float>({0, 4}, true);
  Tensor s = sum(a, {0});
  CHECK(s.shape() == shape_t{4});
  CHECK(s.value() == xt::zeros<float>({4}));
  sum(s).backward();
  CHECK(a.grad().shape() == a.value().shape());
  CHECK(mean(a, {1}).shape() == shape_t{0});
  Tensor b = ones<float>({1, 3}, true), c = ones<float>({0, 3}, true);
  sum(add(c, b)).backward();
  CHECK(b.grad() == xt::zeros<float>({1, 3}));
  Tensor w = ones<float>({3}, true);
  sum(mul(c, w)).backward();
  CHECK(w.grad() == xt::zeros<float>({3}));
}

TEST_CASE("bad sizes found in review are errors naming the op") {
  CHECK_THROWS_WITH_AS(reshape(ones<float>({4}), {4611686018427387905LL, 4}), doctest::Contains("reshape:"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(ones<float>({2, 0}), index_array({0, 0})), doctest::Contains("no classes"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(ones<float>({2, 3}), Tensor(), Tensor(), -1.0), doctest::Contains("eps"), Error);
  CHECK_THROWS_WITH_AS(sum(scalar<float>(1.f), {0}), doctest::Contains("0-d tensor"), Error);
}

TEST_CASE("sum_over_axes matches a direct sum on leading, trailing, middle and mixed axes") {
  xt::xarray<double> x = xt::xarray<double>::from_shape({2, 3, 4});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<double>(i * i % 7);
  auto direct = [&](std::size_t i, std::size_t j, std::size_t k, const std::vector<bool>& red) {
    double s = 0;
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t b = 0; b < 3; ++b)
        for (std::size_t c = 0; c < 4; ++c)
          if ((red[0] || a == i) && (red[1] || b == j) && (red[2] || c == k)) s += x(a, b, c);
    return s;
  };
  for (const std::vector<std::size_t>& axes : {std::vector<std::size_t>{0}, {2}, {1}, {0, 2}, {0, 1}, {0, 1, 2}}) {
    std::vector<bool> red(3, false);
    for (auto a : axes) red[a] = true;
    const auto out = sum_over_axes(x, axes);
    for (std::size_t i = 0; i < out.shape(0); ++i)
      for (std::size_t j = 0; j < out.shape(1); ++j)
        for (std::size_t k = 0; k < out.shape(2); ++k) CHECK(out(i, j, k) == direct(i, j, k, red));
  }
}

// The sgemm count (autograd/blas.h) that the benchmarks divide step times by: exact per call, by shape.
namespace {
std::uint64_t calls_of(const std::vector<blas::GemmCount>& counts, bool ta, bool tb, std::size_t m, std::size_t n,
                       std::size_t k) {
  for (const auto& g : counts)
    if (g.trans_a == ta && g.trans_b == tb && g.m == m && g.n == n && g.k == k) return g.calls;
  return 0;
}
}  // namespace

TEST_CASE("gemm counting: a batched matmul and its backward count 2 m n k per call, by shape, only while on") {
  std::mt19937 gen(11);
  Tensor a(xt::xarray<float>(uniform({2, 3, 4}, gen)), true), b(xt::xarray<float>(uniform({4, 5}, gen)), true);
  blas::reset_gemm_counts();
  matmul(a, b);  // counting is off by default: nothing recorded
  CHECK(blas::gemm_counts().empty());
  blas::set_gemm_counting(true);
  Tensor c = matmul(a, b);  // [2, 3, 4] @ [4, 5]: the batch folded into the rows, one [6, 4] @ [4, 5] call
  sum(c).backward();        // dA = dC B^T: (N, T) [6, 5] x [4, 5]; dB = A^T dC: (T, N) [6, 4] x [6, 5]
  blas::set_gemm_counting(false);
  const auto counts = blas::gemm_counts();
  CHECK(counts.size() == 3);
  CHECK(calls_of(counts, false, false, 6, 5, 4) == 1);
  CHECK(calls_of(counts, false, true, 6, 4, 5) == 1);
  CHECK(calls_of(counts, true, false, 4, 5, 6) == 1);
  // Exact: whole numbers of flops well below 2^53.
  CHECK(blas::counted_gemm_flops() == 3 * 2.0 * 6 * 5 * 4);
  matmul(a, b);  // paused: the tally stays
  CHECK(blas::counted_gemm_flops() == 3 * 2.0 * 6 * 5 * 4);
  blas::reset_gemm_counts();
  CHECK(blas::gemm_counts().empty());
  CHECK(blas::counted_gemm_flops() == 0);
}

TEST_CASE("gemm counting: calls from the thread pool's workers are all counted, empty products are not") {
  // 64 [3, 4] @ [4, 2] products, one per index of a parallel loop split into chunks of one over two threads.
  const std::vector<float> a(12, 1.0f), b(8, 1.0f);
  std::vector<float> c(64 * 6);
  xgrad::set_num_threads(2);
  blas::reset_gemm_counts();
  blas::set_gemm_counting(true);
  xgrad::parallel_for(0, 64, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i)
      blas::gemm<float>(false, false, 3, 2, 4, 1.0f, a.data(), 4, b.data(), 2, 0.0f, c.data() + 6 * i, 2);
  });
  blas::gemm<float>(false, false, 0, 2, 4, 1.0f, a.data(), 4, b.data(), 2, 0.0f, c.data(), 2);  // m = 0: no BLAS call
  blas::set_gemm_counting(false);
  xgrad::set_num_threads(1);
  CHECK(calls_of(blas::gemm_counts(), false, false, 3, 2, 4) == 64);
  CHECK(blas::gemm_counts().size() == 1);
  CHECK(blas::counted_gemm_flops() == 64 * 2.0 * 3 * 2 * 4);
  CHECK(c[6 * 63] == 4.0f);  // the products ran
  blas::reset_gemm_counts();
}
