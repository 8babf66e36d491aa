// multi_query: multi-query attention (Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need",
// sec. 3): n_heads query heads share one key and one value head, so W_k and W_v are [d_model, d_k] instead of
// [d_model, n_heads * d_k]. nn::ScaledAttentionLayer gives it the run's --scale, the fused attention and the
// saturation record; the layer itself is its projections and how it shapes q, k and v.
// The whole extension is this file: the static registration below adds it to --attention.
#include <memory>

#include "autograd/ops.h"
#include "nn/attention.h"

namespace {

using namespace xgrad;

class MultiQueryAttention : public nn::ScaledAttentionLayer {
 public:
  MultiQueryAttention(const nn::AttentionLayerContext& c, Generator& gen) : ScaledAttentionLayer(c, "multi_query") {
    w_q = add_projection("w_q", d_model, n_heads() * d_k, gen);
    w_k = add_projection("w_k", d_model, d_k, gen);
    w_v = add_projection("w_v", d_model, d_k, gen);
    w_o = add_projection("w_o", n_heads() * d_k, d_model, gen);
  }

  /// x: [B, T, d_model] → [B, T, d_model].
  Tensor forward(const Tensor& x) override {
    const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
    const auto H = static_cast<std::int64_t>(n_heads()), D = static_cast<std::int64_t>(d_k);
    Tensor q = reshape(w_q->forward(x), {B, T, H, D});
    // The one key and value head, broadcast to every query head.
    Tensor k = expand(reshape(w_k->forward(x), {B, T, 1, D}), {B, T, H, D});
    Tensor v = expand(reshape(w_v->forward(x), {B, T, 1, D}), {B, T, H, D});
    return w_o->forward(attend(q, k, v));
  }

  std::shared_ptr<nn::Linear> w_q, w_k, w_v, w_o;
};

nn::AttentionLayerEntry multi_query_entry() {
  nn::AttentionLayerEntry e;
  e.name = "multi_query";
  e.description = "n_heads query heads sharing one key and value head (Shazeer 2019, \"Fast Transformer Decoding\")";
  e.order = 1000;
  e.build = [](const nn::AttentionLayerContext& c, Generator& gen) -> std::shared_ptr<nn::AttentionLayer> {
    return std::make_shared<MultiQueryAttention>(c, gen);
  };
  return e;
}

const Registration<nn::AttentionLayerEntry> registration{multi_query_entry()};

}  // namespace
