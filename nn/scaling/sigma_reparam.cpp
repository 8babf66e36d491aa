// sigma_reparam: W_q and W_k spectrally reparametrised, W' = (gamma / sigma(W)) W, with sigma(W) the spectral norm
// (largest singular value) and gamma a learned scalar per matrix, then scores = q·k / sqrt(d_k) of the
// reparametrised projections (σReparam: Zhai et al. 2023, "Stabilizing Transformer Training by Preventing Attention
// Entropy Collapse", eq. 2). Bounding the spectral norms of W_q and W_k bounds the attention logits, which is what
// keeps the attention entropy from collapsing.
//
// sigma(W) comes from power iteration on stored vectors u [d_model] and v [n_heads * d_k] (buffers w_q_u, w_q_v,
// w_k_u, w_k_v, saved in checkpoints so a resumed run continues the same iteration): one step per training step
// (update_state), and sigma = u^T W v with u and v constants of the graph, so d sigma / d W = u v^T (as
// torch.nn.utils.spectral_norm and the paper's reference code). At construction the iteration is run to
// convergence on the initial weights, and gamma (w_q_gamma, w_k_gamma, [1]) starts at that sigma, so W' = W at init
// and a run starts exactly where sqrt_dk's does (the authors' code initialises gamma the same way).
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "nn/scaling.h"

namespace xgrad::nn {
namespace {

// Iterations at construction: the error of sigma shrinks like (sigma_2 / sigma_1)^(2k); 100 reach float precision
// for the gaps of random initial weights.
constexpr int kInitialIterations = 100;

// |x| = 1 (x unchanged if it is 0).
void normalise(std::vector<double>& x) {
  double n = 0;
  for (double e : x) n += e * e;
  n = std::sqrt(n);
  if (n > 0)
    for (double& e : x) e /= n;
}

// One power-iteration step for W [m, n] (row-major): v = W^T u / |W^T u|, u = W v / |W v|.
void power_step(const xt::xarray<float>& w, std::vector<double>& u, std::vector<double>& v) {
  const std::size_t m = w.shape(0), n = w.shape(1);
  const float* W = w.data();
  std::fill(v.begin(), v.end(), 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) v[j] += W[i * n + j] * u[i];
  normalise(v);
  for (std::size_t i = 0; i < m; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < n; ++j) s += W[i * n + j] * v[j];
    u[i] = s;
  }
  normalise(u);
}

std::vector<double> values_of(const Tensor& t) { return std::vector<double>(t.value().begin(), t.value().end()); }

void store(Tensor& t, const std::vector<double>& x) {
  for (std::size_t i = 0; i < x.size(); ++i) t.mutable_value().data()[i] = static_cast<float>(x[i]);
}

template <class T>
basic_tensor<T> column(const Tensor& t) {  // [n] float buffer → [n, 1] constant of type T
  xt::xarray<T> c = xt::xarray<T>::from_shape({t.numel(), 1});
  for (std::size_t i = 0; i < t.numel(); ++i) c.data()[i] = static_cast<T>(t.value().data()[i]);
  return basic_tensor<T>(std::move(c));
}

class SigmaReparamScaling : public AttentionScaling {
 public:
  SigmaReparamScaling(std::size_t d_model, std::size_t n_heads, std::size_t d_k)
      : multiplier_(1.0 / std::sqrt(static_cast<double>(d_k))) {
    const std::size_t inner = n_heads * d_k;
    register_parameter("w_q_gamma", ones<float>({1}));
    register_parameter("w_k_gamma", ones<float>({1}));
    u_q_ = register_buffer("w_q_u", zeros<float>({d_model}));
    v_q_ = register_buffer("w_q_v", zeros<float>({inner}));
    u_k_ = register_buffer("w_k_u", zeros<float>({d_model}));
    v_k_ = register_buffer("w_k_v", zeros<float>({inner}));
  }
  double multiplier() const override { return multiplier_; }

  void init_weights(const Tensor& w_q, const Tensor& w_k) override {
    const auto params = named_parameters();  // w_q_gamma, w_k_gamma
    converge(w_q, u_q_, v_q_, params[0].second);
    converge(w_k, u_k_, v_k_, params[1].second);
  }
  void update_state(const Tensor& w_q, const Tensor& w_k) override {
    step(w_q, u_q_, v_q_);
    step(w_k, u_k_, v_k_);
  }

  bool transforms_weights() const override { return true; }
  TensorPair<float> transform_weights(const Tensor& w_q, const Tensor& w_k,
                                      const std::vector<Tensor>& p) const override {
    return {reparametrised(w_q, p[0], u_q_, v_q_), reparametrised(w_k, p[1], u_k_, v_k_)};
  }
  TensorPair<double> transform_weights(const DTensor& w_q, const DTensor& w_k,
                                       const std::vector<DTensor>& p) const override {
    return {reparametrised(w_q, p[0], u_q_, v_q_), reparametrised(w_k, p[1], u_k_, v_k_)};
  }

 private:
  // W' = gamma W / sigma, sigma = u^T W v (u, v constants).
  template <class T>
  static basic_tensor<T> reparametrised(const basic_tensor<T>& w, const basic_tensor<T>& gamma, const Tensor& u,
                                        const Tensor& v) {
    const basic_tensor<T> sigma = sum(column<T>(u) * matmul(w, column<T>(v)));
    return w * (gamma / sigma);
  }
  static void step(const Tensor& w, Tensor& u, Tensor& v) {
    std::vector<double> a = values_of(u), b = values_of(v);
    power_step(w.value(), a, b);
    store(u, a);
    store(v, b);
  }
  static void converge(const Tensor& w, Tensor& u, Tensor& v, Tensor gamma) {
    std::vector<double> a(u.numel(), 1.0), b(v.numel());
    normalise(a);
    for (int i = 0; i < kInitialIterations; ++i) power_step(w.value(), a, b);
    store(u, a);
    store(v, b);
    double sigma = 0;  // u^T W v
    const float* W = w.value().data();
    for (std::size_t i = 0; i < a.size(); ++i)
      for (std::size_t j = 0; j < b.size(); ++j) sigma += a[i] * W[i * b.size() + j] * b[j];
    gamma.mutable_value()(0) = static_cast<float>(sigma);
  }
  double multiplier_;
  Tensor u_q_, v_q_, u_k_, v_k_;
};

const Registration<ScalingEntry> sigma_reparam_registration{scaling_entry(
    "sigma_reparam",
    "W_q, W_k -> (gamma / sigma(W)) W, spectral norm by power iteration, learned gamma; scores / sqrt(d_k) (Zhai et "
    "al. 2023, \"Stabilizing Transformer Training by Preventing Attention Entropy Collapse\", eq. 2)",
    70, [](const ScalingContext& c) { return std::make_shared<SigmaReparamScaling>(c.d_model, c.n_heads, c.d_k); },
    {"#88CCEE", "dashdotdot"})};

}  // namespace
}  // namespace xgrad::nn
