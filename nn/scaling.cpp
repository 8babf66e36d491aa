#include "nn/scaling.h"

#include <algorithm>
#include <numeric>

namespace xgrad::nn {

void AttentionScaling::init_weights(const Tensor&, const Tensor&) {}

void AttentionScaling::update_state(const Tensor&, const Tensor&) {}

TensorPair<float> AttentionScaling::transform_weights(const Tensor& w_q, const Tensor& w_k,
                                                      const std::vector<Tensor>&) const {
  return {w_q, w_k};
}
TensorPair<double> AttentionScaling::transform_weights(const DTensor& w_q, const DTensor& w_k,
                                                       const std::vector<DTensor>&) const {
  return {w_q, w_k};
}

TensorPair<float> AttentionScaling::transform_qk(const Tensor& q, const Tensor& k, const std::vector<Tensor>&) const {
  return {q, k};
}
TensorPair<double> AttentionScaling::transform_qk(const DTensor& q, const DTensor& k,
                                                  const std::vector<DTensor>&) const {
  return {q, k};
}

std::vector<float> AttentionScaling::row_multipliers(std::size_t) const { return {}; }

ScalingEntry scaling_entry(std::string name, std::string description, int order,
                           std::function<std::shared_ptr<AttentionScaling>(const ScalingContext&)> build,
                           PlotStyle style, std::vector<Setting> settings, std::vector<std::string> scalars) {
  ScalingEntry e;
  e.name = std::move(name);
  e.description = std::move(description);
  e.order = order;
  e.settings = std::move(settings);
  e.build = std::move(build);
  e.colour = std::move(style.colour);
  e.dash = std::move(style.dash);
  e.scalars = std::move(scalars);
  return e;
}

xt::xarray<float> AttentionScaling::score_bias(std::size_t) const { return xt::xarray<float>::from_shape({0}); }

Tensor AttentionScaling::transform_scores(const Tensor& z) const { return z; }
DTensor AttentionScaling::transform_scores(const DTensor& z) const { return z; }

void AttentionScaling::transform_scores(const float* z, float* s, std::size_t n) const {
  if (s != z) std::copy(z, z + n, s);
}

void AttentionScaling::transform_scores_backward(const float*, float*, std::size_t) const {}

double AttentionScaling::effective_multiplier(std::size_t T) const {
  const std::vector<float> r = row_multipliers(T);
  if (r.empty()) return multiplier();
  return multiplier() * std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(r.size());
}

const std::vector<std::string>& scaling_dash_styles() {
  static const std::vector<std::string> styles{"solid",      "dashed",   "dotted",      "dashdot",
                                               "dashdotdot", "longdash", "longdashdot", "dashdashdot"};
  return styles;
}

std::shared_ptr<AttentionScaling> make_scaling(const std::string& name, std::size_t n_heads, std::size_t d_k,
                                               std::size_t max_seq_len, bool causal, const SettingValues& given) {
  ScalingContext context;
  context.d_model = n_heads * d_k;
  context.n_heads = n_heads;
  context.d_k = d_k;
  context.max_seq_len = max_seq_len;
  context.causal = causal;
  context.settings = given;
  return make_scaling(name, std::move(context));
}

std::shared_ptr<AttentionScaling> make_scaling(const std::string& name, ScalingContext context) {
  const ScalingEntry& entry = Registry<ScalingEntry>::instance().at(name);
  if (!entry.build) throw Error("scaling '" + name + "' has no build function");
  context.settings = resolve_settings(entry.settings, context.settings.json());
  auto scaling = entry.build(context);
  if (!scaling) throw Error("scaling '" + name + "': its build function returned nothing");
  return scaling;
}

const ScalingEntry* reference_scaling() {
  for (const ScalingEntry* e : Registry<ScalingEntry>::instance().entries())
    if (e->is_reference) return e;
  return nullptr;
}

}  // namespace xgrad::nn
