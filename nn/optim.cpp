#include "nn/optim.h"

#include <cmath>

namespace xgrad::nn {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) { set_lr(lr); }

void Optimizer::set_lr(double lr) {
  if (!(lr > 0) || !std::isfinite(lr)) throw Error("optimizer: lr must be a finite number > 0, got " + std::to_string(lr));
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay) {
  if (momentum < 0 || momentum >= 1) throw Error("SGD: momentum must be in [0, 1), got " + std::to_string(momentum));
  for (auto& p : params_) buf_.emplace_back(xt::zeros<float>(p.value().shape()));
}

void SGD::step() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    float* w = p.mutable_value().data();
    const float* g = p.grad().data();
    float* b = buf_[i].data();
    const auto mu = static_cast<float>(momentum_), wd = static_cast<float>(weight_decay_),
               lr = static_cast<float>(lr_);
    const std::size_t n = p.numel();
    for (std::size_t j = 0; j < n; ++j) {
      b[j] = mu * b[j] + g[j] + wd * w[j];
      w[j] -= lr * b[j];
    }
  }
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(std::move(params), lr), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1) throw Error("AdamW: betas must be in [0, 1)");
  if (!(eps > 0)) throw Error("AdamW: eps must be > 0");
  for (auto& p : params_) {
    m_.emplace_back(xt::zeros<float>(p.value().shape()));
    v_.emplace_back(xt::zeros<float>(p.value().shape()));
  }
}

void AdamW::step() {
  ++t_;
  const double bc1 = 1 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1 - std::pow(beta2_, static_cast<double>(t_));
  const auto b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_), eps = static_cast<float>(eps_);
  const auto step_size = static_cast<float>(lr_ / bc1), rbc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const auto decay = static_cast<float>(1.0 - lr_ * weight_decay_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    float* w = p.mutable_value().data();
    const float* g = p.grad().data();
    float* m = m_[i].data();
    float* v = v_[i].data();
    const std::size_t n = p.numel();
    for (std::size_t j = 0; j < n; ++j) {
      m[j] = b1 * m[j] + (1 - b1) * g[j];
      v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
      w[j] *= decay;  // decoupled weight decay, applied before the Adam step as torch.optim.AdamW does
      w[j] -= step_size * m[j] / (std::sqrt(v[j]) * rbc2 + eps);
    }
  }
}

double grad_norm(const Tensor& param) {
  if (!param.has_grad()) return 0.0;
  double s = 0;
  const float* g = param.grad().data();
  const std::size_t n = param.numel();
  for (std::size_t j = 0; j < n; ++j) s += static_cast<double>(g[j]) * g[j];
  return std::sqrt(s);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  double total = 0;
  for (const auto& p : params) {
    const double n = grad_norm(p);
    total += n * n;
  }
  total = std::sqrt(total);
  if (max_norm > 0 && std::isfinite(max_norm) && total > max_norm) {
    const auto scale = static_cast<float>(max_norm / (total + 1e-6));
    for (auto p : params)
      if (p.has_grad()) p.mutable_grad() *= scale;
  }
  return total;
}

}  // namespace xgrad::nn
