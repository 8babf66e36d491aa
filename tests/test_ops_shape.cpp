// Shape, joining/splitting, indexing ops and numpy.matmul's 1-D rules: float64 finite-difference gradient checks
// (xgrad::gradcheck) on small seeded random inputs, forward values against hand-computed numbers, and the
// xgrad::Error each op raises on bad input. Same layout as test_ops.cpp: one TEST_CASE per op family, SUBCASEs for
// gradients, values and errors.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/ops.h"
#include "tests/support/matmul_cases.h"
#include "tests/support/op_testing.h"

using namespace xgrad;
using namespace xgrad::testing;

namespace {

/// 0, 1, 2, ... in the given shape: every element tells where it came from.
template <class T>
xt::xarray<T> iota(const shape_t& shape) {
  xt::xarray<T> v = xt::xarray<T>::from_shape(shape);
  for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] = static_cast<T>(i);
  return v;
}

/// The shapes of a list of tensors, for comparing split results.
template <class T>
std::vector<shape_t> shapes_of(const std::vector<basic_tensor<T>>& tensors) {
  std::vector<shape_t> out;
  for (const auto& t : tensors) out.push_back(t.shape());
  return out;
}

}  // namespace

// ---- unsqueeze, squeeze, flatten ----------------------------------------------------------------------------------

// Axis insertion and removal, including negative dims, size-1 dims, the PyTorch no-op of squeezing an axis whose
// size is not 1, and 0-d tensors.
TEST_CASE("unsqueeze, squeeze, flatten") {
  std::mt19937 gen(201);
  DTensor a = rand_input({2, 3, 4}, gen);
  DTensor ones = rand_input({1, 3, 1, 2}, gen);

  SUBCASE("gradients") {
    struct DimCase {
      int dim;
      shape_t out;
    };
    for (const auto& c : {DimCase{0, {1, 2, 3, 4}}, DimCase{1, {2, 1, 3, 4}}, DimCase{3, {2, 3, 4, 1}},
                          DimCase{-1, {2, 3, 4, 1}}, DimCase{-4, {1, 2, 3, 4}}, DimCase{-2, {2, 3, 1, 4}}}) {
      INFO("unsqueeze dim " << c.dim);
      CHECK(unsqueeze(a, c.dim).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return unsqueeze(in[0], c.dim); }, {a});
    }
    CHECK(squeeze(ones).shape() == shape_t{3, 2});
    CHECK_GRADIENT([](const Inputs& in) { return squeeze(in[0]); }, {ones});
    for (const auto& c : {DimCase{0, {3, 1, 2}}, DimCase{2, {1, 3, 2}}, DimCase{-2, {1, 3, 2}},
                          DimCase{1, {1, 3, 1, 2}}, DimCase{-1, {1, 3, 1, 2}}}) {
      INFO("squeeze dim " << c.dim);
      CHECK(squeeze(ones, c.dim).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return squeeze(in[0], c.dim); }, {ones});
    }
    struct FlattenCase {
      int start, end;
      shape_t out;
    };
    for (const auto& c : {FlattenCase{0, -1, {24}}, FlattenCase{1, 2, {2, 12}}, FlattenCase{-3, -2, {6, 4}},
                          FlattenCase{1, 1, {2, 3, 4}}, FlattenCase{0, 1, {6, 4}}}) {
      INFO("flatten " << c.start << ".." << c.end);
      CHECK(flatten(a, c.start, c.end).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return flatten(in[0], c.start, c.end); }, {a});
    }
    // 0-d: unsqueeze gives [1], flatten gives [1], squeeze keeps it 0-d.
    DTensor s(xt::xarray<double>(0.7), true);
    CHECK(unsqueeze(s, 0).shape() == shape_t{1});
    CHECK(unsqueeze(s, -1).shape() == shape_t{1});
    CHECK(flatten(s).shape() == shape_t{1});
    CHECK(squeeze(s).shape() == shape_t{});
    CHECK(squeeze(s, 0).shape() == shape_t{});
    CHECK(squeeze(s, -1).shape() == shape_t{});
    CHECK_GRADIENT([](const Inputs& in) { return unsqueeze(in[0], 0) * in[0]; }, {s});
    CHECK_GRADIENT([](const Inputs& in) { return flatten(in[0]); }, {s});
    CHECK_GRADIENT([](const Inputs& in) { return squeeze(unsqueeze(in[0], 0)); }, {s});
    // Every axis of size 1: squeeze gives 0-d.
    DTensor all_ones = rand_input({1, 1, 1}, gen);
    CHECK(squeeze(all_ones).shape() == shape_t{});
    CHECK_GRADIENT([](const Inputs& in) { return squeeze(in[0]); }, {all_ones});
    // An empty tensor keeps its element order (none) and its 0-sized axes.
    const DTensor empty(xt::xarray<double>::from_shape({0, 1, 3}));
    CHECK(squeeze(empty).shape() == shape_t{0, 3});
    CHECK(flatten(empty).shape() == shape_t{0});
  }
  SUBCASE("values") {
    const Tensor x(iota<float>({2, 3}));
    CHECK_CLOSE(unsqueeze(x, 1).value(), (xt::xarray<double>{{{0, 1, 2}}, {{3, 4, 5}}}), 0.0);
    CHECK_CLOSE(unsqueeze(x, -1).value(), reshaped<double>({0, 1, 2, 3, 4, 5}, {2, 3, 1}), 0.0);
    CHECK_CLOSE(squeeze(unsqueeze(x, 0)).value(), (xt::xarray<double>{{0, 1, 2}, {3, 4, 5}}), 0.0);
    CHECK_CLOSE(squeeze(x, 0).value(), (xt::xarray<double>{{0, 1, 2}, {3, 4, 5}}), 0.0);  // size 2: unchanged
    CHECK_CLOSE(flatten(x).value(), (xt::xarray<double>{0, 1, 2, 3, 4, 5}), 0.0);
    // The gradient of squeeze comes back in the input's shape.
    DTensor y(iota<double>({3, 1}), true);
    squeeze(y).backward(xt::xarray<double>{1, 2, 3});
    CHECK_CLOSE(y.grad(), reshaped<double>({1, 2, 3}, {3, 1}), 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("unsqueeze: ", unsqueeze(a, 4));  // allowed: -4 to 3
    CHECK_ERROR("unsqueeze: ", unsqueeze(a, -5));
    CHECK_ERROR("squeeze: ", squeeze(a, 3));
    CHECK_ERROR("squeeze: ", squeeze(a, -4));
    CHECK_ERROR("squeeze: ", squeeze(scalar(1.0), 1));
    CHECK_ERROR("flatten: ", flatten(a, 2, 1));  // start after end
    CHECK_ERROR("flatten: ", flatten(a, -1, 0));
    CHECK_ERROR("flatten: ", flatten(a, 0, 3));
    CHECK_THROWS_WITH_AS(flatten(a, 2, 1), doctest::Contains("[2, 3, 4]"), Error);
  }
}

// ---- expand ------------------------------------------------------------------------------------------------------

// Broadcast to a larger shape: size-1 axes grow, new leading axes appear, -1 keeps an axis; the gradient sums over
// every copy.
TEST_CASE("expand") {
  std::mt19937 gen(202);

  SUBCASE("gradients") {
    struct ExpandCase {
      shape_t in;
      std::vector<std::int64_t> target;
      shape_t out;
    };
    const ExpandCase cases[] = {
        {{3, 1}, {3, 4}, {3, 4}},             // a size-1 axis grows
        {{3}, {2, 3}, {2, 3}},                // a new leading axis
        {{1}, {2, 3, 4}, {2, 3, 4}},          // both
        {{2, 1, 3}, {-1, 4, -1}, {2, 4, 3}},  // -1 keeps an axis
        {{1, 3}, {2, 2, -1}, {2, 2, 3}},      // -1 after new leading axes
        {{}, {2, 3}, {2, 3}},                 // 0-d to a matrix
        {{2, 3}, {2, 3}, {2, 3}},             // no change
    };
    for (const auto& c : cases) {
      INFO(shape_str(c.in) << " expanded to " << shape_str(c.out));
      DTensor a = rand_input(c.in, gen);
      CHECK(expand(a, c.target).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return expand(in[0], c.target); }, {a});
    }
  }
  SUBCASE("values") {
    Tensor col(reshaped<float>({1, 2}, {2, 1}), true);
    const Tensor e = expand(col, {2, 3});
    CHECK_CLOSE(e.value(), (xt::xarray<double>{{1, 1, 1}, {2, 2, 2}}), 0.0);
    e.backward(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
    CHECK_CLOSE(col.grad(), reshaped<double>({6, 15}, {2, 1}), 0.0);  // each element gets its row's sum
    // A size-1 axis may expand to 0: an empty result whose gradient is zero.
    DTensor one(xt::xarray<double>{2.5}, true);
    const DTensor none = expand(one, {4, 0});
    CHECK(none.shape() == shape_t{4, 0});
    none.backward(xt::xarray<double>::from_shape({4, 0}));
    CHECK_CLOSE(one.grad(), (xt::xarray<double>{0}), 0.0);
  }
  SUBCASE("errors") {
    const Tensor a(xt::xarray<float>::from_shape({2, 3}));
    CHECK_ERROR("expand: ", expand(a, {2, 4}));      // 3 is neither 1 nor 4
    CHECK_ERROR("expand: ", expand(a, {3}));         // fewer dims
    CHECK_ERROR("expand: ", expand(a, {-1, 2, 3}));  // -1 for a new leading axis
    CHECK_ERROR("expand: ", expand(a, {2, -2}));
    CHECK_THROWS_WITH_AS(expand(a, {2, 4}), doctest::Contains("[2, 3] to [2, 4]"), Error);
  }
}

// ---- concat, stack ------------------------------------------------------------------------------------------------

// Joining along an existing axis (concat, alias cat) and a new one (stack): every input gets back exactly its own
// block of the output gradient; a tensor listed twice gets both blocks.
TEST_CASE("concat, cat, stack") {
  std::mt19937 gen(203);

  SUBCASE("gradients") {
    DTensor a = rand_input({2, 3}, gen), b = rand_input({2, 1}, gen), c = rand_input({2, 4}, gen);
    CHECK(concat({a, b, c}, 1).shape() == shape_t{2, 8});
    CHECK_GRADIENT([](const Inputs& in) { return concat(in, 1); }, {a, b, c});
    CHECK_GRADIENT([](const Inputs& in) { return concat(in, -1); }, {a, b, c});
    CHECK_GRADIENT([](const Inputs& in) { return cat(in, -1); }, {a, b, c});
    DTensor r1 = rand_input({1, 3}, gen);
    CHECK(concat({r1, a}, 0).shape() == shape_t{3, 3});
    CHECK_GRADIENT([](const Inputs& in) { return concat(in, 0); }, {r1, a});
    // The middle axis of 3-D tensors, one input empty along it.
    DTensor p = rand_input({2, 2, 3}, gen), q = rand_input({2, 1, 3}, gen);
    const DTensor none(xt::xarray<double>::from_shape({2, 0, 3}), true);
    CHECK(concat({p, none, q}, 1).shape() == shape_t{2, 3, 3});
    CHECK_GRADIENT([](const Inputs& in) { return concat(in, -2); }, {p, none, q});
    // One tensor twice, and a constant in the list.
    const DTensor fixed(uniform({2, 3}, gen));
    CHECK_GRADIENT([&](const Inputs& in) { return concat({in[0], fixed, in[0]}, 0); }, {a});

    DTensor s1 = rand_input({2, 3}, gen), s2 = rand_input({2, 3}, gen), s3 = rand_input({2, 3}, gen);
    struct StackCase {
      int dim;
      shape_t out;
    };
    for (const auto& sc : {StackCase{0, {3, 2, 3}}, StackCase{1, {2, 3, 3}}, StackCase{2, {2, 3, 3}},
                           StackCase{-1, {2, 3, 3}}, StackCase{-3, {3, 2, 3}}}) {
      INFO("stack dim " << sc.dim);
      CHECK(stack({s1, s2, s3}, sc.dim).shape() == sc.out);
      CHECK_GRADIENT([&](const Inputs& in) { return stack(in, sc.dim); }, {s1, s2, s3});
    }
    // 0-d tensors stack into a vector.
    DTensor x(xt::xarray<double>(0.3), true), y(xt::xarray<double>(-1.2), true);
    CHECK(stack({x, y}).shape() == shape_t{2});
    CHECK_GRADIENT([](const Inputs& in) { return stack(in); }, {x, y});
  }
  SUBCASE("values") {
    const Tensor a(xt::xarray<float>{{1, 2}, {3, 4}}), b(reshaped<float>({5, 6}, {2, 1})), c(xt::xarray<float>{{7, 8}});
    CHECK_CLOSE(concat({a, b}, 1).value(), (xt::xarray<double>{{1, 2, 5}, {3, 4, 6}}), 0.0);
    CHECK_CLOSE(cat({a, c}, 0).value(), (xt::xarray<double>{{1, 2}, {3, 4}, {7, 8}}), 0.0);
    CHECK_CLOSE(concat(std::vector<Tensor>{a}, 0).value(), (xt::xarray<double>{{1, 2}, {3, 4}}), 0.0);
    const Tensor d(xt::xarray<float>{{10, 20}, {30, 40}});
    CHECK_CLOSE(stack({a, d}, 0).value(), (xt::xarray<double>{{{1, 2}, {3, 4}}, {{10, 20}, {30, 40}}}), 0.0);
    CHECK_CLOSE(stack({a, d}, 1).value(), (xt::xarray<double>{{{1, 2}, {10, 20}}, {{3, 4}, {30, 40}}}), 0.0);
    CHECK_CLOSE(stack({a, d}, 2).value(), (xt::xarray<double>{{{1, 10}, {2, 20}}, {{3, 30}, {4, 40}}}), 0.0);
    // Gradients: each input its own block.
    DTensor u(xt::xarray<double>{1, 2}, true), v(xt::xarray<double>{3}, true);
    concat({u, v, u}, 0).backward(xt::xarray<double>{10, 20, 30, 40, 50});
    CHECK_CLOSE(u.grad(), (xt::xarray<double>{50, 70}), 0.0);
    CHECK_CLOSE(v.grad(), (xt::xarray<double>{30}), 0.0);
  }
  SUBCASE("errors") {
    const Tensor m23(xt::xarray<float>::from_shape({2, 3})), m33(xt::xarray<float>::from_shape({3, 3})),
        v3(xt::xarray<float>::from_shape({3}));
    CHECK_ERROR("concat: ", concat({m23, m33}, 1));  // sizes differ off the concat axis
    CHECK_THROWS_WITH_AS(concat({m23, m33}, 1), doctest::Contains("[3, 3]"), Error);
    CHECK_ERROR("concat: ", concat({m23, v3}, 0));   // ranks differ
    CHECK_ERROR("concat: ", concat({m23, m33}, 2));  // dim out of range
    CHECK_ERROR("concat: ", concat(std::vector<Tensor>{}, 0));
    CHECK_ERROR("concat: ", concat({scalar(1.f), scalar(2.f)}, 0));
    CHECK_ERROR("concat: ", cat({m23, m33}, -1));
    CHECK_ERROR("stack: ", stack({m23, m33}, 0));  // shapes differ
    CHECK_THROWS_WITH_AS(stack({m23, m33}), doctest::Contains("[2, 3]"), Error);
    CHECK_ERROR("stack: ", stack({m23, m23}, 3));  // allowed: -3 to 2
    CHECK_ERROR("stack: ", stack({m23, m23}, -4));
    CHECK_ERROR("stack: ", stack(std::vector<Tensor>{}, 0));
  }
}

// ---- split, chunk ------------------------------------------------------------------------------------------------

// Cutting along an axis with PyTorch's piece sizes; each piece is its own node and passes its gradient back to its
// own block (zeros where a piece goes unused).
TEST_CASE("split, chunk") {
  std::mt19937 gen(204);
  DTensor a = rand_input({5, 3}, gen);

  SUBCASE("gradients") {
    // Reversed order in the concat: a piece routed to the wrong block would show.
    auto reversed = [](std::vector<DTensor> pieces, int dim) {
      return concat(std::vector<DTensor>(pieces.rbegin(), pieces.rend()), dim);
    };
    CHECK(shapes_of(split(a, 2)) == std::vector<shape_t>{{2, 3}, {2, 3}, {1, 3}});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(split(in[0], 2), 0); }, {a});
    CHECK(shapes_of(split(a, 2, -1)) == std::vector<shape_t>{{5, 2}, {5, 1}});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(split(in[0], 2, -1), 1); }, {a});
    CHECK(shapes_of(split(a, std::vector<std::size_t>{1, 0, 4})) == std::vector<shape_t>{{1, 3}, {0, 3}, {4, 3}});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(split(in[0], {1, 0, 4}), 0); }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(split(in[0], {1, 2}, 1), 1); }, {a});
    // Only the middle piece used: the other rows get zero gradient.
    CHECK_GRADIENT([](const Inputs& in) { return split(in[0], {1, 3, 1}, 0)[1]; }, {a});
    CHECK(shapes_of(chunk(a, 3)) == std::vector<shape_t>{{2, 3}, {2, 3}, {1, 3}});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(chunk(in[0], 3), 0); }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(chunk(in[0], 2, -1), -1); }, {a});
    DTensor b = rand_input({2, 6, 1}, gen);
    CHECK(shapes_of(chunk(b, 4, 1)) == std::vector<shape_t>{{2, 2, 1}, {2, 2, 1}, {2, 2, 1}});  // 3 < 4 pieces
    CHECK_GRADIENT([&](const Inputs& in) { return reversed(chunk(in[0], 4, 1), 1); }, {b});
  }
  SUBCASE("values and PyTorch's piece sizes") {
    const Tensor x(iota<float>({5}));
    const auto p = split(x, 2);
    REQUIRE(p.size() == 3);
    CHECK_CLOSE(p[0].value(), (xt::xarray<double>{0, 1}), 0.0);
    CHECK_CLOSE(p[1].value(), (xt::xarray<double>{2, 3}), 0.0);
    CHECK_CLOSE(p[2].value(), (xt::xarray<double>{4}), 0.0);
    CHECK(split(x, 7).size() == 1);  // split_size larger than the axis: one piece
    const auto q = split(x, {3, 2});
    REQUIRE(q.size() == 2);
    CHECK_CLOSE(q[1].value(), (xt::xarray<double>{3, 4}), 0.0);
    // chunk: ceil(size / chunks) per piece, so possibly fewer pieces than asked.
    CHECK(shapes_of(chunk(x, 2)) == std::vector<shape_t>{{3}, {2}});
    CHECK(shapes_of(chunk(x, 5)) == std::vector<shape_t>{{1}, {1}, {1}, {1}, {1}});
    CHECK(shapes_of(chunk(x, 9)) == std::vector<shape_t>{{1}, {1}, {1}, {1}, {1}});
    CHECK(shapes_of(chunk(Tensor(iota<float>({6})), 4)) == std::vector<shape_t>{{2}, {2}, {2}});
    const Tensor m(iota<float>({2, 4}));
    const auto cols = chunk(m, 2, 1);
    CHECK_CLOSE(cols[1].value(), (xt::xarray<double>{{2, 3}, {6, 7}}), 0.0);
    // Empty axes, as PyTorch: split gives one empty piece (split_size 0 allowed here), chunk gives `chunks` of them.
    const Tensor e(xt::xarray<float>::from_shape({0, 3}));
    CHECK(shapes_of(split(e, 2)) == std::vector<shape_t>{{0, 3}});
    CHECK(shapes_of(split(e, 0)) == std::vector<shape_t>{{0, 3}});
    CHECK(shapes_of(chunk(e, 3)) == std::vector<shape_t>{{0, 3}, {0, 3}, {0, 3}});
    // Gradient of one piece lands in its rows only.
    DTensor y(iota<double>({4}), true);
    split(y, {1, 2, 1})[1].backward(xt::xarray<double>{5, 6});
    CHECK_CLOSE(y.grad(), (xt::xarray<double>{0, 5, 6, 0}), 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("split: ", split(a, 0));          // split_size 0 on a non-empty axis
    CHECK_ERROR("split: ", split(a, {2, 2}, 0));  // 4 != 5
    CHECK_THROWS_WITH_AS(split(a, {2, 2}, 0), doctest::Contains("sum to 4"), Error);
    CHECK_ERROR("split: ", split(a, {2, 2, 2}, 0));  // 6 != 5
    CHECK_ERROR("split: ", split(a, 2, 2));          // bad dim
    CHECK_ERROR("split: ", split(scalar(1.0), 1));   // 0-d
    CHECK_ERROR("chunk: ", chunk(a, 0));
    CHECK_ERROR("chunk: ", chunk(a, 2, -3));
    CHECK_ERROR("chunk: ", chunk(scalar(1.0), 2));
  }
}

// ---- slice -------------------------------------------------------------------------------------------------------

// Python's a[start:end:step] along one axis: negative start/end count from the end and are clamped; an empty
// result is allowed; the gradient reaches exactly the selected positions.
TEST_CASE("slice") {
  std::mt19937 gen(205);
  DTensor a = rand_input({3, 7}, gen);

  SUBCASE("gradients") {
    struct SliceCase {
      int dim;
      std::int64_t start, end, step;
      shape_t out;
    };
    const SliceCase cases[] = {
        {1, 1, 4, 1, {3, 3}},    {1, 0, 7, 2, {3, 4}},  {-1, -5, -1, 3, {3, 2}}, {0, 1, 100, 1, {2, 7}},
        {0, -100, 2, 1, {2, 7}}, {-2, 2, 3, 1, {1, 7}}, {1, 6, 7, 5, {3, 1}},    {1, 2, 1000, 10, {3, 1}},
    };
    for (const auto& c : cases) {
      INFO("slice dim " << c.dim << " [" << c.start << ":" << c.end << ":" << c.step << "]");
      CHECK(slice(a, c.dim, c.start, c.end, c.step).shape() == c.out);
      CHECK_GRADIENT([&](const Inputs& in) { return slice(in[0], c.dim, c.start, c.end, c.step); }, {a});
    }
    // Slices of a slice, and the default end.
    CHECK_GRADIENT([](const Inputs& in) { return slice(slice(in[0], 1, 1, 6, 2), 0, 1); }, {a});
  }
  SUBCASE("values") {
    const Tensor x(iota<float>({10}));
    CHECK_CLOSE(slice(x, 0, 2, 7).value(), (xt::xarray<double>{2, 3, 4, 5, 6}), 0.0);
    CHECK_CLOSE(slice(x, 0, -3).value(), (xt::xarray<double>{7, 8, 9}), 0.0);
    CHECK_CLOSE(slice(x, 0, 1, 8, 3).value(), (xt::xarray<double>{1, 4, 7}), 0.0);
    CHECK_CLOSE(slice(x, 0, 0, -1, 4).value(), (xt::xarray<double>{0, 4, 8}), 0.0);
    CHECK_CLOSE(slice(x, 0, -100, 100).value(), iota<double>({10}), 0.0);
    CHECK_CLOSE(slice(x, 0, 9, 10, 5).value(), (xt::xarray<double>{9}), 0.0);
    const Tensor m(iota<float>({3, 4}));
    CHECK_CLOSE(slice(m, 1, 1, 3).value(), (xt::xarray<double>{{1, 2}, {5, 6}, {9, 10}}), 0.0);
    CHECK_CLOSE(slice(m, -2, -1).value(), (xt::xarray<double>{{8, 9, 10, 11}}), 0.0);
    // Empty results: end before start, start past the end, both clamped to the same place.
    CHECK(slice(x, 0, 5, 2).shape() == shape_t{0});
    CHECK(slice(x, 0, 10, 12).shape() == shape_t{0});
    CHECK(slice(x, 0, -100, -50).shape() == shape_t{0});
    CHECK(slice(m, 1, 4).shape() == shape_t{3, 0});
    // An empty slice still backpropagates: zero gradient.
    DTensor y(iota<double>({3, 4}), true);
    const DTensor nothing = slice(y, 1, 3, 1);
    nothing.backward(xt::xarray<double>::from_shape({3, 0}));
    CHECK_CLOSE(y.grad(), xt::xarray<double>(xt::zeros<double>({3, 4})), 0.0);
    // A strided slice's gradient lands on its positions only.
    DTensor z(iota<double>({5}), true);
    slice(z, 0, 0, 5, 2).backward(xt::xarray<double>{1, 2, 3});
    CHECK_CLOSE(z.grad(), (xt::xarray<double>{1, 0, 2, 0, 3}), 0.0);
  }
  SUBCASE("errors") {
    CHECK_ERROR("slice: ", slice(a, 1, 0, 5, 0));
    CHECK_ERROR("slice: ", slice(a, 1, 5, 0, -1));  // negative steps are not supported (nor in PyTorch)
    CHECK_ERROR("slice: ", slice(a, 2, 0, 1));
    CHECK_ERROR("slice: ", slice(a, -3, 0, 1));
    CHECK_ERROR("slice: ", slice(scalar(1.0), 0, 0, 1));
  }
}

// ---- index_select, gather ------------------------------------------------------------------------------------------

// index_select along any axis, repeated indices accumulating their gradients; empty index lists.
TEST_CASE("index_select") {
  std::mt19937 gen(206);
  DTensor a = rand_input({4, 3, 2}, gen);

  SUBCASE("gradients") {
    const index_array repeated{3, 0, 3, 3};
    CHECK(index_select(a, 0, repeated).shape() == shape_t{4, 3, 2});
    CHECK_GRADIENT([&](const Inputs& in) { return index_select(in[0], 0, repeated); }, {a});
    const index_array cols{2, 0};
    CHECK(index_select(a, 1, cols).shape() == shape_t{4, 2, 2});
    CHECK_GRADIENT([&](const Inputs& in) { return index_select(in[0], 1, cols); }, {a});
    const index_array last{1, 1, 0};
    CHECK(index_select(a, -1, last).shape() == shape_t{4, 3, 3});
    CHECK_GRADIENT([&](const Inputs& in) { return index_select(in[0], -1, last); }, {a});
    const index_array one{1};
    CHECK_GRADIENT([&](const Inputs& in) { return index_select(in[0], -2, one); }, {a});
  }
  SUBCASE("values") {
    Tensor m(iota<float>({3, 4}), true);
    const Tensor rows = index_select(m, 0, index_array{2, 0, 2});
    CHECK_CLOSE(rows.value(), (xt::xarray<double>{{8, 9, 10, 11}, {0, 1, 2, 3}, {8, 9, 10, 11}}), 0.0);
    const Tensor cols = index_select(m, 1, index_array{3, 1});
    CHECK_CLOSE(cols.value(), (xt::xarray<double>{{3, 1}, {7, 5}, {11, 9}}), 0.0);
    sum(rows).backward();
    CHECK_CLOSE(m.grad(), (xt::xarray<double>{{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 2, 2, 2}}), 0.0);
    // No indices: an empty axis.
    const index_array none = index_array::from_shape({0});
    CHECK(index_select(m, 1, none).shape() == shape_t{3, 0});
  }
  SUBCASE("errors") {
    CHECK_ERROR("index_select: ", index_select(a, 0, index_array{0, 4}));
    CHECK_THROWS_WITH_AS(index_select(a, 0, index_array{0, 4}), doctest::Contains("index 4"), Error);
    CHECK_THROWS_WITH_AS(index_select(a, 0, index_array{0, 4}), doctest::Contains("[0, 4)"), Error);
    CHECK_THROWS_WITH_AS(index_select(a, 1, index_array{-1}), doctest::Contains("index -1"), Error);
    CHECK_ERROR("index_select: ", index_select(a, 0, index_array{{0, 1}}));  // 2-D indices
    CHECK_ERROR("index_select: ", index_select(a, 3, index_array{0}));
    CHECK_ERROR("index_select: ", index_select(scalar(1.0), 0, index_array{0}));
  }
}

// gather with torch.gather semantics: out[i][j] = a[i][index[i][j]] for dim 1; the index may be smaller than the
// input in the other dims; repeated reads scatter-add their gradients.
TEST_CASE("gather") {
  std::mt19937 gen(207);

  SUBCASE("gradients") {
    DTensor a = rand_input({3, 4}, gen);
    const index_array rows{{0, 2, 1, 0}, {2, 2, 0, 1}};  // dim 0: index [2, 4], reads repeat
    CHECK(gather(a, 0, rows).shape() == shape_t{2, 4});
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], 0, rows); }, {a});
    const index_array cols{{3, 3, 0, 1, 3}, {0, 1, 2, 3, 0}, {2, 2, 2, 2, 2}};  // dim 1: more picks than columns
    CHECK(gather(a, 1, cols).shape() == shape_t{3, 5});
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], 1, cols); }, {a});
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], -1, cols); }, {a});
    DTensor b = rand_input({2, 3, 4}, gen);
    const index_array small = reshaped<std::int64_t>({1, 0}, {1, 2, 1});  // [1, 2, 1]: smaller than b in every dim
    CHECK(gather(b, 1, small).shape() == shape_t{1, 2, 1});
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], 1, small); }, {b});
    const index_array last{{{3, 0}, {1, 1}, {2, 3}}, {{0, 0}, {3, 2}, {1, 0}}};  // [2, 3, 2] along dim -1
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], -1, last); }, {b});
    // 0-d input with a 0-d index holding 0.
    DTensor s(xt::xarray<double>(1.5), true);
    index_array zero = index_array::from_shape({});
    zero() = 0;
    CHECK(gather(s, 0, zero).shape() == shape_t{});
    CHECK_GRADIENT([&](const Inputs& in) { return gather(in[0], 0, zero) * in[0]; }, {s});
  }
  SUBCASE("values") {
    // The example of the torch.gather documentation.
    Tensor t(xt::xarray<float>{{1, 2}, {3, 4}}, true);
    const Tensor g = gather(t, 1, index_array{{0, 0}, {1, 0}});
    CHECK_CLOSE(g.value(), (xt::xarray<double>{{1, 1}, {4, 3}}), 0.0);
    sum(g).backward();
    CHECK_CLOSE(t.grad(), (xt::xarray<double>{{2, 0}, {1, 1}}), 0.0);
    const Tensor m(iota<float>({3, 3}));
    CHECK_CLOSE(gather(m, 0, index_array{{2, 1, 0}}).value(), (xt::xarray<double>{{6, 4, 2}}), 0.0);
    CHECK(gather(m, 1, index_array::from_shape({3, 0})).shape() == shape_t{3, 0});
  }
  SUBCASE("errors") {
    const DTensor a(xt::xarray<double>::from_shape({2, 3}));
    CHECK_ERROR("gather: ", gather(a, 1, index_array{0, 1}));                          // ranks differ
    CHECK_ERROR("gather: ", gather(a, 1, reshaped<std::int64_t>({0, 1, 2}, {3, 1})));  // index dim 0 larger than a's
    CHECK_ERROR("gather: ", gather(a, 1, index_array{{0, 3}}));
    CHECK_THROWS_WITH_AS(gather(a, 1, index_array{{0, 3}}), doctest::Contains("index 3 at position [0, 1]"), Error);
    CHECK_THROWS_WITH_AS(gather(a, 0, index_array{{0, -1}}), doctest::Contains("[0, 2)"), Error);
    CHECK_ERROR("gather: ", gather(a, 2, reshaped<std::int64_t>({0}, {1, 1})));
  }
}

// ---- matmul with 1-D operands ------------------------------------------------------------------------------------

// numpy.matmul's 1-D rules: a 1-D left operand is a row (the 1 removed after), a 1-D right operand a column, and
// 1-D @ 1-D is a 0-d dot product; batch dims of the other operand broadcast as usual.
TEST_CASE("matmul with 1-D operands") {
  std::mt19937 gen(208);
  const std::vector<MatmulCase> cases = {
      {{3}, {3}, {}},                  // dot product
      {{3}, {3, 4}, {4}},              // vector @ matrix
      {{4, 3}, {3}, {4}},              // matrix @ vector
      {{2, 5, 3}, {3}, {2, 5}},        // batched matrices @ vector (one GEMM over all rows)
      {{3}, {2, 3, 4}, {2, 4}},        // vector @ batched matrices
      {{3}, {2, 1, 3, 4}, {2, 1, 4}},  // vector @ 4-D batch with a size-1 batch dim
      {{1, 2, 4, 3}, {3}, {1, 2, 4}},  // 4-D batch with a size-1 batch dim @ vector
      {{1}, {1, 5}, {5}},              // K = 1
      {{2, 1, 3}, {3}, {2, 1}},        // M = 1
  };

  SUBCASE("gradients and values against a reference") {
    // The reference on the promoted operands, with the added axis removed.
    check_matmul_cases(cases, gen, [](const auto& a, const auto& b, const MatmulCase& c) {
      shape_t as = c.a, bs = c.b;
      if (as.size() == 1) as.insert(as.begin(), 1);
      if (bs.size() == 1) bs.push_back(1);
      return reshaped(reference_matmul(reshaped(a, as), reshaped(b, bs)), c.out);
    });
    // One operand constant; and a vector dotted with itself (both paths).
    DTensor v = rand_input({3}, gen);
    const DTensor w(uniform({2, 3, 4}, gen));
    CHECK_GRADIENT([&](const Inputs& in) { return matmul(in[0], w); }, {v});
    CHECK_GRADIENT([](const Inputs& in) { return matmul(in[0], in[0]); }, {v});
    // Broadcast batches of two N-D operands still go through the loop path unchanged.
    DTensor p = rand_input({2, 1, 2, 3}, gen), q = rand_input({3, 3, 2}, gen);
    CHECK(matmul(p, q).shape() == shape_t{2, 3, 2, 2});
    CHECK_GRADIENT([](const Inputs& in) { return matmul(in[0], in[1]); }, {p, q});
  }
  SUBCASE("hand-computed values") {
    const Tensor u(xt::xarray<float>{1, 2, 3}), v(xt::xarray<float>{4, 5, 6});
    const Tensor dot = matmul(u, v);
    CHECK(dot.shape() == shape_t{});
    CHECK(dot.item() == 32.f);
    const Tensor m(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
    CHECK_CLOSE(matmul(Tensor(xt::xarray<float>{1, 2}), m).value(), (xt::xarray<double>{9, 12, 15}), 0.0);
    CHECK_CLOSE(matmul(m, Tensor(xt::xarray<float>{1, 0, -1})).value(), (xt::xarray<double>{-2, -2}), 0.0);
    // Gradients of the dot product: d(u.v)/du = v, d(u.v)/dv = u.
    DTensor x(xt::xarray<double>{1, 2, 3}, true), y(xt::xarray<double>{4, 5, 6}, true);
    matmul(x, y).backward();
    CHECK_CLOSE(x.grad(), (xt::xarray<double>{4, 5, 6}), 0.0);
    CHECK_CLOSE(y.grad(), (xt::xarray<double>{1, 2, 3}), 0.0);
    // Empty inner size: the dot product of two empty vectors is 0.
    CHECK(matmul(Tensor(xt::xarray<float>::from_shape({0})), Tensor(xt::xarray<float>::from_shape({0}))).item() == 0.f);
  }
  SUBCASE("errors") {
    const Tensor v3(xt::xarray<float>::from_shape({3})), v4(xt::xarray<float>::from_shape({4})),
        m45(xt::xarray<float>::from_shape({4, 5})), m24(xt::xarray<float>::from_shape({2, 4}));
    CHECK_ERROR("matmul: ", matmul(v3, v4));
    CHECK_ERROR("matmul: ", matmul(v3, m45));
    CHECK_THROWS_WITH_AS(matmul(v3, m45), doctest::Contains("[3] @ [4, 5]"), Error);
    CHECK_ERROR("matmul: ", matmul(m24, v3));
    CHECK_ERROR("matmul: ", matmul(scalar(1.f), v3));  // 0-d operands are not matrices
    CHECK_ERROR("matmul: ", matmul(v3, scalar(1.f)));
  }
}
