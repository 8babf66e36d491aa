#include "nn/scaling.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <numeric>

namespace xgrad::nn {

namespace {

bool is_hex_colour(const std::string& s) {
  return s.size() == 7 && s[0] == '#' &&
         std::all_of(s.begin() + 1, s.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
}

bool same_colour(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

// The colours given to entries that declare none, in the order they are given: Paul Tol's "vibrant" and "bright"
// schemes without their greys (grey is compare's colour for a scaling a build does not know); the built-in scalings
// take his nine "muted" colours.
const std::vector<std::string>& free_colours() {
  static const std::vector<std::string> colours{"#0077BB", "#EE7733", "#009988", "#EE3377", "#33BBEE", "#CC3311",
                                                "#4477AA", "#228833", "#AA3377", "#CCBB44", "#66CCEE"};
  return colours;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The first style, in a fixed order, that no registered entry draws (the same colour with the same dash): candidate
// k is free colour k mod C with dash (k + k / C) mod 8, so the first C such entries differ in colour and each of the
// C x 8 pairs comes up once. A declared `dash` is kept and only the colour chosen.
PlotStyle free_style(const std::string& scaling, const std::string& dash,
                     const std::vector<const ScalingEntry*>& registered) {
  const std::vector<std::string>& colours = free_colours();
  const std::vector<std::string>& dashes = scaling_dash_styles();
  const std::size_t candidates = dash.empty() ? colours.size() * dashes.size() : colours.size();
  for (std::size_t k = 0; k < candidates; ++k) {
    PlotStyle style{colours[k % colours.size()], dash};
    if (dash.empty()) style.dash = dashes[(k + k / colours.size()) % dashes.size()];
    const bool taken = std::any_of(registered.begin(), registered.end(), [&](const ScalingEntry* e) {
      return same_colour(e->colour, style.colour) && e->dash == style.dash;
    });
    if (!taken) return style;
  }
  throw RegistryError("scaling '" + scaling + "': every plot style of the palette is taken; declare a colour");
}

}  // namespace

void ScalingEntry::on_register(ScalingEntry& entry, const std::vector<ScalingEntry*>& registered) {
  const std::vector<std::string>& dashes = scaling_dash_styles();
  if (!entry.dash.empty() && std::find(dashes.begin(), dashes.end(), entry.dash) == dashes.end())
    throw RegistryError("scaling '" + entry.name + "': dash style '" + entry.dash +
                        "' is unknown (allowed: " + joined(dashes) + ")");
  if (!entry.colour.empty() && !is_hex_colour(entry.colour))
    throw RegistryError("scaling '" + entry.name + "': colour '" + entry.colour +
                        "' is not #RRGGBB (six hexadecimal digits)");
  std::vector<const ScalingEntry*> others(registered.begin(), registered.end());
  if (entry.colour.empty()) {
    entry.dash_chosen = entry.dash.empty();
    const PlotStyle style = free_style(entry.name, entry.dash, others);
    entry.colour = style.colour;
    entry.dash = style.dash;
    entry.colour_chosen = true;
  }
  if (entry.dash.empty()) entry.dash = "solid";
  if (entry.colour_chosen) return;
  // A declared style wins over one chosen for an entry registered before it, whichever file linked first.
  others.push_back(&entry);
  for (ScalingEntry* e : registered)
    if (e->colour_chosen && same_colour(e->colour, entry.colour) && e->dash == entry.dash) {
      std::vector<const ScalingEntry*> rest;
      std::copy_if(others.begin(), others.end(), std::back_inserter(rest),
                   [&](const ScalingEntry* o) { return o != e; });
      const PlotStyle style = free_style(e->name, e->dash_chosen ? "" : e->dash, rest);
      e->colour = style.colour;
      e->dash = style.dash;
    }
}

void AttentionScaling::init_weights(const Tensor&, const Tensor&) {}

void AttentionScaling::update_state(const Tensor&, const Tensor&) {}
void AttentionScaling::after_optimizer_step(Tensor&, Tensor&, const std::vector<float>&) {}

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
