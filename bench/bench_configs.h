// The benchmarked model sizes and the FLOP count of one training step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/model.h"

namespace xgrad::bench {

/// One benchmarked size: vocabulary 32, one pre-LN block with MLP (d_ff = 4 d_model), learned positions.
struct BenchConfig {
  std::string name;
  std::size_t d_model, n_heads, batch, seq_len;
  std::size_t warmup, steps;  // default step counts: enough for a stable median in a few seconds
  std::size_t d_k = 0;        // head size; 0: d_model / n_heads
  std::size_t vocab = 32;
  /// Where the batch carries targets: "all" positions (a random class each), or "last" only (one per sequence, as
  /// kv_recall; the others -1).
  std::string targets = "all";
  /// true: logits at every position, then cross_entropy skipping the -1 targets (the trainer's path before the
  /// readout ran at target positions only); false: nn::loss_at_targets, as the trainer does.
  bool full_readout = false;
};

/// S, M and L of bench/README.md.
const std::vector<BenchConfig>& bench_configs();
/// Throws std::invalid_argument for an unknown name.
const BenchConfig& bench_config(const std::string& name);

/// Limits of parse_shape: d_model and d_k (those of xgrad --d-model and --d-k), batch * seq_len, vocab, and the bytes
/// of the largest GEMM's A, B and C (sgemm allocates them at once; a typo like 99999999 must not hang or end in
/// bad_alloc).
constexpr double kMaxShapeDModel = 16384, kMaxShapeDk = 8192, kMaxShapeRows = 1 << 20;
constexpr double kMaxShapeVocab = 1 << 24, kMaxShapeGemmBytes = 4.0 * (1 << 30);
/// A size given as "d_model,n_heads,d_k,batch,seq_len,vocab" (d_k 0: d_model / n_heads), named "custom", e.g. the
/// runs of a sweep. Throws std::invalid_argument (message starting "--shape: ") unless it is six whole numbers, all
/// > 0 but d_k, no empty entry, n_heads <= d_model, within the limits above.
BenchConfig parse_shape(const std::string& shape);

/// The nn::ModelConfig of a benchmarked size (scale sqrt_dk, causal).
nn::ModelConfig model_config(const BenchConfig& c);

/// One GEMM as the engine issues it: C[m, n] = op(A)[m, k] @ op(B)[k, n], `count` times.
struct GemmShape {
  bool trans_a, trans_b;
  std::size_t m, n, k, count;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(count);
  }
};

/// Every GEMM of one training step (forward, then both operand gradients of each product in backward) for a
/// model with `mc` on a [batch, seq_len] batch, with the transpose flags autograd/ops_matmul.cpp uses.
///
/// Counted per block: the q, k, v and output projections (2 BT d_model (n_heads d_k) each), q k^T and
/// probs v (2 B H T T d_k each, the full T x T although half of it is masked: both engines compute it), the two
/// MLP products (2 BT d_model d_ff each); once: the readout (2 BT d_model vocab). Backward doubles each product
/// (dA = dC B^T, dB = A^T dC; every operand here requires a gradient), so a step is 3x the forward count.
/// Left out: embedding gather/scatter, LayerNorms, softmax, GELU, residual adds and biases, masking, the
/// cross-entropy and AdamW — all O(elements) work, a few percent of the GEMM FLOPs at these sizes.
///
/// With `needed` the count is of what the loss needs, as the trainer computes it (nn::loss_at_targets): the last
/// block's queries, q k^T, probs v, output projection and MLP at `needed.positions` positions per sequence (its keys
/// and values at all of them), the readout at `needed.readout_rows` rows of the batch, no output projection without
/// W_o. The default {} counts every position.
struct NeededRows {
  std::size_t positions = 0;     ///< sequence positions the last block computes (0: seq_len)
  std::size_t readout_rows = 0;  ///< rows of the batch with a target (0: batch x seq_len)
  bool out_proj = true;          ///< the attention output projection W_o exists
};
std::vector<GemmShape> step_gemms(const nn::ModelConfig& mc, std::size_t batch, std::size_t seq_len,
                                  const NeededRows& needed = {});

/// Sum of flops() over step_gemms.
double step_flops(const nn::ModelConfig& mc, std::size_t batch, std::size_t seq_len, const NeededRows& needed = {});

}  // namespace xgrad::bench
