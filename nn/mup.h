// muP, the Maximal Update Parametrization (Yang et al. 2022, "Tensor Programs V", Table 3, in the equivalent form
// of its Table 8 that the authors' mup package implements): how each parameter's init, forward multiplier and
// learning rate change with the width of the model, relative to a base width at which muP and the standard
// parametrization (SP) coincide. With width ratio m = d_model / base_width (and, per matrix, the ratios of its
// fan_in and fan_out to those of the same matrix at the base width):
//
//                 input weights & all biases | output weights (readout)  | hidden weights
//   init var      1/fan_in (as SP)           | 1/base fan_in (SP: 1/fan_in) | 1/fan_in (as SP)
//   multiplier    1                          | 1/m on the readout        | 1
//   Adam lr       1                          | 1                         | 1/m (SP: 1)
//   SGD lr        m (SP: 1)                  | m (SP: 1)                 | 1
//
// plus 1/d_k instead of 1/sqrt(d_k) attention (Definition 4.1; the registered scaling `dk`). Table 3 states the
// same parametrization without a multiplier (output init var 1/fan_in^2, Adam lr 1/fan_in, SGD lr 1/fan_in): by
// the abc-symmetry of section 5 / appendix J, a multiplier 1/m with init var multiplied by m^2 and Adam lr by m (SGD
// lr by m^2) trains the same function, and the multiplier form keeps the stored weights at the scale SP keeps them.
// Which class a parameter is in follows from its shape, as in the mup package: the dimensions that differ between
// the model and the same model at the base width are the width dimensions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nn/model.h"
#include "nn/optim.h"

namespace xgrad::nn {

/// A parameter's class in muP's table, by which of its dimensions grow with width.
enum class MupClass {
  finite,  ///< no width dimension (a scalar temperature, the readout bias over the vocabulary): unchanged
  vector,  ///< input weights and biases: only the output dimension (fan_out) is a width (embeddings, LayerNorm)
  output,  ///< output weights: only the input dimension (fan_in) is a width (the readout, head.weight)
  hidden,  ///< hidden weights: both dimensions are widths (W_q, W_k, W_v, W_o, the MLP)
};

/// "finite", "vector", "output", "hidden".
const char* mup_class_name(MupClass c);

/// One parameter's factors, relative to SP at the same width.
struct MupParameter {
  std::string name;  ///< as named_parameters() names it
  MupClass cls = MupClass::finite;
  double fan_in_ratio = 1;   ///< fan_in / fan_in at the base width (1 for a vector)
  double fan_out_ratio = 1;  ///< fan_out / fan_out at the base width
  double init_std = 1;       ///< multiplies the SP init std
  double adam_lr = 1;        ///< multiplies --lr under AdamW
  double sgd_lr = 1;         ///< multiplies --lr under SGD
};

/// The whole model's muP factors.
struct MupPlan {
  double width_ratio = 1;         ///< d_model / base_width
  double readout_multiplier = 1;  ///< multiplies the readout's input (so its weight's contribution, not its bias)
  std::vector<MupParameter> parameters;  ///< named_parameters() order
  /// The lr factors of muP's column `rule` (adam_lr or sgd_lr), one per parameter. Throws Error for none.
  std::vector<double> lr_multipliers(MupLearningRates rule) const;
  /// The lr factors of the column the registered optimizer `optimizer` declares (OptimizerEntry::mup_lr: adamw the
  /// Adam column, sgd the SGD column). Throws Error naming it for an optimizer that declares none or is not
  /// registered.
  std::vector<double> lr_multipliers(const std::string& optimizer) const;
};

/// The muP factors of a model of `config` (its parametrization ignored) against the same model at d_model =
/// base_width, built to compare shapes. d_k and d_ff scale with d_model (a given d_k or d_ff is d_k · base_width /
/// d_model at the base width), so the heads and the MLP widen with the model and n_heads stays. Throws Error for
/// base_width 0, a d_k or d_ff that does not scale to a whole size, and a parameter other than head.weight whose
/// fan_in alone is a width (its multiplier could not be applied).
MupPlan mup_plan(const ModelConfig& config, std::size_t base_width);

}  // namespace xgrad::nn
