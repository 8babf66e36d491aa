// Optimizers and gradient clipping, over a list of parameters (as torch.optim).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
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

/// The largest decay rate (momentum, betas) the optimizers take: they compute in float, and a rate below 1 as a
/// double can be 1.0f (0.99999999 is), so that a moment never decays (AdamW's second moment stays 0 and its update
/// becomes m / eps). The largest float below 1, 0.99999994.
inline constexpr double kMaxDecay = 1.0 - 0x1p-24;

/// What a parameter is to the model, so that an optimizer can treat kinds of parameters apart (Muon orthogonalises
/// the updates of hidden matrices only; weight_decay_params "matrices" decays the first three kinds only).
enum class ParameterRole {
  hidden_matrix,  ///< a weight of 2 or more dimensions inside the network: W_q, W_k, W_v, W_o, the MLP's
  embedding,      ///< an input lookup table: tok_emb.weight, pos_emb.weight (tok_emb.weight also when tied)
  readout,        ///< the output projection: head.weight
  gain,           ///< a learned multiplier of fewer than 2 dimensions: LayerNorm weights, a scaling's scalars
  bias,           ///< an added vector: a parameter named bias
};

/// "hidden_matrix", "embedding", "readout", "gain", "bias".
const char* parameter_role_name(ParameterRole role);

/// Whether parameters of `role` are weights of 2 or more dimensions (hidden_matrix, embedding, readout).
bool is_matrix(ParameterRole role);

/// The role of parameter `name` (as named_parameters() names it) of `shape` in an nn::AttentionModel. Of 2 or more
/// dimensions: tok_emb.weight and pos_emb.weight embedding, head.weight readout, any other hidden_matrix (an
/// attention layer's own projections included). Of fewer: a name whose last part is "bias" bias, any other gain
/// (LayerNorm weights, and a scaling's learned scalars such as qk_gain, ssmax_s, sigma_reparam's gammas: they
/// multiply what they act on). With tie_word_embeddings the one table is named tok_emb.weight and keeps the role
/// embedding: its shape, init and lookup are the embedding's, and an optimizer that treats embeddings and the
/// readout apart from hidden matrices (Muon) treats both alike.
ParameterRole parameter_role(const std::string& name, const shape_t& shape);

/// One parameter as an optimizer gets it.
struct OptimizerParameter {
  std::string name;  ///< as named_parameters() names it ("blocks.0.attn.w_q.weight")
  ParameterRole role = ParameterRole::hidden_matrix;
  Tensor tensor;
};

/// A model's `named` parameters (named_parameters() order) with their roles (parameter_role).
std::vector<OptimizerParameter> optimizer_parameters(const std::vector<std::pair<std::string, Tensor>>& named);
/// Parameters without names: named by position ("0", "1", ...), with the role of their shape alone (hidden_matrix
/// for 2 or more dimensions, gain for fewer).
std::vector<OptimizerParameter> optimizer_parameters(const std::vector<Tensor>& params);

/// Which column of muP's learning-rate table (nn/mup.h; Tensor Programs V, Table 3) an optimizer follows.
enum class MupLearningRates {
  none,  ///< neither: --parametrization mup is refused with this optimizer
  adam,  ///< an update whose size does not follow the gradient's scale (Adam, sign descent, Lion)
  sgd,   ///< an update proportional to the gradient (SGD with momentum)
};

/// An optimizer's state for checkpoints: buffers by kind, each kind holding one array per parameter in params()
/// order (SGD: "momentum_buffer"; AdamW: "m" and "v"), and the number of steps taken (AdamW's bias correction t;
/// 0 for SGD).
struct OptimizerState {
  std::map<std::string, std::vector<xt::xarray<float>>> buffers;
  std::size_t step = 0;
};

class Optimizer {
 public:
  /// decay_matrices_only: weight decay applies only to the parameters whose role is_matrix (weight_decay_params
  /// "matrices", nanoGPT's parameter groups); false: to every parameter (torch.optim given model.parameters()).
  /// Throws Error for a bad lr.
  explicit Optimizer(std::vector<OptimizerParameter> params, double lr, bool decay_matrices_only = false);
  /// The same over parameters named by position, with the roles of their shapes (optimizer_parameters).
  explicit Optimizer(const std::vector<Tensor>& params, double lr, bool decay_matrices_only = false);
  virtual ~Optimizer() = default;
  /// Updates every parameter that has a gradient; parameters without one (not reached by backward) are skipped.
  virtual void step() = 0;
  /// Drops every parameter's gradient.
  void zero_grad();
  double lr() const { return lr_; }
  /// Throws Error unless lr > 0 and finite.
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  /// Each parameter's name and role, in params() order.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<ParameterRole>& roles() const { return roles_; }
  /// Per-parameter factors on lr (params() order; all 1 unless set): parameter i steps with lr * multipliers[i], its
  /// decoupled weight decay included (as a torch.optim parameter group's own lr). muP's per-layer learning rates
  /// (nn/mup.h). Throws Error unless there is one finite factor > 0 per parameter.
  void set_lr_multipliers(std::vector<double> multipliers);
  const std::vector<double>& lr_multipliers() const { return lr_multipliers_; }
  /// Whether weight decay skips the parameters whose role is not is_matrix (gains and biases).
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
  /// `weight_decay` for parameter i: 0 for a gain or bias when decay_matrices_only().
  double weight_decay_of(std::size_t i, double weight_decay) const;

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<ParameterRole> roles_;
  double lr_;
  std::vector<double> lr_multipliers_;
  bool decay_matrices_only_ = false;
};

/// SGD with momentum (PyTorch's form): buf = momentum * buf + (g + weight_decay * p); p -= lr * buf. With
/// decay_matrices_only, weight_decay is 0 for gains and biases (Optimizer's constructor).
class SGD : public Optimizer {
 public:
  SGD(std::vector<OptimizerParameter> params, double lr, double momentum = 0.9, double weight_decay = 0.0,
      bool decay_matrices_only = false);
  SGD(const std::vector<Tensor>& params, double lr, double momentum = 0.9, double weight_decay = 0.0,
      bool decay_matrices_only = false)
      : SGD(optimizer_parameters(params), lr, momentum, weight_decay, decay_matrices_only) {}
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
/// With decay_matrices_only, weight_decay is 0 for gains and biases (nanoGPT's no-decay group).
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<OptimizerParameter> params, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01, bool decay_matrices_only = false);
  AdamW(const std::vector<Tensor>& params, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01, bool decay_matrices_only = false)
      : AdamW(optimizer_parameters(params), lr, beta1, beta2, eps, weight_decay, decay_matrices_only) {}
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
/// --arms, their flags, config.json and checkpoints take the names and settings from the entries. Register one
/// from its own file: static const xgrad::Registration<xgrad::nn::OptimizerEntry> registration{make_entry()};
struct OptimizerEntry {
  static constexpr const char* kind = "optimizer";
  std::string name;               ///< what --optimizer and --arms take
  std::string description;        ///< one line with its source
  int order = 0;                  ///< place in listings
  std::vector<Setting> settings;  ///< its own settings (momentum, weight_decay, ...), besides lr
  /// muP's learning rates it takes (--parametrization mup sets them with set_lr_multipliers); none refuses muP.
  MupLearningRates mup_lr = MupLearningRates::none;
  /// Builds the optimizer over `params` (each with its name and role, named_parameters() order) at learning rate
  /// `lr` (> 0, finite) with `settings` (every declared key). Its step() moves parameter i at lr_of(i), so that
  /// muP's factors reach it, and decays it by weight_decay_of(i, ...), so that weight_decay_params does.
  std::function<std::unique_ptr<Optimizer>(std::vector<OptimizerParameter> params, double lr,
                                           const SettingValues& settings)>
      build;
};
using OptimizerRegistry = Registry<OptimizerEntry>;

/// Builds the optimizer `name` over `params` with `given` settings over the entry's defaults. Throws RegistryError
/// for an unknown name (listing the registered ones) and Error for a bad lr or an entry whose build returns null.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<OptimizerParameter> params, double lr,
                                          const SettingValues& given = SettingValues());
/// The same over parameters named by position, with the roles of their shapes (optimizer_parameters).
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const std::vector<Tensor>& params, double lr,
                                          const SettingValues& given = SettingValues());

/// weight_decay (>= 0; decoupled for AdamW): one declaration for every optimizer that decays weights.
Setting weight_decay_setting();
/// weight_decay_params, "all" or "matrices" (the roles that is_matrix: hidden matrices, embeddings, the readout,
/// not gains and biases): one declaration for every optimizer that takes it.
Setting weight_decay_params_setting();
/// momentum in [0, kMaxDecay] with the entry's `default_value` (sgd 0.9, muon 0.95): one declaration for every
/// optimizer with a momentum buffer.
Setting momentum_setting(double default_value);
/// beta1, beta2 (in [0, kMaxDecay]) and eps (a normal float): the moments of AdamW, and of muon's AdamW group.
std::vector<Setting> adam_settings();
/// Whether resolved `settings` that declare weight_decay_params select matrices only (Optimizer's
/// decay_matrices_only).
bool decays_matrices_only(const SettingValues& settings);

/// grad_norm of each of `params`, in their order: each norm computed on one thread (the same bits on any thread count),
/// the threads on different parameters.
std::vector<double> grad_norms(const std::vector<Tensor>& params);
/// Global L2 norm of all gradients. If it exceeds max_norm, scales every gradient by max_norm / norm.
/// Returns the norm before clipping (as torch.nn.utils.clip_grad_norm_). max_norm <= 0 or infinite: no clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
/// clip_grad_norm's scaling alone, given the gradients' global L2 norm `total_norm` already computed (a trainer that
/// logs each parameter's norm): scales every gradient by max_norm / (total_norm + 1e-6) when total_norm > max_norm
/// (as torch.nn.utils.clip_grads_with_norm_). max_norm <= 0 or infinite: no clipping.
void clip_grads_with_norm(const std::vector<Tensor>& params, double max_norm, double total_norm);

/// L2 norm of one tensor's gradient (0 when it has none), accumulated in double.
double grad_norm(const Tensor& param);

}  // namespace xgrad::nn
