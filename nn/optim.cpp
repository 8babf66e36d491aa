#include "nn/optim.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "autograd/kernels/parallel.h"
#include "autograd/kernels/vector_math.h"

namespace xgrad::nn {

namespace {
// An eps below the smallest normal float is 0 in float, or a subnormal that flush_denormals reads as 0.
constexpr double kMinEps = FLT_MIN;

// printf's %.*g of `v` (nn does not link fmt).
std::string number_text(double v, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

OptimizerEntry sgd_entry() {
  OptimizerEntry e;
  e.name = "sgd";
  e.description = "SGD with momentum (PyTorch's form: the momentum buffer accumulates the gradient)";
  e.order = 10;
  e.settings = {momentum_setting(0.9), weight_decay_setting(), weight_decay_params_setting()};
  e.mup_lr = MupLearningRates::sgd;
  e.build = [](std::vector<OptimizerParameter> params, double lr,
               const SettingValues& v) -> std::unique_ptr<Optimizer> {
    return std::make_unique<SGD>(std::move(params), lr, v.get<double>("momentum"), v.get<double>("weight_decay"),
                                 decays_matrices_only(v));
  };
  return e;
}

OptimizerEntry adamw_entry() {
  OptimizerEntry e;
  e.name = "adamw";
  e.description = "AdamW (Loshchilov & Hutter 2019, \"Decoupled Weight Decay Regularization\", Algorithm 2)";
  e.order = 20;
  e.settings = {weight_decay_setting(), weight_decay_params_setting()};
  for (const Setting& s : adam_settings()) e.settings.push_back(s);
  e.mup_lr = MupLearningRates::adam;
  e.build = [](std::vector<OptimizerParameter> params, double lr,
               const SettingValues& v) -> std::unique_ptr<Optimizer> {
    return std::make_unique<AdamW>(std::move(params), lr, v.get<double>("beta1"), v.get<double>("beta2"),
                                   v.get<double>("eps"), v.get<double>("weight_decay"), decays_matrices_only(v));
  };
  return e;
}

const Registration<OptimizerEntry> sgd_registration{sgd_entry()};
const Registration<OptimizerEntry> adamw_registration{adamw_entry()};
}  // namespace

const char* parameter_role_name(ParameterRole role) {
  static const char* const names[] = {"hidden_matrix", "embedding", "readout", "gain", "bias"};
  return names[static_cast<int>(role)];
}

bool is_matrix(ParameterRole role) {
  return role == ParameterRole::hidden_matrix || role == ParameterRole::embedding || role == ParameterRole::readout;
}

ParameterRole parameter_role(const std::string& name, const shape_t& shape) {
  if (shape.size() >= 2) {
    if (name == "tok_emb.weight" || name == "pos_emb.weight") return ParameterRole::embedding;
    if (name == "head.weight") return ParameterRole::readout;
    return ParameterRole::hidden_matrix;
  }
  const std::size_t dot = name.rfind('.');
  return name.substr(dot == std::string::npos ? 0 : dot + 1) == "bias" ? ParameterRole::bias : ParameterRole::gain;
}

std::vector<OptimizerParameter> optimizer_parameters(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<OptimizerParameter> out;
  for (const auto& [name, tensor] : named) out.push_back({name, parameter_role(name, tensor.shape()), tensor});
  return out;
}

std::vector<OptimizerParameter> optimizer_parameters(const std::vector<Tensor>& params) {
  std::vector<OptimizerParameter> out;
  for (std::size_t i = 0; i < params.size(); ++i)
    out.push_back(
        {std::to_string(i), params[i].dim() >= 2 ? ParameterRole::hidden_matrix : ParameterRole::gain, params[i]});
  return out;
}

// weight_decay means the same for every optimizer that takes it (added to the gradient for SGD, decoupled for
// AdamW): one declaration, shared.
Setting weight_decay_setting() {
  return number_setting("weight_decay", 0.0, 0.0, 1e30, "weight decay (decoupled for AdamW)");
}

// Which parameters weight_decay applies to, as one declaration for every optimizer: "matrices" is nanoGPT's
// configure_optimizers (weights of 2 or more dimensions decayed; biases, LayerNorm gains and scalars not).
Setting weight_decay_params_setting() {
  return text_setting("weight_decay_params", enum_name(kWeightDecayParamsNames, WeightDecayParams::all),
                      enum_names(kWeightDecayParamsNames),
                      "which parameters weight_decay applies to: all, or matrices (2 or more dimensions: weights and "
                      "embeddings, not biases, LayerNorm gains and scalars)");
}

Setting momentum_setting(double default_value) {
  return number_setting("momentum", default_value, 0.0, kMaxDecay, "momentum (below 1 in float)");
}

std::vector<Setting> adam_settings() {
  return {number_setting("beta1", 0.9, 0.0, kMaxDecay, "decay rate of the first moment (below 1 in float)"),
          number_setting("beta2", 0.999, 0.0, kMaxDecay, "decay rate of the second moment (below 1 in float)"),
          number_setting("eps", 1e-8, kMinEps, 1.0, "added to the root of the second moment (a normal float)")};
}

bool decays_matrices_only(const SettingValues& v) {
  return parse_enum(kWeightDecayParamsNames, v.get<std::string>("weight_decay_params")) == WeightDecayParams::matrices;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<OptimizerParameter> params, double lr,
                                          const SettingValues& given) {
  const OptimizerEntry& entry = OptimizerRegistry::instance().at(name);
  auto optimizer = entry.build(std::move(params), lr, resolve_settings(entry.settings, given.json()));
  if (!optimizer) throw Error("optimizer '" + name + "': its build function returned nothing");
  return optimizer;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const std::vector<Tensor>& params, double lr,
                                          const SettingValues& given) {
  return make_optimizer(name, optimizer_parameters(params), lr, given);
}

Optimizer::Optimizer(std::vector<OptimizerParameter> params, double lr, bool decay_matrices_only)
    : lr_(lr), lr_multipliers_(params.size(), 1.0), decay_matrices_only_(decay_matrices_only) {
  for (OptimizerParameter& p : params) {
    params_.push_back(std::move(p.tensor));
    names_.push_back(std::move(p.name));
    roles_.push_back(p.role);
  }
  set_lr(lr);
}

Optimizer::Optimizer(const std::vector<Tensor>& params, double lr, bool decay_matrices_only)
    : Optimizer(optimizer_parameters(params), lr, decay_matrices_only) {}

void Optimizer::set_lr_multipliers(std::vector<double> multipliers) {
  if (multipliers.size() != params_.size())
    throw Error("optimizer: " + std::to_string(multipliers.size()) + " lr multipliers for " +
                std::to_string(params_.size()) + " parameters");
  for (double m : multipliers)
    if (!(m > 0) || !std::isfinite(m))
      throw Error("optimizer: lr multipliers must be finite numbers > 0, got " + std::to_string(m));
  lr_multipliers_ = std::move(multipliers);
}

void Optimizer::set_lr(double lr) {
  if (!(lr > 0) || !std::isfinite(lr))
    throw Error("optimizer: lr must be a finite number > 0, got " + std::to_string(lr));
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

void Optimizer::check_state(const char* optimizer, const OptimizerState& state,
                            const std::vector<std::string>& kinds) const {
  const std::string name(optimizer);
  for (const auto& [kind, arrays] : state.buffers)
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
      throw Error(name + ": load_state: unexpected state buffer '" + kind + "'");
  for (const std::string& kind : kinds) {
    const auto it = state.buffers.find(kind);
    if (it == state.buffers.end()) throw Error(name + ": load_state: no state buffer '" + kind + "'");
    if (it->second.size() != params_.size())
      throw Error(name + ": load_state: state buffer '" + kind + "' has " + std::to_string(it->second.size()) +
                  " arrays for " + std::to_string(params_.size()) + " parameters");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const shape_t have(it->second[i].shape().begin(), it->second[i].shape().end());
      if (have != params_[i].shape())
        throw Error(name + ": load_state: state buffer '" + kind + "' of parameter " + std::to_string(i) +
                    " has shape " + shape_str(have) + ", the parameter " + shape_str(params_[i].shape()));
    }
  }
}

double Optimizer::weight_decay_of(std::size_t i, double weight_decay) const {
  return decay_matrices_only_ && !is_matrix(roles_[i]) ? 0.0 : weight_decay;
}

SGD::SGD(std::vector<OptimizerParameter> params, double lr, double momentum, double weight_decay,
         bool decay_matrices_only)
    : Optimizer(std::move(params), lr, decay_matrices_only), momentum_(momentum), weight_decay_(weight_decay) {
  if (!(momentum >= 0 && momentum <= kMaxDecay))
    throw Error("SGD: momentum must be in [0, " + number_text(kMaxDecay, 8) + "] (below 1 in float), got " +
                number_text(momentum, 17));
  for (auto& p : params_) buf_.emplace_back(xt::zeros<float>(p.value().shape()));
}

void SGD::step() {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    float* w = p.mutable_value().data();
    const float* g = p.grad().data();
    float* b = buf_[i].data();
    const auto mu = static_cast<float>(momentum_), wd = static_cast<float>(weight_decay_of(i, weight_decay_)),
               lr = static_cast<float>(lr_of(i));
    parallel_for(0, p.numel(), grain_for(4, 64), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t j = lo; j < hi; ++j) {
        b[j] = mu * b[j] + g[j] + wd * w[j];
        w[j] -= lr * b[j];
      }
    });
  }
}

OptimizerState SGD::state() const { return {{{"momentum_buffer", buf_}}, 0}; }

void SGD::load_state(const OptimizerState& state) {
  check_state("SGD", state, {"momentum_buffer"});
  buf_ = state.buffers.at("momentum_buffer");
}

AdamW::AdamW(std::vector<OptimizerParameter> params, double lr, double beta1, double beta2, double eps,
             double weight_decay, bool decay_matrices_only)
    : Optimizer(std::move(params), lr, decay_matrices_only),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay) {
  if (!(beta1 >= 0 && beta1 <= kMaxDecay && beta2 >= 0 && beta2 <= kMaxDecay))
    throw Error("AdamW: betas must be in [0, " + number_text(kMaxDecay, 8) + "] (below 1 in float), got beta1 " +
                number_text(beta1, 17) + " and beta2 " + number_text(beta2, 17));
  if (!(eps >= kMinEps && eps <= 1))
    throw Error("AdamW: eps must be in [" + number_text(kMinEps, 9) + ", 1] (a normal float), got " +
                number_text(eps, 17));
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
  const auto rbc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    const auto step_size = static_cast<float>(lr_of(i) / bc1);
    const auto decay = static_cast<float>(1.0 - lr_of(i) * weight_decay_of(i, weight_decay_));
    float* w = p.mutable_value().data();
    const float* g = p.grad().data();
    float* m = m_[i].data();
    float* v = v_[i].data();
    // SIMD batches: std::sqrt per element would keep the compiler from vectorising the loop (see vector_math.h).
    // Chunks over threads are multiples of 64 elements, so every batch is the one the serial loop forms.
    parallel_for(0, p.numel(), grain_for(8, 64), [&](std::size_t lo, std::size_t hi) {
      simd::for_each_batch<float>(hi - lo, [&](std::size_t i, auto count) {
        const std::size_t j = lo + i;
        const simd::batch<float> gj = simd::load(g + j, count);
        const simd::batch<float> mj = b1 * simd::load(m + j, count) + (1 - b1) * gj;
        const simd::batch<float> vj = b2 * simd::load(v + j, count) + (1 - b2) * gj * gj;
        simd::batch<float> wj = simd::load(w + j, count) * decay;  // decoupled weight decay first, as torch.optim.AdamW
        wj -= step_size * mj / (xsimd::sqrt(vj) * rbc2 + eps);
        simd::store(m + j, mj, count);
        simd::store(v + j, vj, count);
        simd::store(w + j, wj, count);
      });
    });
  }
}

OptimizerState AdamW::state() const { return {{{"m", m_}, {"v", v_}}, t_}; }

void AdamW::load_state(const OptimizerState& state) {
  check_state("AdamW", state, {"m", "v"});
  m_ = state.buffers.at("m");
  v_ = state.buffers.at("v");
  t_ = state.step;
}

double grad_norm(const Tensor& param) {
  if (!param.has_grad()) return 0.0;
  // Four partial sums: one running sum is a chain of dependent adds (the compiler may not reorder them), which made
  // this loop latency-bound, ~4 cycles per element.
  double s[4] = {0, 0, 0, 0};
  const float* g = param.grad().data();
  const std::size_t n = param.numel();
  std::size_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (std::size_t k = 0; k < 4; ++k) s[k] += static_cast<double>(g[j + k]) * g[j + k];
  for (; j < n; ++j) s[0] += static_cast<double>(g[j]) * g[j];
  return std::sqrt((s[0] + s[1]) + (s[2] + s[3]));
}

std::vector<double> grad_norms(const std::vector<Tensor>& params) {
  std::vector<double> norms(params.size(), 0.0);
  parallel_for(0, params.size(), 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) norms[i] = grad_norm(params[i]);
  });
  return norms;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  double total = 0;
  for (const double n : grad_norms(params)) total += n * n;
  total = std::sqrt(total);
  clip_grads_with_norm(params, max_norm, total);
  return total;
}

void clip_grads_with_norm(const std::vector<Tensor>& params, double max_norm, double total_norm) {
  if (!(max_norm > 0 && std::isfinite(max_norm) && total_norm > max_norm)) return;
  const auto scale = static_cast<float>(max_norm / (total_norm + 1e-6));
  for (auto p : params)
    if (p.has_grad()) {
      float* g = p.mutable_grad().data();
      parallel_for(0, p.numel(), grain_for(1, 64), [&](std::size_t lo, std::size_t hi) {
        for (std::size_t j = lo; j < hi; ++j) g[j] *= scale;
      });
    }
}

}  // namespace xgrad::nn
