// The engine's semantics: accumulation, multiple paths, graph release, no-grad, deep graphs.
#include <doctest/doctest.h>

#include "autograd/ops.h"

using namespace xgrad;

TEST_CASE("backward twice without zeroing accumulates: y = a*b → a.grad = 2b") {
  Tensor a(xt::xarray<float>{1.f, 2.f, 3.f}, true), b(xt::xarray<float>{4.f, 5.f, 6.f}, true);
  sum(a * b).backward();
  sum(a * b).backward();
  CHECK(a.grad() == xt::xarray<float>{8.f, 10.f, 12.f});
  a.zero_grad();
  CHECK_FALSE(a.has_grad());
}

TEST_CASE("broadcast [2,1] + [1,3] summed: grads reduce back to each input's shape") {
  xt::xarray<float> av{1.f, 2.f}, bv{1.f, 2.f, 3.f};
  av.reshape({2, 1});
  bv.reshape({1, 3});
  Tensor a(av, true), b(bv, true);
  sum(a + b).backward();
  CHECK(a.shape() == shape_t{2, 1});
  CHECK(b.shape() == shape_t{1, 3});
  CHECK(a.grad() == xt::ones<float>({2, 1}) * 3.f);
  CHECK(b.grad() == xt::ones<float>({1, 3}) * 2.f);
}

TEST_CASE("a tensor used on several paths gets the sum over all paths") {
  Tensor a(xt::xarray<float>{2.f}, true);
  Tensor y = a * a + a * 3.0;  // dy/da = 2a + 3
  sum(y).backward();
  CHECK(a.grad()(0) == doctest::Approx(7.f));
}

TEST_CASE("second backward through a freed graph is a clear error; retain_graph allows it") {
  Tensor a(xt::xarray<float>{1.f, 2.f}, true);
  Tensor y = sum(exp(a));
  y.backward();
  CHECK_THROWS_AS(y.backward(), Error);
  Tensor z = sum(exp(a));
  a.zero_grad();
  z.backward(true);
  z.backward();
  CHECK(a.grad()(0) == doctest::Approx(2 * std::exp(1.f)));
}

TEST_CASE("backward from a non-scalar needs an explicit gradient") {
  Tensor a(xt::xarray<float>{1.f, 2.f}, true);
  Tensor y = a * 2.0;
  CHECK_THROWS_AS(y.backward(), Error);
  y.backward(xt::xarray<float>{1.f, 10.f});
  CHECK(a.grad() == xt::xarray<float>{2.f, 20.f});
}

TEST_CASE("no-grad guard and detach stop graph recording") {
  Tensor a(xt::xarray<float>{1.f}, true);
  {
    NoGradGuard guard;
    CHECK_FALSE((a * 2.0).requires_grad());
  }
  CHECK((a * 2.0).requires_grad());
  CHECK_FALSE(a.detach().requires_grad());
  CHECK_FALSE((a.detach() * 2.0).requires_grad());
}

TEST_CASE("a chain of 10,000 ops backpropagates without stack overflow") {
  Tensor a(xt::xarray<float>{1.f}, true);
  Tensor y = a;
  for (int i = 0; i < 10000; ++i) y = y + 0.0;
  sum(y).backward();
  CHECK(a.grad()(0) == 1.f);
}

TEST_CASE("shape mismatch names the op and both shapes") {
  Tensor a(xt::xarray<float>::from_shape({2, 3})), b(xt::xarray<float>::from_shape({4, 3}));
  try {
    add(a, b);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("add") != std::string::npos);
    CHECK(msg.find("[2, 3]") != std::string::npos);
    CHECK(msg.find("[4, 3]") != std::string::npos);
  }
}

TEST_CASE("retain_grad keeps a non-leaf gradient; other non-leaf gradients are freed") {
  Tensor a(xt::xarray<float>{1.f, 2.f}, true);
  Tensor h = a * 3.0, k = a * 2.0;
  h.retain_grad();
  sum(h * h + k).backward();
  REQUIRE(h.has_grad());
  CHECK(h.grad() == xt::xarray<float>{6.f, 12.f});  // d(h^2)/dh = 2h
  CHECK_FALSE(k.has_grad());
  CHECK(a.grad() == xt::xarray<float>{20.f, 38.f});  // 3 * 2h + 2
}
