#include "nn/muon.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>

#include <xtensor/xmanipulation.hpp>

#include "autograd/blas.h"

namespace xgrad::nn {

namespace {
// Jordan's coefficients: the largest slope at 0 (a) for which the iterated polynomial still keeps every singular
// value in a band around 1, so that 5 steps lift small singular values as far as possible.
constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr int kSteps = 5;
// The Frobenius norm is clamped here (PyTorch's eps) so that a zero update stays zero instead of 0/0.
constexpr double kNormEps = 1e-7;

// X [r, c] (r <= c) through the iteration, in place.
void iterate(xt::xarray<float>& x, std::size_t r, std::size_t c) {
  std::vector<float> gram(r * r), poly(r * r);
  xt::xarray<float> next = x;
  for (int s = 0; s < kSteps; ++s) {
    blas::gemm(false, true, r, r, c, 1.0f, x.data(), c, x.data(), c, 0.0f, gram.data(), r);  // A = X X^T
    poly = gram;
    blas::gemm(false, false, r, r, r, kC, gram.data(), r, gram.data(), r, kB, poly.data(), r);  // b A + c A^2
    next = x;
    blas::gemm(false, false, r, c, r, 1.0f, poly.data(), r, x.data(), c, kA, next.data(), c);  // a X + (..) X
    std::swap(x, next);
  }
}

OptimizerEntry muon_entry() {
  OptimizerEntry e;
  e.name = "muon";
  e.description =
      "Muon (K. Jordan 2024, \"Muon: an optimizer for hidden layers in neural networks\"): Nesterov momentum "
      "orthogonalised by "
      "Newton-Schulz for hidden matrices, AdamW for embeddings, the readout, gains and biases";
  e.order = 30;
  e.settings = {momentum_setting(0.95), weight_decay_setting(), weight_decay_params_setting(),
                text_setting("adjust_lr_fn", enum_name(kMuonAdjustLrNames, MuonAdjustLr::match_rms_adamw),
                             enum_names(kMuonAdjustLrNames),
                             "muon's update scale for a [fan_in, fan_out] matrix: match_rms_adamw 0.2 "
                             "sqrt(max(fan_in, fan_out)) (Liu et al. 2025), original sqrt(max(1, fan_out / fan_in)) "
                             "(Jordan)"),
                number_setting("muon_adamw_lr", 0.0, 0.0, FLT_MAX,
                               "muon's AdamW learning rate for embeddings, the readout, gains and biases (0: --lr); "
                               "it follows --lr's schedule")};
  for (const Setting& s : adam_settings()) e.settings.push_back(s);
  e.build = [](std::vector<OptimizerParameter> params, double lr,
               const SettingValues& v) -> std::unique_ptr<Optimizer> {
    const double adamw_lr = v.get<double>("muon_adamw_lr");
    return std::make_unique<Muon>(std::move(params), lr, adamw_lr > 0 ? adamw_lr : lr, v.get<double>("momentum"),
                                  parse_enum(kMuonAdjustLrNames, v.get<std::string>("adjust_lr_fn")),
                                  v.get<double>("weight_decay"), v.get<double>("beta1"), v.get<double>("beta2"),
                                  v.get<double>("eps"), decays_matrices_only(v));
  };
  return e;
}

const Registration<OptimizerEntry> muon_registration{muon_entry()};

// The AdamW group: every parameter that is not a hidden matrix, in params() order.
std::vector<OptimizerParameter> adamw_group(const std::vector<OptimizerParameter>& params) {
  std::vector<OptimizerParameter> out;
  for (const OptimizerParameter& p : params)
    if (p.role != ParameterRole::hidden_matrix) out.push_back(p);
  return out;
}

}  // namespace

xt::xarray<float> newton_schulz(const xt::xarray<float>& matrix) {
  if (matrix.dimension() != 2)
    throw Error("newton_schulz: expects a matrix [rows, cols], got shape " +
                shape_str(shape_t(matrix.shape().begin(), matrix.shape().end())));
  const std::size_t rows = matrix.shape(0), cols = matrix.shape(1);
  if (matrix.size() == 0) return matrix;
  const bool transposed = rows > cols;
  xt::xarray<float> x = transposed ? xt::xarray<float>(xt::transpose(matrix)) : matrix;
  double sum = 0;
  for (std::size_t j = 0; j < x.size(); ++j) sum += static_cast<double>(x.data()[j]) * x.data()[j];
  x *= static_cast<float>(1.0 / std::max(std::sqrt(sum), kNormEps));
  iterate(x, std::min(rows, cols), std::max(rows, cols));
  return transposed ? xt::xarray<float>(xt::transpose(x)) : x;
}

double muon_lr_factor(MuonAdjustLr adjust, std::size_t fan_in, std::size_t fan_out) {
  if (adjust == MuonAdjustLr::match_rms_adamw) return 0.2 * std::sqrt(static_cast<double>(std::max(fan_in, fan_out)));
  return std::sqrt(std::max(1.0, static_cast<double>(fan_out) / static_cast<double>(fan_in)));
}

Muon::Muon(std::vector<OptimizerParameter> params, double lr, double adamw_lr, double momentum, MuonAdjustLr adjust,
           double weight_decay, double beta1, double beta2, double eps, bool decay_matrices_only)
    : Optimizer(params, lr, decay_matrices_only),
      base_lr_(lr),
      adamw_lr_(adamw_lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      adjust_(adjust),
      adamw_(std::make_unique<AdamW>(adamw_group(params), adamw_lr, beta1, beta2, eps, weight_decay,
                                     decay_matrices_only)) {
  if (!(momentum >= 0 && momentum <= kMaxDecay)) {
    char got[32];
    std::snprintf(got, sizeof got, "%.17g", momentum);
    throw Error(std::string("Muon: momentum must be in [0, 0.99999994] (below 1 in float), got ") + got);
  }
  long next = 0;
  for (const OptimizerParameter& p : params) {
    adamw_index_.push_back(p.role == ParameterRole::hidden_matrix ? -1 : next++);
    buf_.emplace_back(xt::zeros<float>(p.tensor.value().shape()));
  }
}

void Muon::step() {
  // The AdamW group moves at adamw_lr scaled as lr is now (a schedule sets lr()), with the same per-parameter factors.
  adamw_->set_lr(adamw_lr_ * (lr() / base_lr_));
  std::vector<double> multipliers;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!orthogonalised(i)) multipliers.push_back(lr_multipliers_[i]);
  adamw_->set_lr_multipliers(std::move(multipliers));
  adamw_->step();
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (orthogonalised(i) && params_[i].has_grad()) step_hidden(i);
}

void Muon::step_hidden(std::size_t i) {
  Tensor& p = params_[i];
  const std::size_t fan_in = p.shape()[0], fan_out = p.numel() / std::max<std::size_t>(fan_in, 1);
  const auto mu = static_cast<float>(momentum_);
  const float* g = p.grad().data();
  float* b = buf_[i].data();
  xt::xarray<float> update = xt::zeros<float>({fan_in, fan_out});
  float* u = update.data();
  for (std::size_t j = 0; j < p.numel(); ++j) {
    b[j] = mu * b[j] + (1 - mu) * g[j];
    u[j] = (1 - mu) * g[j] + mu * b[j];
  }
  const xt::xarray<float> o = newton_schulz(update);
  const auto decay = static_cast<float>(1.0 - lr_of(i) * weight_decay_of(i, weight_decay_));
  const auto step_size = static_cast<float>(lr_of(i) * muon_lr_factor(adjust_, fan_in, fan_out));
  float* w = p.mutable_value().data();
  for (std::size_t j = 0; j < p.numel(); ++j) w[j] = w[j] * decay - step_size * o.data()[j];
}

OptimizerState Muon::state() const {
  const OptimizerState adam = adamw_->state();
  OptimizerState out{{{"momentum_buffer", buf_}, {"m", {}}, {"v", {}}}, adam.step};
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const char* kind : {"m", "v"})
      out.buffers[kind].push_back(orthogonalised(i) ? xt::xarray<float>(xt::zeros<float>(params_[i].value().shape()))
                                                    : adam.buffers.at(kind)[adamw_index_[i]]);
  return out;
}

void Muon::load_state(const OptimizerState& state) {
  check_state("Muon", state, state_kinds());
  OptimizerState adam{{{"m", {}}, {"v", {}}}, state.step};
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!orthogonalised(i))
      for (const char* kind : {"m", "v"}) adam.buffers[kind].push_back(state.buffers.at(kind)[i]);
  adamw_->load_state(adam);
  buf_ = state.buffers.at("momentum_buffer");
}

}  // namespace xgrad::nn
