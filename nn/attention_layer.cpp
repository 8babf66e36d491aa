#include "nn/attention_layer.h"

namespace xgrad::nn {

namespace {

// The entry `name` and `context` with d_k and the entry's missing settings resolved, checked by the entry.
const AttentionLayerEntry& resolve(const std::string& name, AttentionLayerContext& context) {
  const AttentionLayerEntry& entry = Registry<AttentionLayerEntry>::instance().at(name);
  if (!entry.build) throw Error("attention layer '" + name + "' has no build function");
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

}  // namespace xgrad::nn
