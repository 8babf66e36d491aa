// The second half of the op set: tensor-tensor pow, maximum/minimum, rsqrt, abs, silu, gelu_erf, clamp,
// comparisons and where; max/min/var/logsumexp reductions; softmax/log_softmax along any axis, label-smoothed
// cross_entropy, rms_norm and dropout. As tests/test_ops.cpp: float64 gradient checks on small seeded random
// inputs (including broadcast and size-1 dims), forward values against hand-computed numbers, and the
// xgrad::Error each op raises.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "tests/support/op_testing.h"

using namespace xgrad;
using namespace xgrad::testing;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::string axes_str(const std::vector<int>& axes, bool keepdim) {
  std::ostringstream out;
  out << "axes";
  for (int ax : axes) out << ' ' << ax;
  out << (keepdim ? ", keepdim" : ", no keepdim");
  return out.str();
}

/// Reductions over several axis lists of a [2, 3, 4] input, and the output shapes.
struct AxesCase {
  std::vector<int> axes;
  bool keepdim;
  shape_t out;
};
const AxesCase axes_cases[] = {
    {{1}, false, {2, 4}},      {{1}, true, {2, 1, 4}}, {{-1}, false, {2, 3}},         {{0, 2}, false, {3}},
    {{2, 0}, true, {1, 3, 1}}, {{0, 1, 2}, false, {}}, {{0, -2, 2}, true, {1, 1, 1}},
};

/// Pairs of shapes that broadcast, with the broadcast shape: size-1 dims, differing ranks, 0-d on either side.
struct ShapeCase {
  shape_t a, b, out;
};
const ShapeCase broadcast_cases[] = {
    {{2, 3}, {2, 3}, {2, 3}}, {{2, 1, 3}, {4, 3}, {2, 4, 3}}, {{2, 3}, {}, {2, 3}},
    {{}, {2, 3}, {2, 3}},     {{3, 1}, {1, 4}, {3, 4}},       {{1}, {}, {1}},
};

}  // namespace

// ---- binary elementwise, broadcasting ----------------------------------------------------------------------------

// pow(a, b): both gradients through broadcasting, positive bases (where d/db = a^b log a is defined).
TEST_CASE("pow: tensor ** tensor") {
  std::mt19937 gen(201);

  SUBCASE("gradients") {
    for (const auto& c : broadcast_cases) {
      INFO(shape_str(c.a) << " ** " << shape_str(c.b));
      DTensor a = rand_input(c.a, gen, 0.3, 2.0), b = rand_input(c.b, gen, -2.0, 2.0);
      CHECK(pow(a, b).shape() == c.out);
      CHECK_GRADIENT([](const Inputs& in) { return pow(in[0], in[1]); }, {a, b});
    }
    // Negative bases with a constant integer exponent: d/da = b a^(b-1) is fine there.
    DTensor neg_base = rand_input({2, 3}, gen, -2.0, -0.3);
    const DTensor cubes(xt::xarray<double>{3.0, 2.0, -1.0});
    CHECK_GRADIENT([&](const Inputs& in) { return pow(in[0], cubes); }, {neg_base});
  }
  SUBCASE("values") {
    const Tensor a(xt::xarray<float>{{2, 4, 9}, {1, 3, 0.5f}}), b(xt::xarray<float>{3, 0.5f, -1});
    CHECK_CLOSE(pow(a, b).value(), (xt::xarray<double>{{8, 2, 1.0 / 9}, {1, std::sqrt(3.0), 2}}), 1e-6);
    CHECK_CLOSE(pow(DTensor(xt::xarray<double>{-2.0}), DTensor(xt::xarray<double>{3.0})).value(),
                (xt::xarray<double>{-8}), 0.0);
  }
  SUBCASE("gradients at a <= 0 (documented)") {
    DTensor a(xt::xarray<double>{0.0, 0.0, 0.0, -2.0}, true), b(xt::xarray<double>{2.0, 0.0, -1.0, 3.0}, true);
    sum(pow(a, b)).backward();
    // d/da = b a^(b-1): 0 at (0, 2); 0 for b == 0 even at a == 0; -inf at (0, -1); 3 * 4 at (-2, 3).
    CHECK(a.grad()(0) == 0.0);
    CHECK(a.grad()(1) == 0.0);
    CHECK(a.grad()(2) == -inf);
    CHECK(a.grad()(3) == 12.0);
    // d/db = a^b log a: 0 at a == 0 with b >= 0; -inf at a == 0, b < 0 (inf * -inf); NaN for a < 0.
    CHECK(b.grad()(0) == 0.0);
    CHECK(b.grad()(1) == 0.0);
    CHECK(b.grad()(2) == -inf);
    CHECK(std::isnan(b.grad()(3)));
  }
  SUBCASE("errors") {
    const DTensor p(xt::xarray<double>::from_shape({2, 3})), q(xt::xarray<double>::from_shape({4, 3}));
    CHECK_ERROR("pow: ", pow(p, q));
  }
}

// maximum/minimum: gradients through broadcasting away from ties, and the half/half split at ties.
TEST_CASE("maximum, minimum") {
  std::mt19937 gen(202);

  SUBCASE("gradients") {
    for (const auto& c : broadcast_cases) {
      INFO(shape_str(c.a) << " with " << shape_str(c.b));
      DTensor a = rand_input(c.a, gen), b = rand_input(c.b, gen);
      CHECK(maximum(a, b).shape() == c.out);
      CHECK(minimum(a, b).shape() == c.out);
      CHECK_GRADIENT([](const Inputs& in) { return maximum(in[0], in[1]); }, {a, b});
      CHECK_GRADIENT([](const Inputs& in) { return minimum(in[0], in[1]); }, {a, b});
    }
  }
  SUBCASE("ties split the gradient half/half") {
    DTensor a(xt::xarray<double>{1, 2, 3}, true), b(xt::xarray<double>{1, 0, 5}, true);
    sum(maximum(a, b)).backward();
    CHECK_CLOSE(a.grad(), (xt::xarray<double>{0.5, 1, 0}), 0.0);
    CHECK_CLOSE(b.grad(), (xt::xarray<double>{0.5, 0, 1}), 0.0);
    a.zero_grad();
    b.zero_grad();
    sum(minimum(a, b)).backward();
    CHECK_CLOSE(a.grad(), (xt::xarray<double>{0.5, 0, 1}), 0.0);
    CHECK_CLOSE(b.grad(), (xt::xarray<double>{0.5, 1, 0}), 0.0);
    // The same tensor on both sides: the halves add back up to 1.
    DTensor x(xt::xarray<double>{-1, 4}, true);
    sum(maximum(x, x)).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{1, 1}), 0.0);
    // gradcheck sees the kinks at the ties and accepts 0.5, which lies between the one-sided derivatives.
    DTensor p = rand_input({2, 3}, gen), q = rand_input({2, 3}, gen);
    q.mutable_value()(0, 1) = p.value()(0, 1);
    q.mutable_value()(1, 2) = p.value()(1, 2);
    const GradcheckResult r = gradcheck([](const Inputs& in) { return maximum(in[0], in[1]); }, {p, q});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.kinks == 4);  // two ties, each seen from both inputs
    CHECK_GRADIENT([](const Inputs& in) { return minimum(in[0], in[1]); }, {p, q});
  }
  SUBCASE("values") {
    const Tensor a(xt::xarray<float>{{1, 5}, {-2, 0}}), col(reshaped<float>({3, -1}, {2, 1}));
    CHECK_CLOSE(maximum(a, col).value(), (xt::xarray<double>{{3, 5}, {-1, 0}}), 0.0);
    CHECK_CLOSE(minimum(a, col).value(), (xt::xarray<double>{{1, 3}, {-2, -1}}), 0.0);
    // NaN propagates from either side.
    const DTensor n(xt::xarray<double>{NAN, 1.0}), m(xt::xarray<double>{0.0, NAN});
    for (const auto& v : {maximum(n, m).value(), minimum(n, m).value(), maximum(m, n).value()}) {
      CHECK(std::isnan(v(0)));
      CHECK(std::isnan(v(1)));
    }
  }
  SUBCASE("errors") {
    const DTensor p(xt::xarray<double>::from_shape({2, 3})), q(xt::xarray<double>::from_shape({3, 2}));
    CHECK_ERROR("maximum: ", maximum(p, q));
    CHECK_ERROR("minimum: ", minimum(p, q));
  }
}

// ---- unary elementwise -------------------------------------------------------------------------------------------

TEST_CASE("rsqrt, abs, silu, gelu_erf") {
  std::mt19937 gen(203);

  SUBCASE("gradients") {
    DTensor pos = rand_input({2, 3}, gen, 0.2, 3.0);
    DTensor wide = rand_input({3, 4}, gen, -4.0, 4.0);
    CHECK_GRADIENT([](const Inputs& in) { return rsqrt(in[0]); }, {pos});
    CHECK_GRADIENT([](const Inputs& in) { return silu(in[0]); }, {wide});
    CHECK_GRADIENT([](const Inputs& in) { return gelu_erf(in[0]); }, {wide});
    CHECK_GRADIENT([](const Inputs& in) { return abs(in[0]); }, {away_from_zero({3, 4}, gen)});
  }
  SUBCASE("abs at 0: gradient 0, and gradcheck sees the kink") {
    DTensor a = away_from_zero({2, 3}, gen);
    a.mutable_value()(1, 1) = 0.0;
    const GradcheckResult r = gradcheck([](const Inputs& in) { return abs(in[0]); }, {a});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.kinks == 1);
    DTensor x(xt::xarray<double>{-2.0, 0.0, 3.0}, true);
    sum(abs(x)).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{-1, 0, 1}), 0.0);
  }
  SUBCASE("values") {
    const DTensor x(xt::xarray<double>{-1.0, 0.0, 1.0, 3.0});
    // 0.5 x (1 + erf(x / sqrt 2))
    CHECK_CLOSE(gelu_erf(x).value(),
                (xt::xarray<double>{-0.15865525393145707, 0, 0.8413447460685429, 2.99595030590511}), 1e-12);
    // x / (1 + exp(-x))
    CHECK_CLOSE(silu(x).value(), (xt::xarray<double>{-0.2689414213699951, 0, 0.7310585786300049, 2.8577223804672998}),
                1e-12);
    CHECK_CLOSE(abs(x).value(), (xt::xarray<double>{1, 0, 1, 3}), 0.0);
    const Tensor p(xt::xarray<float>{0.25f, 1.f, 4.f, 0.f});
    const auto r = rsqrt(p).value();
    CHECK_CLOSE(xt::view(r, xt::range(0, 3)), (xt::xarray<double>{2, 1, 0.5}), 1e-6);
    CHECK(r(3) == std::numeric_limits<float>::infinity());  // documented: 1/sqrt(0) = inf
    // gelu_erf and the tanh-approximated gelu agree to about 1e-3 on [-4, 4].
    const DTensor grid(xt::linspace<double>(-4.0, 4.0, 81));
    CHECK(xt::amax(xt::abs(gelu_erf(grid).value() - gelu(grid).value()))() < 1e-3);
  }
}

// clamp: gradient only strictly inside (min, max); a bound may be infinite.
TEST_CASE("clamp") {
  std::mt19937 gen(204);

  SUBCASE("gradients") {
    DTensor a = rand_input({3, 4}, gen, -2.0, 2.0);
    CHECK_GRADIENT([](const Inputs& in) { return clamp(in[0], -0.5, 0.7); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return clamp(in[0], -inf, 0.3); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return clamp(in[0], -0.3, inf); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return clamp(in[0], -inf, inf); }, {a});
    // Elements exactly on a bound are kinks; the documented 0 lies between the one-sided derivatives 0 and 1.
    a.mutable_value()(0, 0) = -0.5;
    a.mutable_value()(2, 3) = 0.7;
    const GradcheckResult r = gradcheck([](const Inputs& in) { return clamp(in[0], -0.5, 0.7); }, {a});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.kinks == 2);
  }
  SUBCASE("values and the boundary gradient") {
    DTensor x(xt::xarray<double>{-3, -1, 0, 1, 2, 5}, true);
    const DTensor y = clamp(x, -1.0, 2.0);
    CHECK_CLOSE(y.value(), (xt::xarray<double>{-1, -1, 0, 1, 2, 2}), 0.0);
    sum(y).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{0, 0, 1, 1, 0, 0}), 0.0);  // 0 on the bounds -1 and 2
    const Tensor f(xt::xarray<float>{-3, 0.5f, 7});
    CHECK_CLOSE(clamp(f, 0.0, inf).value(), (xt::xarray<double>{0, 0.5, 7}), 0.0);
    CHECK_CLOSE(clamp(f, -inf, 1.0).value(), (xt::xarray<double>{-3, 0.5, 1}), 0.0);
    CHECK_CLOSE(clamp(f, 2.0, 2.0).value(), (xt::xarray<double>{2, 2, 2}), 0.0);
    CHECK(std::isnan(clamp(DTensor(xt::xarray<double>{NAN}), 0.0, 1.0).value()(0)));
  }
  SUBCASE("errors") {
    const DTensor a(xt::xarray<double>{1.0});
    CHECK_ERROR("clamp: ", clamp(a, 1.0, 0.0));
    CHECK_ERROR("clamp: ", clamp(a, NAN, 1.0));
    CHECK_ERROR("clamp: ", clamp(a, 0.0, NAN));
    CHECK_ERROR("clamp: ", clamp(a, inf, -inf));
  }
}

// ---- comparisons and where ---------------------------------------------------------------------------------------

TEST_CASE("eq, ne, lt, le, gt, ge: boolean masks with broadcasting") {
  const Tensor a(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  const Tensor b(xt::xarray<float>{3, 2, 7});
  CHECK_MASK(eq(a, b), (xt::xarray<bool>{{false, true, false}, {false, false, false}}));
  CHECK_MASK(ne(a, b), (xt::xarray<bool>{{true, false, true}, {true, true, true}}));
  CHECK_MASK(lt(a, b), (xt::xarray<bool>{{true, false, true}, {false, false, true}}));
  CHECK_MASK(le(a, b), (xt::xarray<bool>{{true, true, true}, {false, false, true}}));
  CHECK_MASK(gt(a, b), (xt::xarray<bool>{{false, false, false}, {true, true, false}}));
  CHECK_MASK(ge(a, b), (xt::xarray<bool>{{false, true, false}, {true, true, false}}));
  // Both sides broadcast; a 0-d operand compares against every element.
  const DTensor col(reshaped<double>({1, 2}, {2, 1})), row(xt::xarray<double>{1, 2, 3});
  CHECK_MASK(lt(col, row), (xt::xarray<bool>{{false, true, true}, {false, false, true}}));
  CHECK_MASK(ge(row, scalar(2.0)), (xt::xarray<bool>{false, true, true}));
  // NaN: every comparison is false except ne.
  const DTensor n(xt::xarray<double>{NAN}), one(xt::xarray<double>{1.0});
  CHECK_MASK(eq(n, n), (xt::xarray<bool>{false}));
  CHECK_MASK(ne(n, n), (xt::xarray<bool>{true}));
  CHECK_MASK(le(n, one), (xt::xarray<bool>{false}));
  CHECK_MASK(ge(n, one), (xt::xarray<bool>{false}));
  // A mask composes with where and masked_fill.
  CHECK_CLOSE(xgrad::where(gt(a, b), a, b).value(), maximum(a, b).value(), 0.0);
  CHECK_CLOSE(masked_fill(a, lt(a, b), 0.0).value(), (xt::xarray<double>{{0, 2, 0}, {4, 5, 0}}), 0.0);

  const Tensor p(xt::xarray<float>::from_shape({2, 3})), q(xt::xarray<float>::from_shape({2}));
  using Comparison = xt::xarray<bool> (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Comparison> comparisons[] = {{"eq: ", &eq<float>}, {"ne: ", &ne<float>},
                                                            {"lt: ", &lt<float>}, {"le: ", &le<float>},
                                                            {"gt: ", &gt<float>}, {"ge: ", &ge<float>}};
  for (const auto& [text, compare] : comparisons) CHECK_ERROR(text, compare(p, q));
}

// where: cond, a and b broadcast together; each operand's gradient is summed back to its own shape.
TEST_CASE("where") {
  std::mt19937 gen(205);
  const xt::xarray<bool> cond_col = reshaped<bool>({true, false, true}, {3, 1});
  const xt::xarray<bool> cond_full{{true, false, false, true}, {false, true, true, false}, {true, true, false, false}};

  SUBCASE("gradients") {
    struct WhereCase {
      const xt::xarray<bool>* cond;
      shape_t a, b, out;
    };
    const WhereCase cases[] = {
        {&cond_full, {3, 4}, {3, 4}, {3, 4}},    // same shapes
        {&cond_col, {1, 4}, {}, {3, 4}},         // all three broadcast: cond [3, 1], a [1, 4], b 0-d
        {&cond_full, {4}, {3, 1}, {3, 4}},       // operands smaller than cond
        {&cond_col, {2, 3, 4}, {4}, {2, 3, 4}},  // cond smaller than the output
    };
    for (const auto& c : cases) {
      INFO("cond " << shape_str(shape_of(*c.cond)) << ", a " << shape_str(c.a) << ", b " << shape_str(c.b));
      DTensor a = rand_input(c.a, gen), b = rand_input(c.b, gen);
      const auto* cond = c.cond;
      CHECK(xgrad::where(*cond, a, b).shape() == c.out);
      CHECK_GRADIENT([cond](const Inputs& in) { return xgrad::where(*cond, in[0], in[1]); }, {a, b});
    }
  }
  SUBCASE("values and gradients") {
    DTensor a(xt::xarray<double>{1, 2, 3, 4}, true), b(scalar(-1.0, true));
    const DTensor y = xgrad::where(cond_full, a, b);
    CHECK_CLOSE(y.value(), (xt::xarray<double>{{1, -1, -1, 4}, {-1, 2, 3, -1}, {1, 2, -1, -1}}), 0.0);
    sum(y).backward();
    CHECK_CLOSE(a.grad(), (xt::xarray<double>{2, 2, 1, 1}), 0.0);  // true count per column
    CHECK_CLOSE(b.grad(), (xt::xarray<double>(6.0)), 0.0);         // false count overall
  }
  SUBCASE("errors") {
    const DTensor a(xt::xarray<double>::from_shape({3, 4})), b5(xt::xarray<double>::from_shape({5}));
    CHECK_ERROR("where: ", xgrad::where(cond_full, a, b5));                            // b does not broadcast
    CHECK_ERROR("where: ", xgrad::where(xt::xarray<bool>::from_shape({2, 4}), a, a));  // cond does not broadcast
  }
}

// ---- reductions --------------------------------------------------------------------------------------------------

// max/min over all elements and over axis lists; ties split the gradient evenly.
TEST_CASE("max, min reductions") {
  std::mt19937 gen(206);
  DTensor a = rand_input({2, 3, 4}, gen);

  SUBCASE("gradients") {
    CHECK(max(a).shape() == shape_t{});
    CHECK_GRADIENT([](const Inputs& in) { return max(in[0]); }, {a});
    CHECK_GRADIENT([](const Inputs& in) { return min(in[0]); }, {a});
    for (const auto& c : axes_cases) {
      INFO(axes_str(c.axes, c.keepdim));
      CHECK(max(a, c.axes, c.keepdim).shape() == c.out);
      CHECK(min(a, c.axes, c.keepdim).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return max(in[0], c.axes, c.keepdim); }, {a});
      CHECK_GRADIENT([&](const Inputs& in) { return min(in[0], c.axes, c.keepdim); }, {a});
    }
    DTensor s(xt::xarray<double>(2.5), true);  // 0-d: the one element
    CHECK_GRADIENT([](const Inputs& in) { return max(in[0]) * in[0]; }, {s});
  }
  SUBCASE("ties: even split, and gradcheck does not fail falsely") {
    DTensor x(xt::xarray<double>{{3, 1, 3, 3}, {0, 2, -1, 2}}, true);
    max(x, {1}).backward(xt::xarray<double>{1.0, 6.0});
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{{1.0 / 3, 0, 1.0 / 3, 1.0 / 3}, {0, 3, 0, 3}}), 1e-15);
    x.zero_grad();
    min(x).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{{0, 0, 0, 0}, {0, 0, 1, 0}}), 0.0);
    x.zero_grad();
    DTensor flat(xt::xarray<double>{5, 5, 5, 5}, true);
    max(flat).backward();
    CHECK_CLOSE(flat.grad(), (xt::xarray<double>{0.25, 0.25, 0.25, 0.25}), 0.0);
    // Tied maxima are kinks: one-sided derivatives 0 and 1 (times the projection weight) bracket the split share.
    const GradcheckResult r = gradcheck([](const Inputs& in) { return max(in[0], {1}); }, {x});
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.kinks == 5);
    CHECK_GRADIENT([](const Inputs& in) { return min(in[0], {0}, true); },
                   {DTensor(xt::xarray<double>{{1, 2}, {1, 0}}, true)});
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{{1, 7, 3}, {4, -5, 6}});
    CHECK(max(x).item() == 7.f);
    CHECK(min(x).item() == -5.f);
    CHECK_CLOSE(max(x, {0}).value(), (xt::xarray<double>{4, 7, 6}), 0.0);
    CHECK_CLOSE(min(x, {-1}, true).value(), reshaped<double>({1, -5}, {2, 1}), 0.0);
    CHECK_CLOSE(max(x, {0, 1}).value(), (xt::xarray<double>(7.0)), 0.0);
    const Tensor neg_inf(xt::xarray<float>{-INFINITY, -INFINITY});
    CHECK(max(neg_inf).item() == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(max(DTensor(xt::xarray<double>{1, NAN, 3})).item()));  // NaN propagates
    CHECK(std::isnan(min(DTensor(xt::xarray<double>{NAN, 1, 3})).item()));
  }
  SUBCASE("errors") {
    CHECK_ERROR("max: ", max(a, {3}));
    CHECK_ERROR("max: ", max(a, {0, -3}));  // repeated axis
    CHECK_ERROR("min: ", min(a, {-4}));
    const DTensor empty(xt::xarray<double>::from_shape({2, 0}));
    CHECK_ERROR("max: ", max(empty));
    CHECK_ERROR("min: ", min(empty, {1}));
    CHECK(max(empty, {0}).shape() == shape_t{0});  // reducing a non-empty axis of an empty tensor is fine
  }
}

// var: Bessel-corrected by default, correction 0 biased, any correction in between.
TEST_CASE("var") {
  std::mt19937 gen(207);
  DTensor a = rand_input({2, 3, 4}, gen);

  SUBCASE("gradients") {
    CHECK_GRADIENT([](const Inputs& in) { return var(in[0]); }, {a});
    for (const auto& c : axes_cases) {
      for (double correction : {0.0, 1.0, 1.5}) {
        INFO(axes_str(c.axes, c.keepdim) << ", correction " << correction);
        CHECK(var(a, c.axes, c.keepdim, correction).shape() == c.out);
        CHECK_GRADIENT([&](const Inputs& in) { return var(in[0], c.axes, c.keepdim, correction); }, {a});
      }
    }
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{{1, 2, 3, 4}, {2, 2, 2, 2}});
    // Row 0: mean 2.5, squared deviations sum to 5.
    CHECK_CLOSE(var(x, {1}).value(), (xt::xarray<double>{5.0 / 3, 0}), 1e-6);
    CHECK_CLOSE(var(x, {1}, true, 0.0).value(), reshaped<double>({1.25, 0}, {2, 1}), 1e-6);
    CHECK_CLOSE(var(x, {0}).value(), (xt::xarray<double>{0.5, 0, 0.5, 2}), 1e-6);
    // All 8 elements: mean 2.25, squared deviations sum to 5.5.
    CHECK(var(x).item() == doctest::Approx(5.5 / 7));
    CHECK(var(x, {0, 1}, false, 0.0).item() == doctest::Approx(5.5 / 8));
    // Large offset: the two-pass formula does not cancel in float.
    const Tensor big(xt::xarray<float>{1e4f + 1, 1e4f + 2, 1e4f + 3});
    CHECK(var(big).item() == doctest::Approx(1.0).epsilon(1e-4));
    // No degrees of freedom left: 0/0 is NaN and x/0 is inf, as torch.var.
    CHECK(std::isnan(var(DTensor(xt::xarray<double>{3.0})).item()));
    CHECK(var(DTensor(xt::xarray<double>{1.0, 2.0}), {0}, false, 2.0).item() == inf);
  }
  SUBCASE("errors") {
    CHECK_ERROR("var: ", var(a, {3}));
    CHECK_ERROR("var: ", var(a, {1, 1}));
    CHECK_ERROR("var: ", var(a, {1}, false, -1.0));
    CHECK_ERROR("var: ", var(DTensor(xt::xarray<double>::from_shape({0}))));
  }
}

// logsumexp: stable for large inputs; an all -inf slice gives -inf and zero gradient.
TEST_CASE("logsumexp") {
  std::mt19937 gen(208);
  DTensor a = rand_input({2, 3, 4}, gen, -3.0, 3.0);

  SUBCASE("gradients") {
    for (const auto& c : axes_cases) {
      INFO(axes_str(c.axes, c.keepdim));
      CHECK(logsumexp(a, c.axes, c.keepdim).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return logsumexp(in[0], c.axes, c.keepdim); }, {a});
    }
    DTensor big = rand_input({3, 4}, gen, 500.0, 505.0);
    CHECK_GRADIENT([](const Inputs& in) { return logsumexp(in[0], {1}); }, {big});
    // Some -inf entries (masked) in every slice: finite result, zero gradient to the masked entries.
    const xt::xarray<bool> mask{{true, false, false, true}, {false, true, true, true}, {false, false, false, false}};
    DTensor m = rand_input({3, 4}, gen);
    CHECK_GRADIENT([&](const Inputs& in) { return logsumexp(masked_fill(in[0], mask, -inf), {-1}); }, {m});
  }
  SUBCASE("values") {
    const Tensor x(xt::xarray<float>{{1, 2, 3}, {0, 0, 1}});
    CHECK_CLOSE(logsumexp(x, {1}).value(), (xt::xarray<double>{3.40760596444438, 1.5514447139320509}), 1e-6);
    CHECK_CLOSE(logsumexp(Tensor(xt::xarray<float>{1001, 1002, 1003}), {0}).value(),
                (xt::xarray<double>(1000 + 3.40760596444438)), 1e-3);
    CHECK_CLOSE(logsumexp(Tensor(xt::xarray<float>{-1001, -1002, -1003}), {-1}).value(),
                (xt::xarray<double>(-1001 + (3.40760596444438 - 3))), 1e-3);
    // Equals log(sum(exp)) where that does not overflow.
    const DTensor d(uniform({2, 5}, gen));
    CHECK_CLOSE(logsumexp(d, {0, 1}).value(), (xt::xarray<double>(std::log(xt::sum(xt::exp(d.value()))()))), 1e-12);
  }
  SUBCASE("the last axis (row kernel, float exp) against the walk over any axes (double exp)") {
    std::uniform_real_distribution<float> u(-8.0f, 8.0f);
    xt::xarray<float> xs = xt::xarray<float>::from_shape({6, 75});
    for (auto& v : xs) v = u(gen);
    xs(5, 3) = std::numeric_limits<float>::quiet_NaN();
    Tensor rows_in(xs, true), walk_in(xt::xarray<float>(xt::transpose(xs)), true);
    const Tensor by_rows = logsumexp(rows_in, {-1}), by_walk = logsumexp(walk_in, {0});
    CHECK(std::isnan(by_rows.value()(5)));
    // |lse| < 16, where a float's ulp is 9.5e-7 (both paths round m + log(s) to float); the float exp is within
    // 1 ulp (tests/test_kernels.cpp), 1.2e-7 relative to terms <= 1, so log(s) moves by 1.2e-7 at most.
    for (std::size_t i = 0; i < 5; ++i) CHECK(std::abs(by_rows.value()(i) - by_walk.value()(i)) <= 2e-6);
    const xt::xarray<float> g{0.5f, -1.0f, 0.25f, 1.0f, 0.75f, 0.0f};
    by_rows.backward(g);
    by_walk.backward(g);
    // d_j = g exp(x_j - lse) <= 1: the exp's ulp (1.2e-7) and the product's rounding (6e-8) in each path.
    const xt::xarray<float> walk_grad = xt::transpose(walk_in.grad());
    for (std::size_t i = 0; i < 5; ++i)
      for (std::size_t j = 0; j < 75; ++j) CHECK(std::abs(rows_in.grad()(i, j) - walk_grad(i, j)) <= 4e-7);
    CHECK(std::isnan(rows_in.grad()(5, 3)));
  }
  SUBCASE("the last axis in float: -inf, +inf, one element, keepdim, as the walk") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), finf = std::numeric_limits<float>::infinity();
    const xt::xarray<float> xs{{-finf, -finf, -finf}, {finf, 1.0f, 2.0f}, {finf, nan, 0.0f}, {0.0f, -finf, 1.0f}};
    Tensor rows_in(xs, true), walk_in(xt::xarray<float>(xt::transpose(xs)), true);
    const Tensor by_rows = logsumexp(rows_in, {1}, /*keepdim=*/true), by_walk = logsumexp(walk_in, {0});
    CHECK(by_rows.shape() == shape_t{4, 1});
    CHECK(by_rows.value()(0, 0) == -finf);
    CHECK(by_rows.value()(1, 0) == finf);
    CHECK(std::isnan(by_rows.value()(2, 0)));
    CHECK(by_rows.value()(3, 0) == doctest::Approx(by_walk.value()(3)).epsilon(1e-6));
    by_rows.backward(xt::xarray<float>(xt::ones<float>({4, 1})));
    CHECK(xt::all(xt::equal(xt::view(rows_in.grad(), 0), 0.0f)));  // all -inf: zero gradient, no NaN
    CHECK(rows_in.grad()(3, 1) == 0.0f);                           // a -inf entry of a finite row
    const Tensor one(xt::xarray<float>(xt::ones<float>({1, 1}) * 2.5f));
    CHECK(logsumexp(one, {-1}).value()(0) == 2.5f);  // one element: itself
  }
  SUBCASE("an all -inf slice: -inf and zero gradient, no NaN") {
    DTensor x(xt::xarray<double>{{-inf, -inf, -inf}, {0.0, std::log(3.0), -inf}}, true);
    const DTensor y = logsumexp(x, {1});
    CHECK(y.value()(0) == -inf);
    CHECK(y.value()(1) == doctest::Approx(std::log(4.0)));
    y.backward(xt::xarray<double>{1.0, 2.0});
    CHECK(all_finite(x.grad()));
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{{0, 0, 0}, {0.5, 1.5, 0}}), 1e-12);
    CHECK(logsumexp(DTensor(xt::xarray<double>{inf, 1.0}), {0}).item() == inf);
  }
  SUBCASE("errors") {
    CHECK_ERROR("logsumexp: ", logsumexp(a, {3}));
    CHECK_ERROR("logsumexp: ", logsumexp(a, {0, 0}));
    CHECK_ERROR("logsumexp: ", logsumexp(DTensor(xt::xarray<double>::from_shape({2, 0})), {1}));
  }
}

// ---- neural-network ops ------------------------------------------------------------------------------------------

// softmax/log_softmax along any axis agree with the last-axis kernel applied to the transposed input.
TEST_CASE("softmax, log_softmax along any axis") {
  std::mt19937 gen(209);
  DTensor a = rand_input({2, 3, 4}, gen, -3.0, 3.0);

  SUBCASE("gradients") {
    for (int axis : {0, 1, 2, -1, -2, -3}) {
      INFO("axis " << axis);
      CHECK_GRADIENT([axis](const Inputs& in) { return softmax(in[0], axis); }, {a});
      CHECK_GRADIENT([axis](const Inputs& in) { return log_softmax(in[0], axis); }, {a});
    }
    DTensor col = rand_input({4, 1}, gen);  // a size-1 axis: softmax is 1 and the gradient 0
    CHECK_GRADIENT([](const Inputs& in) { return softmax(in[0], 1) * in[0]; }, {col});
    CHECK_GRADIENT([](const Inputs& in) { return softmax(in[0], 0); }, {col});
    // Masked entries along axis 0, including one fully masked column.
    const xt::xarray<bool> mask{{true, false, true}, {true, true, false}};
    DTensor m = rand_input({2, 3}, gen);
    CHECK_GRADIENT([&](const Inputs& in) { return softmax(masked_fill(in[0], mask, -inf), 0); }, {m});
    // log_softmax is -inf at masked entries; the outer fill keeps the checked sum finite.
    CHECK_GRADIENT(
        [&](const Inputs& in) { return masked_fill(log_softmax(masked_fill(in[0], mask, -inf), 0), mask, 0.0); },
        {rand_input({2, 3}, gen)});
  }
  SUBCASE("values") {
    for (int axis : {0, 1}) {
      INFO("axis " << axis);
      // Along axis k of [2, 3, 4] = along the last axis of the input with axes k and 2 swapped, swapped back.
      const DTensor swapped = transpose(softmax(transpose(a, axis, 2)), axis, 2);
      CHECK_CLOSE(softmax(a, axis).value(), swapped.value(), 1e-12);
      const DTensor log_swapped = transpose(log_softmax(transpose(a, axis, 2)), axis, 2);
      CHECK_CLOSE(log_softmax(a, axis).value(), log_swapped.value(), 1e-12);
      CHECK_CLOSE(xt::sum(softmax(a, axis).value(), {static_cast<std::size_t>(axis)}),
                  xt::xarray<double>(xt::ones<double>(axis == 0 ? shape_t{3, 4} : shape_t{2, 4})), 1e-12);
    }
    CHECK_CLOSE(softmax(a).value(), softmax(a, 2).value(), 0.0);  // the default is the last axis
    CHECK_CLOSE(log_softmax(a, -1).value(), log_softmax(a).value(), 0.0);
    // float32, axis 0 with large logits: shifted, no overflow.
    const Tensor x(xt::xarray<float>{{1001, 0}, {1002, 0}, {1003, 0}});
    const xt::xarray<double> p{0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
    CHECK_CLOSE(xt::view(softmax(x, 0).value(), xt::all(), 0), p, 1e-6);
    CHECK_CLOSE(xt::view(softmax(x, -2).value(), xt::all(), 1), (xt::xarray<double>{1. / 3, 1. / 3, 1. / 3}), 1e-6);
    // A fully masked column: zeros for softmax, -inf for log_softmax, zero gradient for both.
    DTensor masked(xt::xarray<double>{{-inf, 1}, {-inf, 2}}, true);
    const DTensor s = softmax(masked, 0), ls = log_softmax(masked, 0);
    CHECK(s.value()(0, 0) == 0.0);
    CHECK(s.value()(1, 0) == 0.0);
    CHECK(ls.value()(0, 0) == -inf);
    (sum(s * DTensor(xt::xarray<double>{{1, 2}, {3, 4}})) + sum(masked_fill(ls, xt::xarray<bool>{true, false}, 0.0)))
        .backward();
    CHECK(all_finite(masked.grad()));
    CHECK(masked.grad()(0, 0) == 0.0);
    CHECK(masked.grad()(1, 0) == 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("softmax: ", softmax(a, 3));
    CHECK_ERROR("softmax: ", softmax(a, -4));
    CHECK_ERROR("log_softmax: ", log_softmax(a, 5));
    CHECK_ERROR("softmax: ", softmax(scalar(1.0), 0));
  }
}

// cross_entropy with label smoothing: the target distribution (1 - eps) onehot + eps / C, mean over kept positions.
TEST_CASE("cross_entropy with label_smoothing") {
  std::mt19937 gen(210);

  SUBCASE("gradients") {
    DTensor l2 = rand_input({4, 5}, gen, -2.0, 2.0);
    const index_array t2{1, -1, 3, 0};
    DTensor l3 = rand_input({2, 3, 4}, gen, -2.0, 2.0);
    const index_array t3{{0, 3, -1}, {2, -1, 1}};
    for (double eps : {0.0, 0.1, 0.5, 1.0}) {
      INFO("label_smoothing " << eps);
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t2, -1, eps); }, {l2});
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], t3, -1, eps); }, {l3});
      CHECK_GRADIENT([&](const Inputs& in) { return cross_entropy(in[0], index_array{1, 2, 3, 2}, 2, eps); }, {l2});
    }
    DTensor big = rand_input({3, 4}, gen, -300.0, 300.0);
    CHECK_GRADIENT([](const Inputs& in) { return cross_entropy(in[0], index_array{0, 3, 1}, -1, 0.2); }, {big});
  }
  SUBCASE("values") {
    // Against the definition: (1 - eps) nll + eps * mean_j(-log p_j), averaged over kept positions.
    const DTensor l(uniform({3, 4}, gen, -2.0, 2.0));
    const auto lp = log_softmax(l).value();
    const double eps = 0.3;
    auto row_loss = [&](std::size_t i, std::size_t t) {
      double smooth = 0;
      for (std::size_t j = 0; j < 4; ++j) smooth -= lp(i, j) / 4;
      return (1 - eps) * -lp(i, t) + eps * smooth;
    };
    CHECK(cross_entropy(l, index_array{2, -1, 0}, -1, eps).item() ==
          doctest::Approx((row_loss(0, 2) + row_loss(2, 0)) / 2).epsilon(1e-12));
    // eps = 0 is the plain loss; eps = 1 ignores the target (uniform target distribution).
    CHECK(cross_entropy(l, index_array{2, 1, 0}, -1, 0.0).item() == cross_entropy(l, index_array{2, 1, 0}).item());
    CHECK(cross_entropy(l, index_array{2, 1, 0}, -1, 1.0).item() ==
          doctest::Approx(cross_entropy(l, index_array{3, 3, 1}, -1, 1.0).item()).epsilon(1e-12));
    // Uniform logits: log C whatever the smoothing.
    CHECK(cross_entropy(Tensor(xt::xarray<float>{{0, 0, 0}}), index_array{1}, -1, 0.4).item() ==
          doctest::Approx(std::log(3.0)));
    // Gradient (softmax - q) / N for one row: logits [0, 0], target 0, eps 0.2 → q = [0.9, 0.1], p = [0.5, 0.5].
    Tensor two(xt::xarray<float>{{0, 0}}, true);
    cross_entropy(two, index_array{0}, -1, 0.2).backward();
    CHECK_CLOSE(two.grad(), (xt::xarray<double>{{-0.4, 0.4}}), 1e-6);
    // No position carries a target: 0 and zero gradient.
    Tensor none(xt::xarray<float>{{1, 2}, {3, 4}}, true);
    const Tensor zero = cross_entropy(none, index_array{-1, -1}, -1, 0.1);
    CHECK(zero.item() == 0.f);
    zero.backward();
    CHECK_CLOSE(none.grad(), (xt::xarray<double>{{0, 0}, {0, 0}}), 0.0);
  }
  SUBCASE("errors") {
    const Tensor logits(xt::xarray<float>::from_shape({2, 3}));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 1}, -1, -0.1));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 1}, -1, 1.5));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 1}, -1, NAN));
    CHECK_ERROR("cross_entropy: ", cross_entropy(logits, index_array{0, 3}, -1, 0.1));  // C = 3
  }
}

// rms_norm over the last axis with and without weight.
TEST_CASE("rms_norm") {
  std::mt19937 gen(211);

  SUBCASE("gradients") {
    DTensor x = rand_input({3, 5}, gen), w = rand_input({5}, gen, 0.5, 1.5);
    CHECK_GRADIENT([](const Inputs& in) { return rms_norm(in[0], in[1]); }, {x, w});
    CHECK_GRADIENT([](const Inputs& in) { return rms_norm(in[0], DTensor()); }, {x});
    CHECK_GRADIENT([](const Inputs& in) { return rms_norm(in[0], in[1], 0.1); }, {x, w});
    DTensor x3 = rand_input({2, 2, 4}, gen), w4 = rand_input({4}, gen, -1.5, 1.5);
    CHECK_GRADIENT([](const Inputs& in) { return rms_norm(in[0], in[1]); }, {x3, w4});
    DTensor x1 = rand_input({3, 1}, gen), w1 = rand_input({1}, gen);  // D = 1: y = w x / sqrt(x^2 + eps)
    CHECK_GRADIENT([](const Inputs& in) { return rms_norm(in[0], in[1], 0.05); }, {x1, w1});
    const DTensor wc = w.detach();
    CHECK_GRADIENT([&](const Inputs& in) { return rms_norm(in[0], wc); }, {x});
  }
  SUBCASE("values") {
    // Row [1, 2, 3, 4]: mean square 7.5; row [0, 0, 0, 0] stays 0.
    const Tensor x(xt::xarray<float>{{1, 2, 3, 4}, {0, 0, 0, 0}});
    const double r = 1.0 / std::sqrt(7.5 + 1e-6);
    CHECK_CLOSE(rms_norm(x, Tensor()).value(), (xt::xarray<double>{{r, 2 * r, 3 * r, 4 * r}, {0, 0, 0, 0}}), 1e-6);
    const Tensor w(xt::xarray<float>{2, 0.5, 1, -1});
    CHECK_CLOSE(rms_norm(x, w).value(), (xt::xarray<double>{{2 * r, r, 3 * r, -4 * r}, {0, 0, 0, 0}}), 1e-6);
    // eps is added to the mean square: with eps = 8.5 the denominator is exactly 4.
    CHECK_CLOSE(rms_norm(x, Tensor(), 8.5).value(), (xt::xarray<double>{{0.25, 0.5, 0.75, 1}, {0, 0, 0, 0}}), 1e-6);
    // Scale invariance: rms_norm(c x) = rms_norm(x) for c > 0 (eps aside).
    const DTensor d(uniform({2, 6}, gen));
    CHECK_CLOSE(rms_norm(d * 100.0, DTensor(), 0.0).value(), rms_norm(d, DTensor(), 0.0).value(), 1e-12);
  }
  SUBCASE("errors") {
    const Tensor x(xt::xarray<float>::from_shape({2, 5}));
    CHECK_ERROR("rms_norm: ", rms_norm(x, Tensor(xt::xarray<float>::from_shape({4}))));
    CHECK_ERROR("rms_norm: ", rms_norm(x, Tensor(xt::xarray<float>::from_shape({5, 1}))));
    CHECK_ERROR("rms_norm: ", rms_norm(scalar(1.f), Tensor()));
    CHECK_ERROR("rms_norm: ", rms_norm(Tensor(xt::xarray<float>::from_shape({2, 0})), Tensor()));
  }
}

// dropout: inverted scaling, mask reused in backward, deterministic per generator state, identity in eval mode.
TEST_CASE("dropout") {
  SUBCASE("mean preserved, survivors scaled by 1 / (1 - p)") {
    Generator gen(7);
    const double p = 0.3;
    const Tensor x(xt::xarray<float>(xt::ones<float>({200, 100})));
    const Tensor y = dropout(x, p, true, gen);
    std::size_t zeros = 0, scaled = 0;
    for (std::size_t i = 0; i < y.numel(); ++i) {
      const float v = y.value().data()[i];
      zeros += v == 0.f;
      scaled += v == static_cast<float>(1.0 / (1.0 - p));
    }
    CHECK(zeros + scaled == y.numel());
    // 20,000 Bernoulli(0.3) draws: the standard deviation of the dropped fraction is about 0.0032, so 5% of p
    // (0.015) is 4.7 of them. Each output is 0 or 1 / (1 - p), of variance p / (1 - p) = 0.43: the mean's standard
    // deviation is sqrt(0.43 / 20,000) = 0.0046, so 0.02 is 4.3 of them (a failure is a broken mask, not chance).
    CHECK(static_cast<double>(zeros) / static_cast<double>(y.numel()) == doctest::Approx(p).epsilon(0.05));
    CHECK(mean(y).item() == doctest::Approx(1.0).epsilon(0.02));
  }
  SUBCASE("backward reuses the mask") {
    Generator gen(8);
    std::mt19937 mt(212);
    DTensor x = away_from_zero({6, 7}, mt);  // no input is 0, so a zero output means a dropped element
    const DTensor y = dropout(x, 0.5, true, gen);
    const xt::xarray<double> upstream = uniform({6, 7}, mt, 0.5, 1.5);
    y.backward(upstream);
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < x.numel(); ++i) {
      if (y.value().data()[i] == 0.0) {
        ++dropped;
        CHECK(x.grad().data()[i] == 0.0);
      } else {
        CHECK(x.grad().data()[i] == doctest::Approx(2.0 * upstream.data()[i]));
        CHECK(y.value().data()[i] == doctest::Approx(2.0 * x.value().data()[i]));
      }
    }
    CHECK(dropped > 0);
    CHECK(dropped < x.numel());
    // With the generator re-created inside f, every evaluation draws the same mask: a fixed linear map.
    CHECK_GRADIENT(
        [](const Inputs& in) {
          Generator g(9);
          return dropout(in[0], 0.4, true, g);
        },
        {x});
  }
  SUBCASE("deterministic for a given generator state") {
    const DTensor x(xt::xarray<double>(xt::ones<double>({5, 8})));
    Generator g1(11, 2), g2(11, 2), g3(12, 2);
    const auto a = dropout(x, 0.5, true, g1).value();
    CHECK_CLOSE(dropout(x, 0.5, true, g2).value(), a, 0.0);
    CHECK((dropout(x, 0.5, true, g3).value() != a));  // another seed, another mask
    CHECK((dropout(x, 0.5, true, g1).value() != a));  // the generator advanced
  }
  SUBCASE("eval mode and p = 0 return the input unchanged") {
    Generator gen(10);
    DTensor x(xt::xarray<double>{1, 2, 3}, true);
    const DTensor eval = dropout(x, 0.5, false, gen);
    CHECK(eval.node() == x.node());
    CHECK(dropout(x, 0.0, true, gen).node() == x.node());
    Generator fresh(10);  // no draw was taken in eval mode
    CHECK(gen.next_u64() == fresh.next_u64());
    sum(eval * 2.0).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{2, 2, 2}), 0.0);
  }
  SUBCASE("errors") {
    Generator gen(1);
    const Tensor x(xt::xarray<float>{1, 2});
    CHECK_ERROR("dropout: ", dropout(x, 1.0, true, gen));
    CHECK_ERROR("dropout: ", dropout(x, -0.1, true, gen));
    CHECK_ERROR("dropout: ", dropout(x, NAN, true, gen));
    CHECK_ERROR("dropout: ", dropout(x, 1.5, false, gen));  // checked in eval mode too
  }
}
