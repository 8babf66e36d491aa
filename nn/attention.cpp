#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "autograd/blas.h"
#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/small_gemm.h"
#include "autograd/kernels/softmax.h"
#include "autograd/kernels/vector_math.h"
#include "nn/attention_stats.h"

namespace xgrad::nn {

namespace {

// MultiHeadAttention's input: [B, T, d_model].
void check_input(const Tensor& x, std::size_t d_model) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("MultiHeadAttention: input must be [B, T, " + std::to_string(d_model) + "], got " +
                shape_str(x.shape()));
}

// Without W_o the concatenated heads [.., n_heads * d_k] are added to the residual stream [.., d_model].
void check_without_out_proj(std::size_t d_model, std::size_t n_heads, std::size_t d_k) {
  if (n_heads * d_k != d_model)
    throw std::invalid_argument(
        "--attn-out-proj false: the heads' concatenation is the attention output, so --n-heads x "
        "--d-k must equal --d-model; got " +
        std::to_string(n_heads) + " x " + std::to_string(d_k) + " = " + std::to_string(n_heads * d_k) +
        " and --d-model " + std::to_string(d_model));
}

// scaled_dot_product_attention's body: scores = f(scale · r_i · q k^T + bias) with r, f and a bias from `scaling`
// when given, or the given `bias` (null for none); `attn_dropout` (float only) acts on the weights before @ v.
template <class T>
basic_tensor<T> composed_attention(const basic_tensor<T>& q, const basic_tensor<T>& k, const basic_tensor<T>& v,
                                   const xt::xarray<bool>* mask, double scale, const AttentionScaling* scaling,
                                   const basic_tensor<T>* bias, AttentionRecord* record,
                                   const Dropout* attn_dropout = nullptr) {
  basic_tensor<T> scores = matmul(q, transpose(k, -2, -1));
  if (scale != 1.0) scores = scores * scale;
  if (scaling) {
    const std::size_t n = q.size(-2);
    const std::vector<float> rows = scaling->row_multipliers(n);
    if (!rows.empty()) {
      if (rows.size() != n)
        throw Error("attention: the scaling gave " + std::to_string(rows.size()) + " row multipliers for " +
                    std::to_string(n) + " queries");
      xt::xarray<T> r = xt::xarray<T>::from_shape({n, 1});
      std::copy(rows.begin(), rows.end(), r.data());
      scores = scores * basic_tensor<T>(std::move(r));
    }
    if (scaling->adds_score_bias()) scores = scores + basic_tensor<T>(xt::xarray<T>(scaling->score_bias(n)));
  }
  if (bias) scores = scores + *bias;
  if (scaling && scaling->transforms_scores()) scores = scaling->transform_scores(scores);
  if (mask) scores = masked_fill(scores, *mask, -INFINITY);
  basic_tensor<T> probs = softmax(scores);
  if constexpr (std::is_same_v<T, float>) {
    if (record) {
      if (scores.requires_grad()) scores.retain_grad();
      record->scores = scores;
      record->probs = probs.value();
    }
    if (attn_dropout) return matmul(attn_dropout->forward(probs), v);
  }
  return matmul(probs, v);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, AttentionRecord* record) {
  return composed_attention<float>(q, k, v, mask, scale, nullptr, nullptr, record);
}

template <class T>
basic_tensor<T> scaled_dot_product_attention(const basic_tensor<T>& q, const basic_tensor<T>& k,
                                             const basic_tensor<T>& v, const xt::xarray<bool>* mask, double scale,
                                             const basic_tensor<T>& bias, AttentionRecord* record) {
  return composed_attention<T>(q, k, v, mask, scale, nullptr, &bias, record);
}

template Tensor scaled_dot_product_attention<float>(const Tensor&, const Tensor&, const Tensor&,
                                                    const xt::xarray<bool>*, double, const Tensor&, AttentionRecord*);
template DTensor scaled_dot_product_attention<double>(const DTensor&, const DTensor&, const DTensor&,
                                                      const xt::xarray<bool>*, double, const DTensor&,
                                                      AttentionRecord*);

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    const AttentionScaling& scaling, AttentionRecord* record) {
  return composed_attention<float>(q, k, v, mask, scaling.multiplier(), &scaling, nullptr, record);
}

template <class T>
basic_tensor<T> multi_head_attention_reference(const basic_tensor<T>& x, const basic_tensor<T>& w_q,
                                               const basic_tensor<T>& w_k, const basic_tensor<T>& w_v,
                                               const basic_tensor<T>& w_o, const AttentionScaling& scaling,
                                               const std::vector<basic_tensor<T>>& params, std::size_t n_heads,
                                               bool causal) {
  if (x.dim() != 3) throw Error("attention: x must be [B, T, d_model], got " + shape_str(x.shape()));
  const auto B = static_cast<std::int64_t>(x.size(0)), n = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), D = static_cast<std::int64_t>(w_q.size(1) / n_heads);
  basic_tensor<T> wq = w_q, wk = w_k;
  if (scaling.transforms_weights()) std::tie(wq, wk) = scaling.transform_weights(w_q, w_k, params);
  basic_tensor<T> q = reshape(matmul(x, wq), {B, n, H, D}), k = reshape(matmul(x, wk), {B, n, H, D});
  const basic_tensor<T> v = reshape(matmul(x, w_v), {B, n, H, D});
  if (scaling.transforms_qk()) std::tie(q, k) = scaling.transform_qk(q, k, params);
  const xt::xarray<bool> mask = causal_mask(static_cast<std::size_t>(n));
  basic_tensor<T> out =
      composed_attention<T>(transpose(q, 1, 2), transpose(k, 1, 2), transpose(v, 1, 2), causal ? &mask : nullptr,
                            scaling.multiplier(), &scaling, nullptr, nullptr);
  basic_tensor<T> heads = reshape(transpose(out, 1, 2), {B, n, H * D});
  return w_o.defined() ? matmul(heads, w_o) : heads;
}

template Tensor multi_head_attention_reference<float>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                      const Tensor&, const AttentionScaling&,
                                                      const std::vector<Tensor>&, std::size_t, bool);
template DTensor multi_head_attention_reference<double>(const DTensor&, const DTensor&, const DTensor&, const DTensor&,
                                                        const DTensor&, const AttentionScaling&,
                                                        const std::vector<DTensor>&, std::size_t, bool);

namespace {

// The scaling's per-score hooks for one fused attention call (nn/scaling.h), fixed before the (b, h) loop.
struct ScoreHooks {
  bool causal = false;
  std::vector<std::size_t> pos;  // sequence position of query row i
  std::vector<float> rows;       // r_i by sequence position; empty for r_i = 1
  xt::xarray<float> bias;        // [H, T, T]; shape [0] for none
  // Kept for backward only when f is not the identity: its derivative is taken at Z.
  std::shared_ptr<const AttentionScaling> transform;
  bool elementwise() const { return !rows.empty() || bias.size() > 0 || transform; }
  std::size_t keys(std::size_t i, std::size_t T) const { return causal ? pos[i] + 1 : T; }  // what the mask leaves
};

ScoreHooks score_hooks(const std::shared_ptr<const AttentionScaling>& scaling, std::size_t H, std::size_t T,
                       bool causal, const std::vector<std::size_t>* query_positions) {
  ScoreHooks hooks;
  hooks.causal = causal;
  const std::size_t Tq = query_positions ? query_positions->size() : T;
  hooks.pos.resize(Tq);
  for (std::size_t i = 0; i < Tq; ++i) hooks.pos[i] = query_positions ? (*query_positions)[i] : i;
  hooks.rows = scaling->row_multipliers(T);
  if (!hooks.rows.empty() && hooks.rows.size() != T)
    throw Error("attention: the scaling gave " + std::to_string(hooks.rows.size()) + " row multipliers for " +
                std::to_string(T) + " queries");
  hooks.bias = scaling->adds_score_bias() ? scaling->score_bias(T) : xt::xarray<float>::from_shape({0});
  const shape_t bias_shape(hooks.bias.shape().begin(), hooks.bias.shape().end());
  if (scaling->adds_score_bias() && bias_shape != shape_t{H, T, T})
    throw Error("attention: the scaling's score bias must be [n_heads, T, T] = " + shape_str(shape_t{H, T, T}) +
                ", got " + shape_str(bias_shape));
  if (scaling->transforms_scores()) hooks.transform = scaling;
  return hooks;
}

// Z = c Q K^T of head h (rows of T) → S in place: Z_ij *= r_i, Z_ij += b_hij, keep Z in `pre_transform` (when f is
// not the identity), S = f(Z) on the entries the mask leaves, then -inf where masked.
void scores_forward(const ScoreHooks& hooks, std::size_t h, float* P, float* pre_transform, std::size_t Tq,
                    std::size_t T) {
  if (hooks.elementwise())
    for (std::size_t i = 0; i < Tq; ++i) {
      float* row = P + i * T;
      const std::size_t keys = hooks.keys(i, T);
      if (!hooks.rows.empty())
        for (std::size_t j = 0; j < keys; ++j) row[j] *= hooks.rows[hooks.pos[i]];
      if (hooks.bias.size() > 0) {
        const float* b = hooks.bias.data() + (h * T + hooks.pos[i]) * T;
        for (std::size_t j = 0; j < keys; ++j) row[j] += b[j];
      }
      if (hooks.transform) {
        std::copy(row, row + T, pre_transform + i * T);
        hooks.transform->transform_scores(row, row, keys);
      }
    }
  if (hooks.causal)
    for (std::size_t i = 0; i < Tq; ++i) std::fill(P + i * T + hooks.pos[i] + 1, P + (i + 1) * T, -INFINITY);
}

// dS → dZ in place (masked entries have dS = 0 and stay 0): dZ = f'(Z) dS, then dZ_ij *= r_i (the bias is a
// constant, so it passes dS through).
void scores_backward(const ScoreHooks& hooks, float* dS, const float* pre_transform, std::size_t Tq, std::size_t T) {
  if (!hooks.rows.empty() || hooks.transform)
    for (std::size_t i = 0; i < Tq; ++i) {
      float* d = dS + i * T;
      const std::size_t keys = hooks.keys(i, T);
      if (hooks.transform) hooks.transform->transform_scores_backward(pre_transform + i * T, d, keys);
      if (!hooks.rows.empty())
        for (std::size_t j = 0; j < keys; ++j) d[j] *= hooks.rows[hooks.pos[i]];
    }
}

// dS = P * (dP - rowsum(dP * P)), row by row, in place on dP (masked entries have P = 0).
void softmax_backward(float* dP, const float* P, std::size_t Tq, std::size_t T) {
  for (std::size_t i = 0; i < Tq; ++i) {
    float* d = dP + i * T;
    const float* p = P + i * T;
    const float dot = simd::dot(d, p, T);
    for (std::size_t j = 0; j < T; ++j) d[j] = p[j] * (d[j] - dot);
  }
}

// The sizes of one fused attention call: B batch elements, H heads of D, T keys, Tq queries; HD = H D, the row
// stride of the output. q, k and v are three tensors of row stride HD, or one packed [B, T, 3 HD] (q, k, v side by
// side in each row: `stride` 3 HD, k at column HD, v at 2 HD).
struct HeadLayout {
  std::size_t B, T, Tq, HD, H, D;
  std::size_t stride = 0;  // the row stride of q, k and v
  bool packed = false;
  std::size_t kv_block(std::size_t b, std::size_t h) const { return b * T * stride + h * D; }  // [T, d_k] in k, v
  std::size_t q_block(std::size_t b, std::size_t h) const { return b * Tq * stride + h * D; }  // [Tq, d_k] in q
  std::size_t out_block(std::size_t b, std::size_t h) const { return b * Tq * HD + h * D; }    // [Tq, d_k] in out
};

// n rows of heads at `data` with row stride `stride` ([B, n, H * d_k] within them) → [B, H, n, d_k], for the
// statistics.
xt::xarray<float> heads_first(const float* data, std::size_t n, std::size_t stride, const HeadLayout& l) {
  xt::xarray<float> r = xt::xarray<float>::from_shape({l.B, l.H, n, l.D});
  for (std::size_t b = 0; b < l.B; ++b)
    for (std::size_t h = 0; h < l.H; ++h)
      for (std::size_t t = 0; t < n; ++t) {
        const float* src = data + b * n * stride + t * stride + h * l.D;
        std::copy(src, src + l.D, r.data() + ((b * l.H + h) * n + t) * l.D);
      }
  return r;
}

// The largest of head h's scores over the batch, for each h: step_max[h] = max(step_max[h], pair_max[b * H + h]).
void add_max_logits(const std::vector<float>& pair_max, std::size_t H, std::vector<float>& step_max) {
  for (std::size_t pair = 0; pair < pair_max.size(); ++pair)
    step_max[pair % H] = std::max(step_max[pair % H], pair_max[pair]);
}

// The largest of n scores (masked ones are -inf); -inf for none.
float largest(const float* scores, std::size_t n) { return n ? *std::max_element(scores, scores + n) : -INFINITY; }

// The products of one (b, h) pair. Heads up to kSmallHead wide over at most kSmallKeys keys go to
// simd::small_gemm where it pays (simd::small_gemm_pays): at nanoGPT's 64 x 64 x 32 BLAS spends much of each call
// packing and dispatching, and the kernel skips the terms a causal mask zeroes (`skip`, at the queries' positions),
// about half of them. Larger heads go to BLAS. Either way the GEMM tally counts the whole product, so the bench's
// floor is what sgemm would need for it.
constexpr std::size_t kSmallHead = 128, kSmallKeys = 512;
class HeadProducts {
 public:
  HeadProducts(const HeadLayout& l, const ScoreHooks& hooks)
      : small_(l.D <= kSmallHead && l.T <= kSmallKeys && simd::small_gemm_pays(hooks.causal)),
        causal_(hooks.causal),
        pos_(hooks.pos.data()) {
    if (small_) pack_.resize(std::max(l.D * simd::small_gemm_pack_width(l.T), l.T * simd::small_gemm_pack_width(l.D)));
  }
  // C = alpha op(A) op(B) + beta C (blas::gemm's arguments), skipping what `skip` says is zero when causal.
  void operator()(simd::Skip skip, bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                  const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
                  std::size_t ldc) {
    if (!small_) return blas::gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    blas::count_product(ta, tb, m, n, k);
    simd::small_gemm(
        {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, causal_ ? skip : simd::Skip::none, pos_, pack_.data()});
  }

 private:
  bool small_, causal_;
  const std::size_t* pos_;
  std::vector<float> pack_;
};

// What backward keeps of a fused attention call.
struct AttentionSaved {
  HeadLayout l;
  float alpha;
  ScoreHooks hooks;
  xt::xarray<float> probs, pre_transform;
  std::shared_ptr<Node<float>> score_node;  // the recorded scores, when recording
};

// Where attention_backward writes dQ, dK, dV (null: not needed) and the beta of each: each head block of a gradient
// is written by one (b, h) only, so a fresh gradient is overwritten (beta 0) and an earlier one added to (beta 1).
// The slots are taken in the order the backward's GEMMs write them (dV, dQ, dK), so that when two of q, k, v are
// one tensor the first GEMM to write it overwrites and the second adds. A packed qkv's three column blocks are
// disjoint parts of one gradient, fresh or not together.
struct GradTargets {
  float *dQ = nullptr, *dK = nullptr, *dV = nullptr;
  float beta[3] = {1, 1, 1};
};
GradTargets grad_targets(Node<float>& self, const HeadLayout& l) {
  GradTargets g;
  bool fresh = false;
  if (l.packed) {
    if (!needs_grad(self, 0)) return g;
    g.dQ = grad_slot(*self.inputs[0], fresh).data();
    g.dK = g.dQ + l.HD;
    g.dV = g.dQ + 2 * l.HD;
    std::fill(g.beta, g.beta + 3, fresh ? 0.0f : 1.0f);
    return g;
  }
  float** targets[3] = {&g.dQ, &g.dK, &g.dV};
  for (std::size_t i : {2, 0, 1})
    if (needs_grad(self, i)) {
      *targets[i] = grad_slot(*self.inputs[i], fresh).data();
      g.beta[i] = fresh ? 0.0f : 1.0f;
    }
  return g;
}

// Per head (Vaswani et al. 2017's attention differentiated by hand): dP = dO V^T, dS = P * (dP - rowsum(dP * P)),
// dZ = f'(Z) * dS, dZ_ij *= r_i, dQ = c dZ K, dK = c dZ^T Q, dV = P^T dO.
void attention_backward(Node<float>& self, const AttentionSaved& s) {
  const HeadLayout& l = s.l;
  const float* Q = self.inputs[0]->value.data();
  const float* K = l.packed ? Q + l.HD : self.inputs[1]->value.data();
  const float* V = l.packed ? Q + 2 * l.HD : self.inputs[2]->value.data();
  const float* dO = self.grad.data();
  const GradTargets g = grad_targets(self, l);
  const bool need_q = g.dQ, need_k = g.dK, need_v = g.dV;
  float *dQ = g.dQ, *dK = g.dK, *dV = g.dV;
  const float beta_q = g.beta[0], beta_k = g.beta[1], beta_v = g.beta[2];
  xt::xarray<float> score_grad;
  if (s.score_node) score_grad = xt::xarray<float>::from_shape(s.score_node->value.shape());
  // When two of q, k, v are one tensor, their gradients are the same array, but a pair still writes only its own
  // head blocks of it, both times from the same thread in the same order.
  const std::size_t Tq = l.Tq, T = l.T, D = l.D, HD = l.HD, S = l.stride;
  const std::size_t pair_work = Tq * T * D / 2 + 4 * Tq * T;
  parallel_for(0, l.B * l.H, grain_for(pair_work), [&](std::size_t lo, std::size_t hi) {
    std::vector<float> dS(Tq * T);
    HeadProducts gemm(l, s.hooks);
    using simd::Skip;
    for (std::size_t pair = lo; pair < hi; ++pair) {
      const std::size_t b = pair / l.H, h = pair % l.H;
      const std::size_t head = l.kv_block(b, h), q_head = l.q_block(b, h), o_head = l.out_block(b, h);
      const float* P = s.probs.data() + pair * Tq * T;
      if (need_v) gemm(Skip::a_t_past_pos, true, false, T, D, Tq, 1.0f, P, T, dO + o_head, HD, beta_v, dV + head, S);
      if (!need_q && !need_k && !s.score_node) continue;
      // dP past each query's position is written as 0: softmax_backward multiplies it by P = 0 there.
      gemm(Skip::c_past_pos, false, true, Tq, T, D, 1.0f, dO + o_head, HD, V + head, S, 0.0f, dS.data(), T);
      softmax_backward(dS.data(), P, Tq, T);
      if (s.score_node) std::copy(dS.begin(), dS.end(), score_grad.data() + pair * Tq * T);
      scores_backward(s.hooks, dS.data(), s.hooks.transform ? s.pre_transform.data() + pair * Tq * T : nullptr, Tq, T);
      // dZ is 0 past each query's position (P = 0 there, and the hooks leave masked entries alone).
      if (need_q)
        gemm(Skip::a_past_pos, false, false, Tq, D, T, s.alpha, dS.data(), T, K + head, S, beta_q, dQ + q_head, S);
      if (need_k)
        gemm(Skip::a_t_past_pos, true, false, T, D, Tq, s.alpha, dS.data(), T, Q + q_head, S, beta_k, dK + head, S);
    }
  });
  if (s.score_node) accumulate_grad(*s.score_node, std::move(score_grad), "attention");
}

// Multi-head attention on heads laid out as the projections produce them: q, k, v are [B, T, H * d_k] with head h
// in columns [h d_k, (h + 1) d_k), or one packed [B, T, 3 H * d_k] (HeadLayout). For each batch element b and head h,
// with Q, K, V the [T, d_k] head blocks and c, r, b, f the scaling's multiplier, row multipliers, score bias and score
// transform (nn/scaling.h):
//   Z = c Q K^T, Z_ij *= r_i, Z_ij += b_hij;  S = f(Z);  causal: S_ij = -inf for j > i;  P = softmax(S) (rows);
//   O = P V.
// Returns O as [B, T, H * d_k], ready for the output projection. The same function as permute →
// scaled_dot_product_attention → permute back, fused: every GEMM reads and writes the head blocks in place through
// the row strides (H * d_k, or 3 H * d_k packed; no [B, H, T, d_k] copies), c rides on the GEMM's alpha, and the row
// multipliers, the bias, f, the mask and the softmax are applied to S in place, so only P (and Z when f is not the
// identity) is stored for backward (attention_backward). A scaling without r, b and f (a constant multiplier only) runs
// exactly the GEMMs and softmax and nothing else. With `record`, the scores S (softmax input), P, and q, k as [B, H, T,
// d_k] are kept there, and backward stores dS as the scores' gradient (what retain_grad gives on the unfused path). The
// (b, h) pairs run in parallel (autograd/kernels/parallel.h): each writes only its own blocks, so results do not depend
// on the thread count.
//
// With `query_positions` (sorted, distinct, each < T) only those queries are computed: q is [B, Tq, H * d_k] with
// row i the query at sequence position query_positions[i], k and v stay [B, T, H * d_k], and the result is
// [B, Tq, H * d_k], equal to rows query_positions of the full result (the mask, r_i and b taken at each row's
// position); a `record` then holds those rows only ([B, H, Tq, T]) and their positions.
//
// `inputs` are {q, k, v}, or {qkv} when `layout` is packed.
Tensor fused_attention(const std::vector<Tensor>& inputs, const HeadLayout& layout, bool causal,
                       const std::shared_ptr<const AttentionScaling>& scaling, AttentionRecord* record,
                       const std::vector<std::size_t>* query_positions, std::vector<float>* step_max) {
  AttentionSaved s;
  const HeadLayout& l = s.l = layout;
  const std::size_t Tq = l.Tq, T = l.T, D = l.D, HD = l.HD, S = l.stride;
  s.alpha = static_cast<float>(scaling->multiplier());
  s.hooks = score_hooks(scaling, l.H, T, causal, query_positions);
  s.probs = xt::xarray<float>::from_shape({l.B, l.H, Tq, T});
  xt::xarray<float> out = xt::xarray<float>::from_shape({l.B, Tq, HD});
  xt::xarray<float> scores;
  if (record) scores = xt::xarray<float>::from_shape({l.B, l.H, Tq, T});
  if (s.hooks.transform) s.pre_transform = xt::xarray<float>::from_shape({l.B, l.H, Tq, T});
  std::vector<float> pair_max(step_max ? l.B * l.H : 0);
  const float* Q = inputs[0].value().data();
  const float* K = l.packed ? Q + HD : inputs[1].value().data();
  const float* V = l.packed ? Q + 2 * HD : inputs[2].value().data();
  // Work of one (b, h) pair in element-operations: a GEMM flop counts as a sixteenth of one (BLAS runs them at
  // several per cycle), the softmax about 4 per score.
  const std::size_t pair_work = Tq * T * D / 4 + 4 * Tq * T;
  parallel_for(0, l.B * l.H, grain_for(pair_work), [&](std::size_t lo, std::size_t hi) {
    HeadProducts gemm(l, s.hooks);
    for (std::size_t pair = lo; pair < hi; ++pair) {
      const std::size_t b = pair / l.H, h = pair % l.H, head = l.kv_block(b, h), q_head = l.q_block(b, h);
      float* P = s.probs.data() + pair * Tq * T;
      gemm(simd::Skip::c_past_pos, false, true, Tq, T, D, s.alpha, Q + q_head, S, K + head, S, 0.0f, P, T);
      scores_forward(s.hooks, pair % l.H, P, s.hooks.transform ? s.pre_transform.data() + pair * Tq * T : nullptr, Tq,
                     T);
      if (record) std::copy(P, P + Tq * T, scores.data() + pair * Tq * T);
      if (step_max) pair_max[pair] = largest(P, Tq * T);
      for (std::size_t i = 0; i < Tq; ++i) simd::softmax_row(P + i * T, P + i * T, T);
      gemm(simd::Skip::a_past_pos, false, false, Tq, D, T, 1.0f, P, T, V + head, S, 0.0f,
           out.data() + l.out_block(b, h), HD);
    }
  });
  if (step_max) add_max_logits(pair_max, l.H, *step_max);
  if (record) {
    record->query_positions = query_positions ? *query_positions : std::vector<std::size_t>();
    record->q = heads_first(Q, Tq, S, l);
    record->k = heads_first(K, T, S, l);
    record->probs = s.probs;
    record->scores = Tensor(std::move(scores));
    s.score_node = record->scores.node();
  }
  return make_result<float>("attention", std::move(out), inputs,
                            [s = std::move(s)](Node<float>& self) { attention_backward(self, s); });
}

Tensor attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t n_heads, bool causal,
                       const std::shared_ptr<const AttentionScaling>& scaling, AttentionRecord* record,
                       const std::vector<std::size_t>* query_positions = nullptr,
                       std::vector<float>* step_max = nullptr) {
  HeadLayout l{k.size(0), k.size(1), query_positions ? query_positions->size() : k.size(1),
               k.size(2), n_heads,   k.size(2) / n_heads};
  l.stride = l.HD;
  return fused_attention({q, k, v}, l, causal, scaling, record, query_positions, step_max);
}

// attention_heads of every query on q, k, v packed side by side in the rows of one [B, T, 3 H d_k] (x @ [W_q | W_k |
// W_v]): the heads are read in place through the row stride 3 H d_k and the gradient is one [B, T, 3 H d_k].
Tensor attention_heads_packed(const Tensor& qkv, std::size_t n_heads, bool causal,
                              const std::shared_ptr<const AttentionScaling>& scaling, AttentionRecord* record,
                              std::vector<float>* step_max) {
  const std::size_t HD = qkv.size(2) / 3;
  HeadLayout l{qkv.size(0), qkv.size(1), qkv.size(1), HD, n_heads, HD / n_heads};
  l.stride = 3 * HD;
  l.packed = true;
  return fused_attention({qkv}, l, causal, scaling, record, nullptr, step_max);
}

// attention_heads (every query) from autograd ops, with `attn_dropout` on the weights between the softmax and @ v,
// which the fused kernel has no place for: q, k, v [B, T, H * d_k] → [B, T, H * d_k]. A `record` gets what
// attention_heads records: the scores with their gradient, the weights before the dropout, q and k; `step_max` what
// it gets there, over the queries at positions `max_rows` (sorted) when given, else over every query.
Tensor attention_heads_with_dropout(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t n_heads, bool causal,
                                    const AttentionScaling& scaling, AttentionRecord* record,
                                    const Dropout& attn_dropout, std::vector<float>* step_max,
                                    const std::vector<std::size_t>* max_rows) {
  AttentionRecord scores_only;  // the scores when only step_max needs them
  if (step_max && !record) record = &scores_only;
  const auto B = static_cast<std::int64_t>(q.size(0)), T = static_cast<std::int64_t>(q.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), D = static_cast<std::int64_t>(q.size(2) / n_heads);
  auto split_heads = [&](const Tensor& t) { return transpose(reshape(t, {B, T, H, D}), 1, 2); };  // [B, H, T, d_k]
  const Tensor q_heads = split_heads(q), k_heads = split_heads(k);
  const xt::xarray<bool> mask = causal_mask(static_cast<std::size_t>(T));
  if (record) *record = AttentionRecord();
  const Tensor out = composed_attention<float>(q_heads, k_heads, split_heads(v), causal ? &mask : nullptr,
                                               scaling.multiplier(), &scaling, nullptr, record, &attn_dropout);
  if (record) {
    record->q = q_heads.value();
    record->k = k_heads.value();
  }
  if (step_max) {
    const xt::xarray<float>& scores = record->scores.value();  // [B, H, T, T]
    std::vector<float> pair_max(static_cast<std::size_t>(B * H), -INFINITY);
    const auto rows = static_cast<std::size_t>(T);
    for (std::size_t pair = 0; pair < pair_max.size(); ++pair)
      for (std::size_t r = 0; r < (max_rows ? max_rows->size() : rows); ++r)
        pair_max[pair] = std::max(
            pair_max[pair], largest(scores.data() + (pair * rows + (max_rows ? (*max_rows)[r] : r)) * rows, rows));
    add_max_logits(pair_max, n_heads, *step_max);
  }
  return reshape(transpose(out, 1, 2), {B, T, H * D});
}

}  // namespace

ScaledAttentionLayer::ScaledAttentionLayer(const AttentionLayerContext& c, const std::string& layer)
    : d_model(c.d_model), d_k(c.d_k), causal(c.causal), init_gain(c.init_gain), heads_(c.n_heads) {
  std::shared_ptr<AttentionScaling> built =
      make_scaling(c.scale, ScalingContext{c.d_model, c.n_heads, c.d_k, c.max_seq_len, c.causal, c.settings});
  if (built->transforms_weights() || built->acts_after_step())
    throw Error(layer + ": scaling '" + c.scale + "' transforms or clips W_q and W_k, which only " + layer +
                " knows the shapes of; choose another --scale");
  scaling = register_inline_module(std::move(built));
}

std::shared_ptr<Linear> ScaledAttentionLayer::add_projection(const std::string& name, std::size_t in, std::size_t out,
                                                             Generator& gen) {
  auto linear = register_module(name, std::make_shared<Linear>(in, out, false, gen));
  if (init_gain != 1.0) linear->weight.mutable_value() *= static_cast<float>(init_gain);
  return linear;
}

Tensor ScaledAttentionLayer::attend(const Tensor& q_in, const Tensor& k_in, const Tensor& v) {
  const shape_t& shape = q_in.shape();
  if (shape.size() != 4 || shape[2] != heads_ || shape[3] != d_k || k_in.shape() != shape || v.shape() != shape)
    throw Error("attention: q, k and v must each be [B, T, n_heads, d_k] = [B, T, " + std::to_string(heads_) + ", " +
                std::to_string(d_k) + "], got " + shape_str(q_in.shape()) + ", " + shape_str(k_in.shape()) + ", " +
                shape_str(v.shape()));
  Tensor q = q_in, k = k_in;
  if (scaling->transforms_qk()) std::tie(q, k) = scaling->transform_qk(q, k, scaling->parameters());
  const std::int64_t B = static_cast<std::int64_t>(shape[0]), T = static_cast<std::int64_t>(shape[1]);
  const std::int64_t HD = static_cast<std::int64_t>(heads_ * d_k);
  AttentionRecord* record = record_attention ? &last : nullptr;
  if (attn_dropout->active())
    return attention_heads_with_dropout(reshape(q, {B, T, HD}), reshape(k, {B, T, HD}), reshape(v, {B, T, HD}), heads_,
                                        causal, *scaling, record, *attn_dropout, nullptr, nullptr);
  return attention_heads(reshape(q, {B, T, HD}), reshape(k, {B, T, HD}), reshape(v, {B, T, HD}), heads_, causal,
                         scaling, record);
}

xt::xarray<bool> causal_mask(std::size_t T) {
  xt::xarray<bool> m = xt::xarray<bool>::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j > i;
  return m;
}

MultiHeadAttention::MultiHeadAttention(std::size_t d_model_, std::size_t n_heads_, const std::string& scale_,
                                       bool causal_, Generator& gen, std::size_t max_seq_len, double init_gain,
                                       std::size_t d_k_, const SettingValues& settings, bool out_proj)
    : d_model(d_model_), d_k(d_k_), scale(scale_), causal(causal_), heads_(n_heads_) {
  const std::size_t n_heads = heads_;
  if (d_model == 0 || n_heads == 0 || (d_k == 0 && d_model % n_heads != 0))
    throw Error("MultiHeadAttention: d_model (" + std::to_string(d_model) +
                ") must be a positive multiple of n_heads (" + std::to_string(n_heads) + ") unless d_k is given");
  if (d_k == 0) d_k = d_model / n_heads;
  if (!out_proj) check_without_out_proj(d_model, n_heads, d_k);
  // Built before the projections draw their weights, so an unknown name fails before any work.
  std::shared_ptr<AttentionScaling> built =
      make_scaling(scale, ScalingContext{d_model, n_heads, d_k, max_seq_len, causal, settings});
  const std::size_t inner = n_heads * d_k;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, inner, false, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, inner, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, inner, false, gen));
  if (out_proj) w_o = register_module("w_o", std::make_shared<Linear>(inner, d_model, false, gen));
  if (init_gain != 1.0)
    for (auto* w : {&w_q->weight, &w_k->weight, &w_v->weight, w_o ? &w_o->weight : nullptr})
      if (w) w->mutable_value() *= static_cast<float>(init_gain);
  scaling = register_inline_module(std::move(built));
  scaling->init_weights(w_q->weight, w_k->weight);
  if (scaling->acts_after_step()) step_max_logits.assign(n_heads, -INFINITY);
}

std::vector<float>* MultiHeadAttention::max_logits_to_track() {
  return !step_max_logits.empty() && is_training() && grad_enabled() ? &step_max_logits : nullptr;
}

void MultiHeadAttention::after_optimizer_step(bool updated) {
  if (step_max_logits.empty()) return;
  if (updated) scaling->after_optimizer_step(w_q->weight, w_k->weight, step_max_logits);
  std::fill(step_max_logits.begin(), step_max_logits.end(), -INFINITY);
}

void MultiHeadAttention::project(const Tensor& x, const std::vector<std::size_t>* query_positions, Tensor& q, Tensor& k,
                                 Tensor& v) {
  check_input(x, d_model);
  const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(heads_), D = static_cast<std::int64_t>(d_k);
  if (is_training() && grad_enabled()) scaling->update_state(w_q->weight, w_k->weight);
  const Tensor xq = query_positions ? select_positions(x, *query_positions) : x;
  const auto Tq = static_cast<std::int64_t>(xq.size(1));
  if (scaling->transforms_weights()) {
    const auto weights = scaling->transform_weights(w_q->weight, w_k->weight, scaling->parameters());
    q = matmul(xq, weights.first);
    k = matmul(x, weights.second);
  } else {
    q = w_q->forward(xq);
    k = w_k->forward(x);
  }
  v = w_v->forward(x);
  if (scaling->transforms_qk()) {  // per head: [B, T, H, d_k] views of the same memory
    auto qk = scaling->transform_qk(reshape(q, {B, Tq, H, D}), reshape(k, {B, T, H, D}), scaling->parameters());
    q = reshape(qk.first, {B, Tq, H * D});
    k = reshape(qk.second, {B, T, H * D});
  }
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return attend(x, nullptr); }

Tensor MultiHeadAttention::attend(const Tensor& x, const std::vector<std::size_t>* max_logit_rows) {
  AttentionRecord* record = record_attention ? &last : nullptr;
  Tensor out;
  if (!attn_dropout->active() && !scaling->transforms_weights() && !scaling->transforms_qk()) {
    check_input(x, d_model);
    if (is_training() && grad_enabled()) scaling->update_state(w_q->weight, w_k->weight);
    // q, k and v from one GEMM, x @ [W_q | W_k | W_v]: it reads x once where three products read it thrice, and
    // runs nearer sgemm's peak (bench/README.md, "One projection for q, k and v").
    const Tensor qkv = matmul(x, concat({w_q->weight, w_k->weight, w_v->weight}, 1));
    out = attention_heads_packed(qkv, heads_, causal, scaling, record, max_logits_to_track());
  } else {
    Tensor q, k, v;
    project(x, nullptr, q, k, v);  // q, k, v stay [B, T, H d_k]: attention_heads reads the heads in place
    out = attn_dropout->active()
              ? attention_heads_with_dropout(q, k, v, heads_, causal, *scaling, record, *attn_dropout,
                                             max_logits_to_track(), max_logit_rows)
              : attention_heads(q, k, v, heads_, causal, scaling, record, nullptr, max_logits_to_track());
  }
  if (record_attention && record_spectral_norms) last.qk_spectral_norms = qk_spectral_norms();  // the weights used
  return w_o ? w_o->forward(out) : out;
}

Tensor MultiHeadAttention::forward_at(const Tensor& x, const std::vector<std::size_t>& positions) {
  // Dropout on the weights needs the unfused path, which computes every query: forward() and the rows selected. The
  // step's largest logits count the queries at `positions` only, as the fused path computes them.
  if (x.dim() != 3) return forward(x);  // forward's error
  check_positions(positions, x.size(1));
  if (positions.size() == x.size(1) || attn_dropout->active())
    return select_positions(attend(x, &positions), positions);
  Tensor q, k, v;
  project(x, &positions, q, k, v);
  Tensor out = attention_heads(q, k, v, heads_, causal, scaling, record_attention ? &last : nullptr, &positions,
                               max_logits_to_track());
  if (record_attention && record_spectral_norms) last.qk_spectral_norms = qk_spectral_norms();
  return w_o ? w_o->forward(out) : out;
}

Tensor MultiHeadAttention::forward_step(const Tensor& x, AttentionCache& cache) {
  Tensor q, k, v;
  project(x, nullptr, q, k, v);  // the new positions only: [B, n, H d_k] each
  cache.keys = cache.length == 0 ? k : concat({cache.keys, k}, 1);
  cache.values = cache.length == 0 ? v : concat({cache.values, v}, 1);
  std::vector<std::size_t> positions(x.size(1));
  std::iota(positions.begin(), positions.end(), cache.length);
  cache.length += positions.size();
  Tensor out = attention_heads(q, cache.keys, cache.values, heads_, causal, scaling, record_attention ? &last : nullptr,
                               &positions);
  if (record_attention) last.qk_spectral_norms = qk_spectral_norms();
  return w_o ? w_o->forward(out) : out;
}

Tensor MultiHeadAttention::forward_reference(const Tensor& x) {
  check_input(x, d_model);
  if (is_training() && grad_enabled()) scaling->update_state(w_q->weight, w_k->weight);
  return multi_head_attention_reference(x, w_q->weight, w_k->weight, w_v->weight, w_o ? w_o->weight : Tensor(),
                                        *scaling, scaling->parameters(), heads_, causal);
}

double MultiHeadAttention::effective_multiplier(std::size_t T) const { return scaling->effective_multiplier(T); }

std::vector<double> MultiHeadAttention::qk_spectral_norms() const {
  NoGradGuard no_grad;
  TensorPair<float> w{w_q->weight, w_k->weight};
  if (scaling->transforms_weights()) w = scaling->transform_weights(w_q->weight, w_k->weight, scaling->parameters());
  std::vector<double> out(heads_);
  for (std::size_t h = 0; h < heads_; ++h)
    out[h] = std::abs(scaling->multiplier()) * qk_spectral_norm(w.first.value(), w.second.value(), heads_, h);
  return out;
}

namespace {

AttentionLayerEntry make_entry() {
  AttentionLayerEntry e;
  e.name = "multi_head";
  e.description = "multi-head attention, scores scaled by --scale (Vaswani et al. 2017, sec. 3.2.2)";
  e.order = 0;
  e.settings = {boolean_setting("attn_out_proj", true,
                                "the attention output projection W_o (false: the heads' concatenation is the "
                                "output; needs n_heads * d_k = d_model)")};
  e.check = [](const AttentionLayerContext& c) {
    if (!c.settings.get<bool>("attn_out_proj")) check_without_out_proj(c.d_model, c.n_heads, c.d_k);
  };
  e.build = [](const AttentionLayerContext& c, Generator& gen) {
    return std::make_shared<MultiHeadAttention>(c.d_model, c.n_heads, c.scale, c.causal, gen, c.max_seq_len,
                                                c.init_gain, c.d_k, c.settings, c.settings.get<bool>("attn_out_proj"));
  };
  return e;
}

const Registration<AttentionLayerEntry> attention_registration{make_entry()};

}  // namespace

}  // namespace xgrad::nn
