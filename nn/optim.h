// Optimizers and gradient clipping, over a list of parameters (as torch.optim).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "common/enum_names.h"
#include "common/registry.h"
#include "common/setting.h"

namespace xgrad::nn {

/// Which parameters weight decay applies to (the optimizers' weight_decay_params setting): all, or matrices (2 or
/// more dimensions, nanoGPT's configure_optimizers: not biases, LayerNorm gains and scalars).
enum class WeightDecayParams { all, matrices };
/// The names of WeightDecayParams (config.json's and --weight-decay-params' text).
inline constexpr EnumName<WeightDecayParams> kWeightDecayParamsNames[] = {{WeightDecayParams::all, "all"},
                                                                          {WeightDecayParams::matrices, "matrices"}};

/// An optimizer's state for checkpoints: buffers by kind, each kind holding one array per parameter in params()
/// order (SGD: "momentum_buffer"; AdamW: "m" and "v"), and the number of steps taken (AdamW's bias correction t;
/// 0 for SGD).
struct OptimizerState {
  std::map<std::string, std::vector<xt::xarray<float>>> buffers;
  std::size_t step = 0;
};

class Optimizer {
 public:
  /// decay_matrices_only: weight decay applies only to parameters of 2 or more dimensions (weight_decay_params
  /// "matrices", nanoGPT's parameter groups); false: to every parameter (torch.optim given model.parameters()).
  explicit Optimizer(std::vector<Tensor> params, double lr, bool decay_matrices_only = false);
  virtual ~Optimizer() = default;
  /// Updates every parameter that has a gradient; parameters without one (not reached by backward) are skipped.
  virtual void step() = 0;
  /// Drops every parameter's gradient.
  void zero_grad();
  double lr() const { return lr_; }
  /// Throws Error unless lr > 0 and finite.
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  /// Per-parameter factors on lr (params() order; all 1 unless set): parameter i steps with lr * multipliers[i], its
  /// decoupled weight decay included (as a torch.optim parameter group's own lr). muP's per-layer learning rates
  /// (nn/mup.h). Throws Error unless there is one finite factor > 0 per parameter.
  void set_lr_multipliers(std::vector<double> multipliers);
  const std::vector<double>& lr_multipliers() const { return lr_multipliers_; }
  /// Whether weight decay skips the parameters of fewer than 2 dimensions (biases, LayerNorm gains, scalars).
  bool decay_matrices_only() const { return decay_matrices_only_; }
  /// A copy of the state (see OptimizerState).
  virtual OptimizerState state() const = 0;
  /// Replaces the state with `state`, so that the next step() continues exactly where the saved optimizer stopped.
  /// Throws Error naming the optimizer, the buffer kind and the parameter index for a missing or unexpected kind,
  /// a wrong number of arrays, or an array whose shape differs from its parameter's.
  virtual void load_state(const OptimizerState& state) = 0;
  /// The buffer kinds of state() ("momentum_buffer"; "m", "v"), for checkpoint readers.
  virtual std::vector<std::string> state_kinds() const = 0;

 protected:
  /// Checks `state` holds exactly `kinds`, each with one array per parameter of the parameter's shape.
  void check_state(const char* optimizer, const OptimizerState& state, const std::vector<std::string>& kinds) const;

  /// lr * lr_multipliers()[i]: the learning rate of parameter i.
  double lr_of(std::size_t i) const { return lr_ * lr_multipliers_[i]; }
  /// `weight_decay` for parameter i: 0 for one of fewer than 2 dimensions when decay_matrices_only().
  double weight_decay_of(std::size_t i, double weight_decay) const;

  std::vector<Tensor> params_;
  double lr_;
  std::vector<double> lr_multipliers_;
  bool decay_matrices_only_ = false;
};

/// SGD with momentum (PyTorch's form): buf = momentum * buf + (g + weight_decay * p); p -= lr * buf. With
/// decay_matrices_only, weight_decay is 0 for parameters of fewer than 2 dimensions (Optimizer's constructor).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.9, double weight_decay = 0.0,
      bool decay_matrices_only = false);
  void step() override;
  OptimizerState state() const override;
  void load_state(const OptimizerState& state) override;
  std::vector<std::string> state_kinds() const override { return {"momentum_buffer"}; }

 private:
  double momentum_, weight_decay_;
  std::vector<xt::xarray<float>> buf_;
};

/// AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2):
/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p).
/// With decay_matrices_only, weight_decay is 0 for parameters of fewer than 2 dimensions (nanoGPT's no-decay group).
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01, bool decay_matrices_only = false);
  void step() override;
  std::size_t step_count() const { return t_; }
  OptimizerState state() const override;
  void load_state(const OptimizerState& state) override;
  std::vector<std::string> state_kinds() const override { return {"m", "v"}; }

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  std::size_t t_ = 0;
  std::vector<xt::xarray<float>> m_, v_;
};

/// The optimizer registry (common/registry.h): each optimizer registers itself with its settings, so --optimizer,
/// --arms, their flags, config.json and checkpoints take the names and settings from the entries.
struct OptimizerEntry {
  static constexpr const char* kind = "optimizer";
  std::string name;               ///< what --optimizer and --arms take
  std::string description;        ///< one line with its source
  int order = 0;                  ///< place in listings
  std::vector<Setting> settings;  ///< its own settings (momentum, weight_decay, ...), besides lr
  /// Builds the optimizer over `params` at learning rate `lr` (> 0, finite) with `settings` (every declared key).
  std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> params, double lr, const SettingValues& settings)> build;
};
using OptimizerRegistry = Registry<OptimizerEntry>;

/// Builds the optimizer `name` with `given` settings over the entry's defaults. Throws RegistryError for an unknown
/// name (listing the registered ones) and Error for a bad lr.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params, double lr,
                                          const SettingValues& given = SettingValues());

/// Global L2 norm of all gradients. If it exceeds max_norm, scales every gradient by max_norm / norm.
/// Returns the norm before clipping (as torch.nn.utils.clip_grad_norm_). max_norm <= 0 or infinite: no clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

/// L2 norm of one tensor's gradient (0 when it has none), accumulated in double.
double grad_norm(const Tensor& param);

}  // namespace xgrad::nn
