#include "train/run_files.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "train/config.h"
#include "train/json_file.h"

namespace xgrad::train {

const std::vector<std::string>& run_file_names() {
  static const std::vector<std::string> files{kConfigFile, kMetricsFile, kSummaryFile, kCheckpointFile,
                                              kNonfiniteCheckpointFile};
  return files;
}

bool loss_blew_up(double first_loss, double final_loss) {
  return std::isfinite(first_loss) && std::isfinite(final_loss) && first_loss > 0 &&
         final_loss > kDivergedLossFactor * first_loss;
}

bool is_finite_step(double loss, double grad_norm) { return std::isfinite(loss) && std::isfinite(grad_norm); }

void GradientStats::add(double loss, double grad_norm, double norm_w_q, double norm_w_k) {
  if (!is_finite_step(loss, grad_norm)) return;
  if (finite_steps == 0) {
    first_grad_norm_w_q = norm_w_q;
    first_grad_norm_w_k = norm_w_k;
  }
  ++finite_steps;
  // Exactly zero counts even when the first step's norm was zero too (then nothing is below a fraction of it).
  near_zero_grad_w_q += norm_w_q == 0.0 || norm_w_q < kNearZeroGradFraction * first_grad_norm_w_q ? 1 : 0;
  near_zero_grad_w_k += norm_w_k == 0.0 || norm_w_k < kNearZeroGradFraction * first_grad_norm_w_k ? 1 : 0;
  zero_grad_w_q += norm_w_q == 0.0 ? 1 : 0;
  zero_grad_w_k += norm_w_k == 0.0 ? 1 : 0;
  sum_grad_norm_w_q += norm_w_q;
  sum_grad_norm_w_k += norm_w_k;
}

namespace {

// A JSON value as an error names it: a number, true, false or null as written, a string, array or object by its type.
std::string found(const nlohmann::json& v) {
  if (v.is_primitive() && !v.is_string()) return v.dump();
  return (v.is_array() || v.is_object() ? "an " : "a ") + std::string(v.type_name());
}

// `key` of the object `j` as the T summary.json holds there (a double: a number, or null, to_json's NaN), or
// `fallback` when it is missing (a key added after the first release); else an error naming the key and the type.
template <class T>
T read_key(const nlohmann::json& j, const char* key, std::optional<T> fallback = std::nullopt) {
  const auto it = j.find(key);
  if (it == j.end() && fallback) return *fallback;
  if (it == j.end()) throw std::invalid_argument(std::string(key) + " is missing");
  const nlohmann::json& v = *it;
  using std::is_same_v, std::pair;
  const bool fits_long =
      v.is_number_unsigned() ? v.get<std::size_t>() <= std::numeric_limits<long>::max() : v.is_number_integer();
  const auto [fits, type] = is_same_v<T, bool>          ? pair(v.is_boolean(), "true or false")
                            : is_same_v<T, std::string> ? pair(v.is_string(), "a string")
                            : is_same_v<T, std::size_t> ? pair(v.is_number_unsigned(), "a whole number >= 0")
                            : is_same_v<T, long>        ? pair(fits_long, "a whole number")
                            : is_same_v<T, double>      ? pair(v.is_number() || v.is_null(), "a number or null")
                                                        : pair(v.is_array(), "an array");
  if (!fits) throw std::invalid_argument(std::string(key) + " must be " + type + ", found " + found(v));
  if constexpr (is_same_v<T, double>)
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  return v.get<T>();
}

double ratio(double numerator, std::size_t steps) {
  return steps ? numerator / static_cast<double>(steps) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

double GradientStats::frac_zero_grad_w_q() const { return ratio(static_cast<double>(zero_grad_w_q), finite_steps); }
double GradientStats::frac_zero_grad_w_k() const { return ratio(static_cast<double>(zero_grad_w_k), finite_steps); }
double GradientStats::frac_near_zero_grad_w_q() const {
  return std::isnan(first_grad_norm_w_q) ? std::numeric_limits<double>::quiet_NaN()
                                         : ratio(static_cast<double>(near_zero_grad_w_q), finite_steps);
}
double GradientStats::frac_near_zero_grad_w_k() const {
  return std::isnan(first_grad_norm_w_k) ? std::numeric_limits<double>::quiet_NaN()
                                         : ratio(static_cast<double>(near_zero_grad_w_k), finite_steps);
}
double GradientStats::mean_grad_norm_w_q() const { return ratio(sum_grad_norm_w_q, finite_steps); }
double GradientStats::mean_grad_norm_w_k() const { return ratio(sum_grad_norm_w_k, finite_steps); }

nlohmann::json LengthEval::to_json() const {
  return {{"setting", setting},          {"value", value},
          {"seq_len", seq_len},          {"loss", loss},
          {"accuracy", accuracy},        {"max_prob_mean", max_prob_mean},
          {"entropy_mean", entropy_mean}};
}

LengthEval LengthEval::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("must be an object, found " + found(j));
  LengthEval e;
  e.setting = read_key<std::string>(j, "setting");
  e.value = read_key<std::size_t>(j, "value");
  e.seq_len = read_key<std::size_t>(j, "seq_len");
  // A number out of its range comes from a damaged file, and no reader may draw a verdict from it; NaN is a null, as
  // to_json writes it (not measured; readers skip it).
  const auto checked = [&](const char* key, double max) {
    const double v = read_key<double>(j, key);
    if (std::isnan(v) || (std::isfinite(v) && v >= 0 && v <= max)) return v;
    throw std::invalid_argument(std::string(key) + " is " + j.at(key).dump() + " at " + e.setting + " " +
                                std::to_string(e.value) +
                                "; allowed: " + (max == 1 ? "0 to 1" : "a finite number >= 0"));
  };
  e.loss = checked("loss", INFINITY);
  e.accuracy = checked("accuracy", 1);
  e.max_prob_mean = checked("max_prob_mean", 1);
  e.entropy_mean = checked("entropy_mean", INFINITY);
  return e;
}

nlohmann::json RunSummary::to_json() const {
  nlohmann::json j = {{"steps_done", steps_done},
                      {"chance_loss", chance_loss},
                      {"first_loss", first_loss},
                      {"final_loss", final_loss},
                      {"final_accuracy", final_accuracy},
                      {"mean_grad_norm_w_q", mean_grad_norm_w_q},
                      {"mean_grad_norm_w_k", mean_grad_norm_w_k},
                      {"frac_zero_grad_w_q", frac_zero_grad_w_q},
                      {"frac_zero_grad_w_k", frac_zero_grad_w_k},
                      {"frac_near_zero_grad_w_q", frac_near_zero_grad_w_q},
                      {"frac_near_zero_grad_w_k", frac_near_zero_grad_w_k},
                      {"diverged", diverged},
                      {"diverged_step", diverged_step},
                      {"skipped_steps", skipped_steps},
                      {"wall_seconds", wall_seconds}};
  if (!length_eval.empty()) {
    j["length_eval"] = nlohmann::json::array();
    for (const LengthEval& e : length_eval) j["length_eval"].push_back(e.to_json());
  }
  return j;
}

RunSummary RunSummary::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("must be an object, found " + found(j));
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const auto number = [&j](const char* key) { return read_key<double>(j, key); };
  RunSummary s;
  s.steps_done = read_key<std::size_t>(j, "steps_done");
  s.chance_loss = number("chance_loss");
  s.first_loss = number("first_loss");
  s.final_loss = number("final_loss");
  s.final_accuracy = number("final_accuracy");
  s.mean_grad_norm_w_q = number("mean_grad_norm_w_q");
  s.mean_grad_norm_w_k = number("mean_grad_norm_w_k");
  s.frac_zero_grad_w_q = read_key<double>(j, "frac_zero_grad_w_q", 0.0);
  s.frac_zero_grad_w_k = read_key<double>(j, "frac_zero_grad_w_k", 0.0);
  s.frac_near_zero_grad_w_q = read_key<double>(j, "frac_near_zero_grad_w_q", kNaN);
  s.frac_near_zero_grad_w_k = read_key<double>(j, "frac_near_zero_grad_w_k", kNaN);
  s.diverged = read_key<bool>(j, "diverged");
  s.diverged_step = read_key<long>(j, "diverged_step");
  s.skipped_steps = read_key<std::size_t>(j, "skipped_steps", std::size_t{0});
  s.wall_seconds = number("wall_seconds");
  const auto evals = read_key<nlohmann::json::array_t>(j, "length_eval", nlohmann::json::array_t{});
  for (std::size_t i = 0; i < evals.size(); ++i) {
    LengthEval read;
    try {
      read = LengthEval::from_json(evals[i]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("length_eval[" + std::to_string(i) + "]: " + e.what());
    }
    for (const LengthEval& before : s.length_eval)  // a reader would have to guess which of the two holds
      if (before.setting == read.setting && before.value == read.value)
        throw std::invalid_argument("length_eval at " + read.setting + " " + std::to_string(read.value) +
                                    " is given twice; allowed: one evaluation per setting and value");
    s.length_eval.push_back(read);
  }
  return s;
}

RunSummary RunSummary::read(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kSummaryFile;
  try {
    return from_json(read_json_file(path, kMaxRunJsonBytes));
  } catch (const ConfigError&) {
    throw;                             // it names the file
  } catch (const std::exception& e) {  // text that is not JSON, or from_json's
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

namespace metrics_columns {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const std::string kGradNormPrefix = std::string(kGradNorm) + "/";

}  // namespace

std::string grad_norm(const std::string& parameter) { return kGradNormPrefix + parameter; }
std::string update_rms(const std::string& parameter) { return "update_rms/" + parameter; }
std::string grad_rms(const std::string& parameter) { return "grad_rms/" + parameter; }

std::string scalar(const std::string& parameter, std::size_t index, std::size_t numel) {
  return "scalar/" + parameter + (numel == 1 ? "" : "/" + std::to_string(index));
}

const std::vector<AttentionStatColumn>& attention_stats() {
  using S = nn::AttentionStats;
  static const std::vector<AttentionStatColumn> stats{{"score_std", &S::score_std},
                                                      {"score_max_abs", &S::score_max_abs},
                                                      {"qk_spectral_norm", &S::qk_spectral_norm, kQkSpectralNormAdded},
                                                      {"entropy_mean", &S::entropy_mean},
                                                      {"entropy_min", &S::entropy_min},
                                                      {"max_prob_mean", &S::max_prob_mean},
                                                      {"frac_max_prob_gt_0.99", &S::frac_max_prob_above_099},
                                                      {"score_grad_p10", &S::score_grad_p10},
                                                      {"score_grad_median", &S::score_grad_median},
                                                      {"score_grad_p90", &S::score_grad_p90},
                                                      {"max_logit", &S::max_logit, kMaxLogitAdded}};
  return stats;
}

std::string attention_stat_name(double nn::AttentionStats::*field) {
  for (const auto& stat : attention_stats())
    if (stat.field == field) return stat.name;
  throw std::invalid_argument("metrics_columns::attention_stat_name: this AttentionStats field has no column");
}

std::string attention(std::size_t layer, std::size_t head, const std::string& stat) {
  return "attn/l" + std::to_string(layer) + "h" + std::to_string(head) + "/" + stat;
}

bool is_attention(const std::string& column, std::size_t layer, const std::string& stat) {
  return starts_with(column, "attn/l" + std::to_string(layer) + "h") && ends_with(column, "/" + stat);
}

bool is_query_weight(const std::string& parameter) { return ends_with(parameter, "attn.w_q.weight"); }
bool is_key_weight(const std::string& parameter) { return ends_with(parameter, "attn.w_k.weight"); }

std::string grad_norm_parameter(const std::string& column) {
  return starts_with(column, kGradNormPrefix) ? column.substr(kGradNormPrefix.size()) : std::string();
}

}  // namespace metrics_columns

}  // namespace xgrad::train
