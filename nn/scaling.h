// Attention score scalings: how q·k becomes the softmax input. Each scaling is one file in nn/scaling/ (or a user's
// own file) that registers a ScalingEntry; nothing else in xgrad lists them. MultiHeadAttention builds one
// AttentionScaling per layer from the entry and calls its hooks; the fused attention op (nn/attention.cpp) applies
// the per-score hooks in place, and scaled_dot_product_attention applies the same hooks with plain autograd ops
// (the reference the fused op is tested against).
//
// For one head with projection weights W_q, W_k: [d_model, d_k] and input x: [T, d_model], the softmax input is
//   W_q', W_k' = transform_weights(W_q, W_k)          (identity unless transforms_weights())
//   q, k       = transform_qk(x W_q', x W_k')         (identity unless transforms_qk(); per head, [B, T, H, d_k])
//   z_ij       = multiplier() * r_i * (q_i · k_j)     (r = row_multipliers(T); r_i = 1 when it is empty)
//              + b_ij                                 (b = score_bias(T) of the head; 0 unless adds_score_bias())
//   s_ij       = f(z_ij)                              (f = the score transform; identity unless transforms_scores())
// then the causal mask (s_ij = -inf for j > i) and softmax over j. After each optimizer step, after_optimizer_step
// (when acts_after_step()) may change W_q and W_k given each head's largest s_ij of the step. A scaling that overrides
// none of the optional hooks (a constant multiplier only) costs nothing beyond the GEMMs and softmax of unscaled
// attention.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/registry.h"
#include "common/setting.h"
#include "nn/module.h"

namespace xgrad::nn {

/// What a scaling is built from: the attention layer it serves.
struct ScalingContext {
  std::size_t d_model = 1;  ///< the layer's input width (W_q: [d_model, n_heads * d_k])
  std::size_t n_heads = 1;
  std::size_t d_k = 1;          ///< head size
  std::size_t max_seq_len = 1;  ///< longest sequence the model takes (T <= max_seq_len in forward)
  bool causal = true;           ///< query i may attend to keys j <= i only
  SettingValues settings;       ///< the entry's own settings, every declared key present
};

/// q and k (or W_q and W_k) as a pair.
template <class T>
using TensorPair = std::pair<basic_tensor<T>, basic_tensor<T>>;

/// One attention layer's score scaling: a Module, so learned scalars (temperatures, gains, norms) are parameters of
/// the layer and checkpoint buffers (power-iteration vectors) are saved with it. Every hook but multiplier() has a
/// default that leaves its input unchanged, and a flag saying whether it is overridden so the attention layer can
/// skip it; a subclass overriding a hook must also override its flag.
///
/// The tensor hooks come in float (training) and double (float64 gradcheck) overloads; a scaling writes its math
/// once as a function template and overrides both with one-line calls. They take the scaling's parameters as
/// `params` (in named_parameters() order) instead of reading its members, so a gradcheck can pass float64 copies:
/// the attention layer passes parameters().
class AttentionScaling : public Module {
 public:
  /// The constant c of z = c · r_i · q·k (1/sqrt(d_k) for the scaling of Vaswani et al. 2017, eq. 1).
  virtual double multiplier() const = 0;

  /// Called once by the attention layer after its projections are initialised, with W_q and W_k as stored
  /// ([d_model, n_heads * d_k]); for scalings whose state starts from the weights (power-iteration vectors).
  virtual void init_weights(const Tensor& w_q, const Tensor& w_k);
  /// Called by the attention layer at the start of each forward pass in training mode with gradients enabled (once
  /// per training step), before transform_weights: advances state that is not a parameter (one power-iteration
  /// step). W_q, W_k as stored.
  virtual void update_state(const Tensor& w_q, const Tensor& w_k);

  virtual bool transforms_weights() const { return false; }
  /// The projection weights a forward pass uses, from the stored W_q, W_k ([d_model, n_heads * d_k] each; returns
  /// the same shapes).
  virtual TensorPair<float> transform_weights(const Tensor& w_q, const Tensor& w_k,
                                              const std::vector<Tensor>& params) const;
  virtual TensorPair<double> transform_weights(const DTensor& w_q, const DTensor& w_k,
                                               const std::vector<DTensor>& params) const;

  virtual bool transforms_qk() const { return false; }
  /// q, k: [B, T, n_heads, d_k] (the projections viewed per head) → the q and k that enter q·k, same shapes.
  virtual TensorPair<float> transform_qk(const Tensor& q, const Tensor& k, const std::vector<Tensor>& params) const;
  virtual TensorPair<double> transform_qk(const DTensor& q, const DTensor& k, const std::vector<DTensor>& params) const;

  /// r_i for query rows i = 0..T-1 of a length-T sequence, or empty for r_i = 1 (the default). Constants: no
  /// gradient flows into them.
  virtual std::vector<float> row_multipliers(std::size_t T) const;

  virtual bool adds_score_bias() const { return false; }
  /// b: [n_heads, T, T] for a length-T sequence, b[h, i, j] added to head h's score of query i and key j after the
  /// multipliers and before f (ALiBi's linear biases: Press et al. 2022, "Train Short, Test Long", sec. 3). A
  /// constant: no gradient flows into it. The attention layer throws Error for another shape. Called once per
  /// forward pass; the default (never called by the layer) returns an array of shape [0].
  virtual xt::xarray<float> score_bias(std::size_t T) const;

  virtual bool transforms_scores() const { return false; }
  /// s = f(z) elementwise, built from autograd ops: the reference form. f has no parameters (the fused op has no
  /// gradient for them). z: any shape → same.
  virtual Tensor transform_scores(const Tensor& z) const;
  virtual DTensor transform_scores(const DTensor& z) const;
  /// s = f(z) on n floats (s may equal z): the fused op's forward. Must equal transform_scores to float rounding.
  virtual void transform_scores(const float* z, float* s, std::size_t n) const;
  /// grad[i] *= f'(z[i]) on n floats: the fused op's backward.
  virtual void transform_scores_backward(const float* z, float* grad, std::size_t n) const;

  virtual bool acts_after_step() const { return false; }
  /// Called once per training step, after the optimizer's update, with the stored W_q and W_k ([d_model,
  /// n_heads * d_k]; head h is columns h*d_k .. (h+1)*d_k - 1), which it may change in place (values, not shapes), and
  /// max_logits: [n_heads], each head's largest logit over the step (AttentionLayer::step_max_logits). Not called
  /// for a step whose gradient was not finite (no update). For clipping the weights by what the step's scores were
  /// (QK-Clip: Kimi Team 2025, "Kimi K2", sec. 2.1). The default does nothing.
  virtual void after_optimizer_step(Tensor& w_q, Tensor& w_k, const std::vector<float>& max_logits);

  /// The factor between q·k of the q and k that enter it (after transform_qk) and the scores before f, for a
  /// length-T sequence: multiplier() times the mean of r_i over the rows (probe's theory line).
  double effective_multiplier(std::size_t T) const;
};

/// A scaling that only multiplies q·k by a constant c (none: 1, sqrt_dk: 1/sqrt(d_k), dk: 1/d_k).
class ConstantScaling : public AttentionScaling {
 public:
  explicit ConstantScaling(double multiplier) : multiplier_(multiplier) {}
  double multiplier() const override { return multiplier_; }

 private:
  double multiplier_;
};

/// A scaling whose transform_qk is one function template of the subclass, written once for float and double:
///   template <class T> TensorPair<T> qk(const basic_tensor<T>& q, const basic_tensor<T>& k,
///                                       const std::vector<basic_tensor<T>>& params) const;
/// (public), with q, k and params as transform_qk takes them. This writes both overrides.
template <class Derived>
class QkTransformScaling : public AttentionScaling {
 public:
  bool transforms_qk() const override { return true; }
  TensorPair<float> transform_qk(const Tensor& q, const Tensor& k, const std::vector<Tensor>& params) const override {
    return static_cast<const Derived&>(*this).qk(q, k, params);
  }
  TensorPair<double> transform_qk(const DTensor& q, const DTensor& k,
                                  const std::vector<DTensor>& params) const override {
    return static_cast<const Derived&>(*this).qk(q, k, params);
  }
};

/// A registered scaling. Register one from its own file:
///   static const xgrad::Registration<xgrad::nn::ScalingEntry> registration{make_entry()};
struct ScalingEntry {
  static constexpr const char* kind = "scaling";
  std::string name;               ///< what users type (--scale NAME); also the config.json value
  std::string description;        ///< one line: the formula and its source (paper, section, equation)
  int order = 0;                  ///< place in listings and in the report (ties: registration order)
  std::vector<Setting> settings;  ///< its own settings; keys prefixed with the name unless a standard term
  /// Builds the scaling of one attention layer. Draws no random numbers (two models built from one seed have the
  /// same weights whatever the scaling).
  std::function<std::shared_ptr<AttentionScaling>(const ScalingContext&)> build;
  /// Plot colour, "#RRGGBB"; empty: registering gives the entry a colour (and, without a dash, a dash) that no
  /// entry registered before it draws, the first free one of a fixed palette apart from the built-ins' colours.
  std::string colour;
  std::string dash;  ///< plot line style: one of scaling_dash_styles(); empty: "solid" beside a colour
  /// Set when registering chose the colour (and the dash): an entry registered later that declares this very style
  /// keeps it, and this one gets the next free one, so which of the two links first does not matter.
  bool colour_chosen = false, dash_chosen = false;
  bool is_reference = false;  ///< the unscaled baseline the report compares the other scalings with
  /// Learned scalars to log: names of parameters the scaling registers ("qk_gain"), whose values metrics.csv holds
  /// after every step, one column per element (train/run_files.h, metrics_columns::scalar).
  std::vector<std::string> scalars;

  /// Called by Registry::add: throws RegistryError naming the entry for a dash that is not one of
  /// scaling_dash_styles() (listing them) or a colour that is not #RRGGBB, completes a style left empty, and gives a
  /// registered entry whose chosen style `entry` declares another one.
  static void on_register(ScalingEntry& entry, const std::vector<ScalingEntry*>& registered);
};

/// How compare draws a scaling's lines: colour "#RRGGBB" and one of scaling_dash_styles() (both empty: chosen when
/// the entry registers; see ScalingEntry::colour).
struct PlotStyle {
  std::string colour;
  std::string dash;
};

/// The entry of scaling `name` (`description`: the formula and its source; `order`: its place in listings) whose
/// layers `build` makes, drawn in `style`, with its own `settings` and the learned `scalars` metrics.csv logs; the
/// other fields keep their defaults.
ScalingEntry scaling_entry(std::string name, std::string description, int order,
                           std::function<std::shared_ptr<AttentionScaling>(const ScalingContext&)> build,
                           PlotStyle style, std::vector<Setting> settings = {}, std::vector<std::string> scalars = {});

/// The line styles a ScalingEntry may name, each drawn with its own dash pattern and point type: solid, dashed,
/// dotted, dashdot, dashdotdot, longdash, longdashdot, dashdashdot.
const std::vector<std::string>& scaling_dash_styles();

/// Builds the registered scaling `name` for a layer of `n_heads` heads of size d_k, filling the entry's settings
/// missing from `given` with their defaults (keys of other components in `given` are ignored). Throws RegistryError
/// listing the registered names for an unknown name, SettingError for a setting of the wrong type, Error for an
/// entry without a build function.
std::shared_ptr<AttentionScaling> make_scaling(const std::string& name, std::size_t n_heads, std::size_t d_k,
                                               std::size_t max_seq_len, bool causal, const SettingValues& given = {});
/// The same for a layer described by `context` (its settings as given; missing ones get their defaults).
std::shared_ptr<AttentionScaling> make_scaling(const std::string& name, ScalingContext context);

/// The registered entry that is the unscaled reference (is_reference), or null if none is.
const ScalingEntry* reference_scaling();

}  // namespace xgrad::nn
