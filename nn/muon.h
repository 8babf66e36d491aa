// Muon: momentum orthogonalised by Newton-Schulz for hidden matrices, AdamW for every other parameter.
#pragma once

#include <memory>
#include <vector>

#include "nn/optim.h"

namespace xgrad::nn {

/// The quintic Newton-Schulz iteration of Muon (K. Jordan 2024, "Muon: an optimizer for hidden layers in neural
/// networks"): X = G / ||G||_F (transposed when rows > cols, so that X X^T is the smaller Gram matrix), then 5 times
/// X = a X + (b A + c A^2) X with A = X X^T and (a, b, c) = (3.4445, -4.7750, 2.0315). matrix [rows, cols] →
/// [rows, cols], in float. It keeps G's singular vectors U, V and maps each singular value s / ||G||_F through the
/// scalar polynomial s → a s + b s^3 + c s^5 five times: the result is U S' V^T, close to the orthogonal polar
/// factor U V^T but not equal to it (S' lies in [0.68, 1.14] for s / ||G||_F >= 0.01, reaches 1.2 below that, and
/// falls towards 0 under about 1e-3: the coefficients trade exactness for speed). A zero matrix gives zeros. Throws
/// Error unless `matrix` is 2-D.
xt::xarray<float> newton_schulz(const xt::xarray<float>& matrix);

/// How Muon scales a hidden matrix's orthogonalised update (PyTorch's torch.optim.Muon adjust_lr_fn).
enum class MuonAdjustLr {
  /// 0.2 sqrt(max(fan_in, fan_out)) (Liu et al. 2025, "Muon is Scalable for LLM Training", arXiv 2502.16982,
  /// "consistent update RMS"): the update's RMS is about 0.2, that of AdamW's update, whatever the matrix's shape.
  match_rms_adamw,
  /// sqrt(max(1, fan_out / fan_in)) (Jordan's original).
  original,
};
/// The names of MuonAdjustLr (config.json's and --adjust-lr-fn's text).
inline constexpr EnumName<MuonAdjustLr> kMuonAdjustLrNames[] = {{MuonAdjustLr::match_rms_adamw, "match_rms_adamw"},
                                                                {MuonAdjustLr::original, "original"}};

/// The factor MuonAdjustLr applies to lr for a weight [fan_in, fan_out] (Linear's layout, x @ W: PyTorch's [out, in]
/// transposed, so Jordan's rows / cols is fan_out / fan_in here).
double muon_lr_factor(MuonAdjustLr adjust, std::size_t fan_in, std::size_t fan_out);

/// Muon in PyTorch's torch.optim.Muon form. Each parameter whose role is hidden_matrix ([fan_in, fan_out]; more
/// dimensions are read as [shape[0], the product of the rest]):
///   buf = momentum buf + (1 - momentum) g;  u = (1 - momentum) g + momentum buf  (Nesterov)
///   p = p (1 - lr weight_decay) - lr muon_lr_factor(adjust, fan_in, fan_out) newton_schulz(u).
/// Every other parameter (Jordan's split: an embedding row is chosen by a one-hot input, not applied to a dense
/// hidden vector; the readout trained better under AdamW in his runs; a vector has no polar factor) is updated by
/// nn::AdamW with beta1, beta2, eps and weight_decay at `adamw_lr`, which follows lr's schedule (adamw_lr · lr() / the
/// constructor's lr) and lr_multipliers(). Weight decay is decoupled for both groups, and decay_matrices_only spares
/// gains and biases as for AdamW. The default adjust is match_rms_adamw (PyTorch's is original): with it a Muon step
/// moves hidden matrices by as much as an AdamW step at the same lr, whatever their shape, so one lr and one weight
/// decay serve both groups, `--arms adamw@LR,muon@LR` compares the optimizers at equal step sizes, and runs that
/// differ in width (d_model, d_k) take steps of one size. Under original a square d x d matrix's update RMS is about
/// lr / sqrt(d): the same step wants 0.2 sqrt(d) times the lr (1.6 at d 64), a factor that changes with width. State:
/// "momentum_buffer" (zeros for the AdamW group), "m" and "v" (zeros for hidden matrices), and AdamW's step count.
/// Throws Error for a momentum or betas outside [0, 1) in float, or a bad eps or lr.
class Muon : public Optimizer {
 public:
  Muon(std::vector<OptimizerParameter> params, double lr, double adamw_lr, double momentum = 0.95,
       MuonAdjustLr adjust = MuonAdjustLr::match_rms_adamw, double weight_decay = 0.0, double beta1 = 0.9,
       double beta2 = 0.999, double eps = 1e-8, bool decay_matrices_only = false);
  void step() override;
  OptimizerState state() const override;
  void load_state(const OptimizerState& state) override;
  std::vector<std::string> state_kinds() const override { return {"momentum_buffer", "m", "v"}; }
  /// Whether parameter i (params() order) takes the Newton-Schulz update (else AdamW's).
  bool orthogonalised(std::size_t i) const { return adamw_index_[i] < 0; }

 private:
  void step_hidden(std::size_t i);

  double base_lr_, adamw_lr_, momentum_, weight_decay_;
  MuonAdjustLr adjust_;
  std::vector<long> adamw_index_;  // per parameter: its place in adamw_'s parameters, -1 for a hidden matrix
  std::vector<xt::xarray<float>> buf_;
  std::unique_ptr<AdamW> adamw_;
};

}  // namespace xgrad::nn
