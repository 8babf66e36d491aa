#include "nn/attention_layer.h"

#include <numeric>

#include "autograd/ops.h"

namespace xgrad::nn {

namespace {

// The entry `name` and `context` with d_k and the entry's missing settings resolved, checked by the entry.
const AttentionLayerEntry& resolve(const std::string& name, AttentionLayerContext& context) {
  const AttentionLayerEntry& entry = Registry<AttentionLayerEntry>::instance().at(name);
  if (context.d_model == 0 || context.n_heads == 0 || (context.d_k == 0 && context.d_model % context.n_heads != 0))
    throw Error("attention layer '" + name + "': d_model (" + std::to_string(context.d_model) +
                ") must be a positive multiple of n_heads (" + std::to_string(context.n_heads) +
                ") unless d_k is given");
  if (context.d_k == 0) context.d_k = context.d_model / context.n_heads;
  for (const Setting& s : entry.settings)  // the layer's own settings; the others (the scaling's) pass through
    if (!context.settings.contains(s.key)) context.settings.set(s.key, s.default_value);
  if (entry.check) entry.check(context);
  return entry;
}

}  // namespace

std::shared_ptr<AttentionLayer> make_attention_layer(const std::string& name, AttentionLayerContext context,
                                                     Generator& gen) {
  const AttentionLayerEntry& entry = resolve(name, context);
  auto layer = entry.build(context, gen);
  if (!layer) throw Error("attention layer '" + name + "': its build function returned nothing");
  return layer;
}

void check_attention_layer(const std::string& name, AttentionLayerContext context) { resolve(name, context); }

AttentionLayer::AttentionLayer() { attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>()); }

void AttentionLayer::after_optimizer_step(bool) {}

Tensor AttentionLayer::forward_at(const Tensor& x, const std::vector<std::size_t>& positions) {
  if (x.dim() == 3) check_positions(positions, x.size(1));
  return select_positions(forward(x), positions);
}

Tensor AttentionLayer::forward_step(const Tensor& x, AttentionCache& cache) {
  if (x.dim() != 3) return forward(x);  // forward's error
  cache.inputs = cache.length == 0 ? x : concat({cache.inputs, x}, 1);
  std::vector<std::size_t> positions(x.size(1));
  std::iota(positions.begin(), positions.end(), cache.length);
  cache.length += positions.size();
  return forward_at(cache.inputs, positions);
}

void check_positions(const std::vector<std::size_t>& positions, std::size_t T) {
  if (positions.empty()) throw Error("attention: no query positions (forward_at needs at least one)");
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] >= T)
      throw Error("attention: query position " + std::to_string(positions[i]) + " is outside [0, " + std::to_string(T) +
                  ")");
    if (i > 0 && positions[i] <= positions[i - 1])
      throw Error("attention: query positions must be sorted and distinct; " + std::to_string(positions[i]) +
                  " follows " + std::to_string(positions[i - 1]));
  }
}

Tensor select_positions(const Tensor& x, const std::vector<std::size_t>& positions) {
  index_array index = index_array::from_shape({positions.size()});
  for (std::size_t i = 0; i < positions.size(); ++i) index(i) = static_cast<std::int64_t>(positions[i]);
  return index_select(x, 1, index);
}

}  // namespace xgrad::nn
