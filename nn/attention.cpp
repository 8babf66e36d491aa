#include "nn/attention.h"

#include <algorithm>
#include <cmath>

#include "autograd/blas.h"
#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/parallel.h"
#include "autograd/kernels/softmax.h"
#include "autograd/kernels/vector_math.h"

namespace xgrad::nn {

const std::vector<std::string>& scale_mode_names() {
  static const std::vector<std::string> names{"none", "sqrt_dk", "dk", "qk_layernorm", "learned"};
  return names;
}

ScaleMode parse_scale_mode(const std::string& name) {
  if (name == "none") return ScaleMode::none;
  if (name == "sqrt_dk") return ScaleMode::sqrt_dk;
  if (name == "dk") return ScaleMode::dk;
  if (name == "qk_layernorm") return ScaleMode::qk_layernorm;
  if (name == "learned") return ScaleMode::learned;
  throw Error("scale mode '" + name + "' is unknown (allowed: none, sqrt_dk, dk, qk_layernorm, learned)");
}

std::string to_string(ScaleMode mode) {
  switch (mode) {
    case ScaleMode::none: return "none";
    case ScaleMode::sqrt_dk: return "sqrt_dk";
    case ScaleMode::dk: return "dk";
    case ScaleMode::qk_layernorm: return "qk_layernorm";
    case ScaleMode::learned: return "learned";
  }
  return "?";
}

double scale_factor(ScaleMode mode, std::size_t d_k) {
  switch (mode) {
    case ScaleMode::none: return 1.0;
    case ScaleMode::sqrt_dk: return 1.0 / std::sqrt(static_cast<double>(d_k));
    case ScaleMode::dk: return 1.0 / static_cast<double>(d_k);
    case ScaleMode::qk_layernorm: return 1.0 / std::sqrt(static_cast<double>(d_k));
    case ScaleMode::learned: return 1.0;
  }
  return 1.0;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const xt::xarray<bool>* mask,
                                    double scale, AttentionRecord* record) {
  Tensor scores = matmul(q, transpose(k, -2, -1));
  if (scale != 1.0) scores = scores * scale;
  if (mask) scores = masked_fill(scores, *mask, -INFINITY);
  Tensor probs = softmax(scores);
  if (record) {
    if (scores.requires_grad()) scores.retain_grad();
    record->scores = scores;
    record->probs = probs.value();
  }
  return matmul(probs, v);
}

namespace {

// Multi-head attention on heads laid out as the projections produce them: q, k, v are [B, T, H * d_k] with head h
// in columns [h d_k, (h + 1) d_k). For each batch element b and head h, with Q, K, V the [T, d_k] head blocks:
//   S = scale * Q K^T, causal: S_ij = -inf for j > i;  P = softmax(S) (rows);  O = P V.
// Returns O as [B, T, H * d_k], ready for the output projection. The same function as permute →
// scaled_dot_product_attention → permute back, fused: every GEMM reads and writes the head blocks in place through
// the row stride H * d_k (no [B, H, T, d_k] copies), the scale rides on the GEMM's alpha, and the mask and softmax
// are applied to S in place, so only P is stored for backward. Backward, per head (Vaswani et al. 2017's
// attention differentiated by hand): dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = scale dS K,
// dK = scale dS^T Q, dV = P^T dO. With `record`, the scores S (softmax input), P, and q, k as [B, H, T, d_k] are
// kept there, and backward stores dS as the scores' gradient (what retain_grad gives on the unfused path).
// The (b, h) pairs run in parallel (autograd/kernels/parallel.h): each writes only its own blocks, so results do not
// depend on the thread count.
Tensor attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t n_heads, bool causal,
                       double scale, AttentionRecord* record) {
  const std::size_t B = q.size(0), T = q.size(1), HD = q.size(2), H = n_heads, D = HD / H;
  const float alpha = static_cast<float>(scale);
  xt::xarray<float> probs = xt::xarray<float>::from_shape({B, H, T, T});
  xt::xarray<float> out = xt::xarray<float>::from_shape({B, T, HD});
  xt::xarray<float> scores;
  if (record) scores = xt::xarray<float>::from_shape({B, H, T, T});
  const float* Q = q.value().data();
  const float* K = k.value().data();
  const float* V = v.value().data();
  // Work of one (b, h) pair in element-operations: a GEMM flop counts as a sixteenth of one (BLAS runs them at
  // several per cycle), the softmax about 4 per score.
  const std::size_t pair_work = T * T * D / 4 + 4 * T * T;
  parallel_for(0, B * H, grain_for(pair_work), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t pair = lo; pair < hi; ++pair) {
      const std::size_t b = pair / H, h = pair % H;
      const std::size_t head = b * T * HD + h * D;  // offset of the [T, d_k] block, row stride HD
      float* P = probs.data() + pair * T * T;
      blas::gemm<float>(false, true, T, T, D, alpha, Q + head, HD, K + head, HD, 0.0f, P, T);
      if (causal)
        for (std::size_t i = 0; i < T; ++i) std::fill(P + i * T + i + 1, P + (i + 1) * T, -INFINITY);
      if (record) std::copy(P, P + T * T, scores.data() + pair * T * T);
      for (std::size_t i = 0; i < T; ++i) simd::softmax_row(P + i * T, P + i * T, T);
      blas::gemm<float>(false, false, T, D, T, 1.0f, P, T, V + head, HD, 0.0f, out.data() + head, HD);
    }
  });
  std::shared_ptr<Node<float>> score_node;
  if (record) {
    auto heads_first = [&](const Tensor& heads) {  // [B, T, H * d_k] → [B, H, T, d_k], for the statistics
      xt::xarray<float> r = xt::xarray<float>::from_shape({B, H, T, D});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
          for (std::size_t t = 0; t < T; ++t) {
            const float* src = heads.value().data() + b * T * HD + t * HD + h * D;
            std::copy(src, src + D, r.data() + ((b * H + h) * T + t) * D);
          }
      return r;
    };
    record->q = heads_first(q);
    record->k = heads_first(k);
    record->probs = probs;
    record->scores = Tensor(std::move(scores));
    score_node = record->scores.node();
  }
  return make_result<float>(
      "attention", std::move(out), {q, k, v},
      [B, T, HD, H, D, alpha, probs = std::move(probs), score_node](Node<float>& self) {
        const float* Q = self.inputs[0]->value.data();
        const float* K = self.inputs[1]->value.data();
        const float* V = self.inputs[2]->value.data();
        const float* dO = self.grad.data();
        const bool need_q = needs_grad(self, 0), need_k = needs_grad(self, 1), need_v = needs_grad(self, 2);
        // Each head block of a gradient is written by one (b, h) only: overwrite a fresh gradient (beta 0), add to
        // an earlier one (beta 1). When q, k or v are one tensor, the second grad_slot finds it taken: beta 1.
        bool fresh = false;
        float* dQ = need_q ? grad_slot(*self.inputs[0], fresh).data() : nullptr;
        const float beta_q = fresh ? 0.0f : 1.0f;
        float* dK = need_k ? grad_slot(*self.inputs[1], fresh).data() : nullptr;
        const float beta_k = fresh ? 0.0f : 1.0f;
        float* dV = need_v ? grad_slot(*self.inputs[2], fresh).data() : nullptr;
        const float beta_v = fresh ? 0.0f : 1.0f;
        xt::xarray<float> score_grad;
        if (score_node) score_grad = xt::xarray<float>::from_shape(score_node->value.shape());
        // When q and k (or v) are one tensor, dQ and dK are the same array, but a pair still writes only its own
        // head blocks of it, both times from the same thread in the same order.
        const std::size_t pair_work = T * T * D / 2 + 4 * T * T;
        parallel_for(0, B * H, grain_for(pair_work), [&](std::size_t lo, std::size_t hi) {
          std::vector<float> dS(T * T);
          for (std::size_t pair = lo; pair < hi; ++pair) {
            const std::size_t b = pair / H, h = pair % H;
            const std::size_t head = b * T * HD + h * D;
            const float* P = probs.data() + pair * T * T;
            if (need_v) blas::gemm<float>(true, false, T, D, T, 1.0f, P, T, dO + head, HD, beta_v, dV + head, HD);
            if (!need_q && !need_k && !score_node) continue;
            blas::gemm<float>(false, true, T, T, D, 1.0f, dO + head, HD, V + head, HD, 0.0f, dS.data(), T);
            for (std::size_t i = 0; i < T; ++i) {  // softmax backward, row by row (masked entries have P = 0)
              float* d = dS.data() + i * T;
              const float* p = P + i * T;
              const float dot = simd::dot(d, p, T);
              for (std::size_t j = 0; j < T; ++j) d[j] = p[j] * (d[j] - dot);
            }
            if (score_node) std::copy(dS.begin(), dS.end(), score_grad.data() + pair * T * T);
            if (need_q)
              blas::gemm<float>(false, false, T, D, T, alpha, dS.data(), T, K + head, HD, beta_q, dQ + head, HD);
            if (need_k)
              blas::gemm<float>(true, false, T, D, T, alpha, dS.data(), T, Q + head, HD, beta_k, dK + head, HD);
          }
        });
        if (score_node) accumulate_grad(*score_node, std::move(score_grad), "attention");
      });
}

}  // namespace

xt::xarray<bool> causal_mask(std::size_t T) {
  xt::xarray<bool> m = xt::xarray<bool>::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j > i;
  return m;
}

MultiHeadAttention::MultiHeadAttention(std::size_t d_model_, std::size_t n_heads_, ScaleMode scale_, bool causal_,
                                       Generator& gen, std::size_t max_seq_len, double init_gain, std::size_t d_k_)
    : d_model(d_model_), n_heads(n_heads_), d_k(d_k_), scale(scale_), causal(causal_) {
  if (d_model == 0 || n_heads == 0 || (d_k == 0 && d_model % n_heads != 0))
    throw Error("MultiHeadAttention: d_model (" + std::to_string(d_model) + ") must be a positive multiple of n_heads (" +
                std::to_string(n_heads) + ") unless d_k is given");
  if (d_k == 0) d_k = d_model / n_heads;
  const std::size_t inner = n_heads * d_k;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, inner, false, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, inner, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, inner, false, gen));
  w_o = register_module("w_o", std::make_shared<Linear>(inner, d_model, false, gen));
  if (init_gain != 1.0)
    for (auto* w : {&w_q->weight, &w_k->weight, &w_v->weight, &w_o->weight}) w->mutable_value() *= static_cast<float>(init_gain);
  if (scale == ScaleMode::qk_layernorm) {
    q_norm = register_module("q_norm", std::make_shared<LayerNorm>(d_k));
    k_norm = register_module("k_norm", std::make_shared<LayerNorm>(d_k));
  }
  if (scale == ScaleMode::learned) {
    const double T = static_cast<double>(std::max<std::size_t>(max_seq_len, 2));
    qk_gain = register_parameter("qk_gain", full<float>({1}, std::log2(T * T - T)));
  }
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != d_model)
    throw Error("MultiHeadAttention: input must be [B, T, " + std::to_string(d_model) + "], got " +
                shape_str(x.shape()));
  const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
  const auto H = static_cast<std::int64_t>(n_heads), D = static_cast<std::int64_t>(d_k);
  // q, k, v stay [B, T, H d_k] as the projections give them: attention_heads reads the heads in place.
  Tensor q = w_q->forward(x), k = w_k->forward(x), v = w_v->forward(x);
  if (scale == ScaleMode::qk_layernorm || scale == ScaleMode::learned) {
    // Both normalise each head's d_k vector, so they see the heads as [B, T, H, d_k] (the same memory).
    q = reshape(q, {B, T, H, D});
    k = reshape(k, {B, T, H, D});
    if (scale == ScaleMode::qk_layernorm) {
      q = q_norm->forward(q);
      k = k_norm->forward(k);
    } else {
      // q/|q| scaled by the learned temperature g, so (g q̂)·k̂ = g cos(q, k). eps keeps a zero vector finite.
      auto unit = [](const Tensor& t) { return t / sqrt(sum(t * t, {-1}, true) + 1e-12); };
      q = unit(q) * qk_gain;
      k = unit(k);
    }
    q = reshape(q, {B, T, H * D});
    k = reshape(k, {B, T, H * D});
  }
  Tensor out = attention_heads(q, k, v, n_heads, causal, scale_factor(scale, d_k), record_attention ? &last : nullptr);
  return w_o->forward(out);
}

}  // namespace xgrad::nn
