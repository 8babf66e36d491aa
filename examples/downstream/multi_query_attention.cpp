// multi_query: multi-query attention (Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need",
// sec. 3): n_heads query heads share one key and one value head, so W_k and W_v are [d_model, d_k] instead of
// [d_model, n_heads * d_k]. It scales its scores with the run's --scale like the built-in attention, and records
// scores and weights for the saturation statistics the same way.
// The whole extension is this file: the static registration below adds it to --attention.
#include <memory>

#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/attention_layer.h"
#include "nn/layers.h"

namespace {

using namespace xgrad;

class MultiQueryAttention : public nn::AttentionLayer {
 public:
  MultiQueryAttention(const nn::AttentionLayerContext& c, Generator& gen)
      : d_model_(c.d_model), n_heads_(c.n_heads), d_k_(c.d_k), causal_(c.causal) {
    auto built = nn::make_scaling(c.scale, n_heads_, d_k_, c.max_seq_len, causal_, c.settings);
    if (built->transforms_weights())
      throw Error("multi_query: scaling '" + c.scale +
                  "' transforms W_q and W_k together, which multi_query shapes "
                  "differently ([d_model, n_heads * d_k] and [d_model, d_k]); choose another --scale");
    w_q = register_module("w_q", std::make_shared<nn::Linear>(d_model_, n_heads_ * d_k_, false, gen));
    w_k = register_module("w_k", std::make_shared<nn::Linear>(d_model_, d_k_, false, gen));
    w_v = register_module("w_v", std::make_shared<nn::Linear>(d_model_, d_k_, false, gen));
    w_o = register_module("w_o", std::make_shared<nn::Linear>(n_heads_ * d_k_, d_model_, false, gen));
    for (auto* w : {&w_q->weight, &w_k->weight, &w_v->weight, &w_o->weight})
      w->mutable_value() *= static_cast<float>(c.init_gain);
    scaling = register_inline_module(std::move(built));
  }

  std::size_t n_heads() const override { return n_heads_; }
  double effective_multiplier(std::size_t T) const override { return scaling->effective_multiplier(T); }

  /// x: [B, T, d_model] → [B, T, d_model].
  Tensor forward(const Tensor& x) override {
    const auto B = static_cast<std::int64_t>(x.size(0)), T = static_cast<std::int64_t>(x.size(1));
    const auto H = static_cast<std::int64_t>(n_heads_), D = static_cast<std::int64_t>(d_k_);
    Tensor q = reshape(w_q->forward(x), {B, T, H, D});
    // The one key and value head, broadcast to every query head.
    Tensor k = expand(reshape(w_k->forward(x), {B, T, 1, D}), {B, T, H, D});
    Tensor v = expand(reshape(w_v->forward(x), {B, T, 1, D}), {B, T, H, D});
    if (scaling->transforms_qk()) std::tie(q, k) = scaling->transform_qk(q, k, scaling->parameters());
    q = permute(q, {0, 2, 1, 3});  // [B, H, T, d_k]
    k = permute(k, {0, 2, 1, 3});
    const xt::xarray<bool> mask = nn::causal_mask(x.size(1));
    Tensor heads = nn::scaled_dot_product_attention(q, k, permute(v, {0, 2, 1, 3}), causal_ ? &mask : nullptr, *scaling,
                                                    record_attention ? &last : nullptr);
    if (record_attention) {  // probe's std(q), std(k)
      last.q = q.value();
      last.k = k.value();
    }
    return w_o->forward(reshape(permute(heads, {0, 2, 1, 3}), {B, T, H * D}));
  }

  std::shared_ptr<nn::Linear> w_q, w_k, w_v, w_o;
  std::shared_ptr<nn::AttentionScaling> scaling;

 private:
  std::size_t d_model_, n_heads_, d_k_;
  bool causal_;
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
