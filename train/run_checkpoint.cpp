#include "train/run_checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/escape.h"

namespace xgrad::train {

namespace {

constexpr const char* kFormat = "xgrad-run/1";

// C99 hex floats print and parse every double exactly, nan and inf included.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string exact_list(const std::deque<double>& values) {
  std::string s;
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + exact(values[i]);
  return s;
}

class MetadataReader {
 public:
  MetadataReader(const nn::Checkpoint& c, std::string path) : c_(c), path_(std::move(path)) {}

  const std::string& text(const std::string& key) const {
    const auto it = c_.metadata.find(key);
    if (it == c_.metadata.end()) throw fail("the metadata has no '" + key + "' entry");
    return it->second;
  }
  std::size_t whole(const std::string& key) const {
    const std::string& s = text(key);
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || *end != '\0' || errno == ERANGE)
      throw fail("metadata '" + key + "' = '" + s + "' is not a whole number");
    return static_cast<std::size_t>(v);
  }
  double number(const std::string& key) const { return parse_number(key, text(key)); }
  bool has(const std::string& key) const { return c_.metadata.count(key) > 0; }
  std::deque<double> list(const std::string& key) const {
    std::deque<double> out;
    std::stringstream ss(text(key));
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(parse_number(key, item));
    return out;
  }
  nn::CheckpointError fail(const std::string& what) const {
    return nn::CheckpointError("checkpoint " + path_ + ": " + what);
  }

 private:
  double parse_number(const std::string& key, const std::string& s) const {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') throw fail("metadata '" + key + "' holds '" + s + "', not a number");
    return v;
  }
  const nn::Checkpoint& c_;
  std::string path_;
};

}  // namespace

nn::Checkpoint make_run_checkpoint(const TrainConfig& config, const nn::AttentionModel& model,
                                   const nn::Optimizer& optimizer, const RunProgress& p, bool nonfinite) {
  nn::Checkpoint c;
  const auto named = model.named_parameters();
  for (const auto& [name, param] : named) c.add("model." + name, param.value());
  for (const auto& [name, buffer] : model.named_buffers()) c.add("model." + name, buffer.value());
  const nn::OptimizerState state = optimizer.state();
  for (const auto& [kind, arrays] : state.buffers)
    for (std::size_t i = 0; i < named.size(); ++i) c.add("optim." + kind + "." + named[i].first, arrays.at(i));
  if (nonfinite)
    for (const auto& [name, param] : named)
      if (param.has_grad()) c.add("grad." + name, param.grad());
  c.metadata = {
      {"format", kFormat},
      {"step", std::to_string(p.step)},
      {"optimizer", config.optimizer},
      {"optim.step", std::to_string(state.step)},
      {"nonfinite", nonfinite ? "true" : "false"},
      {"config", config.to_json().dump()},
      {"progress.first_loss", exact(p.first_loss)},
      {"progress.sum_grad_norm_w_q", exact(p.gradients.sum_grad_norm_w_q)},
      {"progress.sum_grad_norm_w_k", exact(p.gradients.sum_grad_norm_w_k)},
      {"progress.zero_grad_w_q", std::to_string(p.gradients.zero_grad_w_q)},
      {"progress.zero_grad_w_k", std::to_string(p.gradients.zero_grad_w_k)},
      {"progress.finite_steps", std::to_string(p.gradients.finite_steps)},
      {"progress.first_grad_norm_w_q", exact(p.gradients.first_grad_norm_w_q)},
      {"progress.first_grad_norm_w_k", exact(p.gradients.first_grad_norm_w_k)},
      {"progress.near_zero_grad_w_q", std::to_string(p.gradients.near_zero_grad_w_q)},
      {"progress.near_zero_grad_w_k", std::to_string(p.gradients.near_zero_grad_w_k)},
      {"progress.skipped_steps", std::to_string(p.skipped_steps)},
      {"progress.consecutive_skips", std::to_string(p.consecutive_skips)},
      {"progress.recent_loss", exact_list(p.recent_loss)},
      {"progress.recent_accuracy", exact_list(p.recent_accuracy)},
      {"progress.wall_seconds", exact(p.wall_seconds)},
  };
  return c;
}

namespace {

// The setting that decides whether a model has the parameter `name` (without the checkpoint's prefix), for a
// checkpoint of a run with other settings: "" when no setting but the shape settings does.
std::string parameter_setting_hint(const std::string& name) {
  if (name == "head.weight")
    return " (a model with --tie-word-embeddings true has no head.weight: its readout uses tok_emb.weight)";
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
    return " (a model with --bias false has no biases)";
  return "";
}

}  // namespace

void load_model_weights(const nn::Checkpoint& c, const std::string& path, nn::AttentionModel& model) {
  std::string prefix;
  for (const auto& [name, value] : c.tensors)
    if (name.rfind("model.", 0) == 0) prefix = "model.";
  const auto named = model.state_dict();  // parameters and buffers
  for (const auto& [name, value] : c.tensors) {
    if (name.rfind(prefix, 0) != 0) continue;  // optimizer state and gradients of a run checkpoint
    bool known = false;
    for (const auto& [n, p] : named) known = known || prefix + n == name;
    if (!known)
      throw nn::CheckpointError("checkpoint " + path + ": tensor '" + name + "' is not a parameter of this model" +
                                parameter_setting_hint(name.substr(prefix.size())));
  }
  for (auto& [name, param] : named) {
    const xt::xarray<float>* value = c.find(prefix + name);
    if (!value)
      throw nn::CheckpointError("checkpoint " + path + ": no tensor '" + prefix + name + "' (the model's parameter " +
                                name + ")" + parameter_setting_hint(name));
    const shape_t have(value->shape().begin(), value->shape().end());
    if (have != param.shape())
      throw nn::CheckpointError("checkpoint " + path + ": tensor '" + prefix + name + "' has shape " + shape_str(have) +
                                ", the model needs " + shape_str(param.shape()));
  }
  // Checked every tensor before changing any weight: a refused file leaves the model as it was.
  for (auto [name, param] : named) param.mutable_value() = *c.find(prefix + name);
}

namespace {

// An optimizer that counts its updates (AdamW's bias-correction t; SGD counts none and reports 0) took one per step
// that was not skipped. A count that disagrees is an edited file or another run's state, and resuming with it would
// apply the wrong bias correction and end as a divergence the run never had. Whether the optimizer counts is asked
// of the optimizer itself: loaded with a count of 1, one that keeps counts gives 1 back.
void check_optimizer_steps(nn::Optimizer& optimizer, const nn::OptimizerState& state, const RunProgress& r,
                           const std::string& path) {
  nn::OptimizerState probe = state;
  probe.step = 1;
  optimizer.load_state(probe);
  const bool counts = optimizer.state().step == 1;
  optimizer.load_state(state);
  if (!counts || (r.skipped_steps <= r.step && state.step == r.step - r.skipped_steps)) return;
  throw ConfigError("--resume: " + path + ": the optimizer has taken " + std::to_string(state.step) +
                    " steps (metadata optim.step) but the run " + std::to_string(r.step) + " (metadata step, " +
                    std::to_string(r.skipped_steps) +
                    " of them skipped); the checkpoint is edited or not this "
                    "run's (start over with --overwrite)");
}

}  // namespace

void restore_run_checkpoint(const nn::Checkpoint& c, const std::string& path, const TrainConfig& config,
                            nn::AttentionModel& model, nn::Optimizer& optimizer, RunProgress& p) {
  const MetadataReader meta(c, path);
  if (meta.text("format") != kFormat)
    throw meta.fail("format '" + meta.text("format") + "' is not " + kFormat + " (not a checkpoint of xgrad train)");
  if (meta.text("nonfinite") != "false") throw meta.fail("it was written at a non-finite step; resume from a good one");
  if (meta.text("optimizer") != config.optimizer)
    throw meta.fail("it holds " + meta.text("optimizer") + " state, the run uses " + config.optimizer);
  load_model_weights(c, path, model);

  const auto named = model.named_parameters();
  nn::OptimizerState state;
  state.step = meta.whole("optim.step");
  for (const std::string& kind : optimizer.state_kinds())
    for (const auto& [name, param] : named) {
      const std::string key = "optim." + kind + "." + name;
      const xt::xarray<float>* value = c.find(key);
      if (!value) throw meta.fail("no tensor '" + key + "'");
      state.buffers[kind].push_back(*value);
    }
  try {
    optimizer.load_state(state);
  } catch (const Error& e) {
    throw meta.fail(e.what());
  }

  RunProgress r;
  r.step = meta.whole("step");
  r.first_loss = meta.number("progress.first_loss");
  r.gradients.sum_grad_norm_w_q = meta.number("progress.sum_grad_norm_w_q");
  r.gradients.sum_grad_norm_w_k = meta.number("progress.sum_grad_norm_w_k");
  r.gradients.zero_grad_w_q = meta.whole("progress.zero_grad_w_q");
  r.gradients.zero_grad_w_k = meta.whole("progress.zero_grad_w_k");
  r.gradients.finite_steps = meta.whole("progress.finite_steps");
  // A checkpoint of a build before the near-zero counts leaves them unknown (the first norm NaN), not zero.
  if (meta.has("progress.first_grad_norm_w_q")) {
    r.gradients.first_grad_norm_w_q = meta.number("progress.first_grad_norm_w_q");
    r.gradients.first_grad_norm_w_k = meta.number("progress.first_grad_norm_w_k");
    r.gradients.near_zero_grad_w_q = meta.whole("progress.near_zero_grad_w_q");
    r.gradients.near_zero_grad_w_k = meta.whole("progress.near_zero_grad_w_k");
  }
  r.skipped_steps = meta.whole("progress.skipped_steps");
  check_optimizer_steps(optimizer, state, r, path);
  r.consecutive_skips = meta.whole("progress.consecutive_skips");
  r.recent_loss = meta.list("progress.recent_loss");
  r.recent_accuracy = meta.list("progress.recent_accuracy");
  r.wall_seconds = meta.number("progress.wall_seconds");
  if (r.recent_loss.size() != r.recent_accuracy.size() || r.recent_loss.size() > RunProgress::kRecent)
    throw meta.fail("progress.recent_loss and progress.recent_accuracy disagree in length");
  p = r;
}

namespace {

// How a metrics.csv header differs from the columns a run writes: the first column that differs, by number and name
// on both sides, or the counts.
std::string header_difference(const std::string& line, const std::vector<std::string>& columns) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
  for (std::size_t i = 0; i < std::min(cells.size(), columns.size()); ++i)
    if (cells[i] != columns[i])
      return "column " + std::to_string(i + 1) + " is '" + escape_control(cells[i]) + "' in the file but '" +
             columns[i] + "' in this run";
  return "the file's header has " + std::to_string(cells.size()) + " columns, this run writes " +
         std::to_string(columns.size());
}

}  // namespace

MetricsPrefix read_metrics_prefix(const std::string& path, const std::vector<std::string>& columns, std::size_t rows) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + " to resume");
  std::string header;
  for (std::size_t i = 0; i < columns.size(); ++i) header += (i ? "," : "") + columns[i];
  MetricsPrefix out;
  std::string line;
  if (!std::getline(in, line) || in.eof()) throw std::runtime_error(path + ": no complete header line; cannot resume");
  if (line != header)
    throw std::runtime_error(path + ": the header differs from the columns this run writes (" +
                             header_difference(line, columns) + "); cannot resume");
  out.text = line + "\n";
  while (out.rows.size() < rows && std::getline(in, line)) {
    if (in.eof()) break;  // a row without its newline was cut short
    std::vector<double> row;
    std::vector<bool> empty;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) {
      char* end = nullptr;
      // An empty cell was not measured that step (MetricsLog::write): NaN, as it reads everywhere.
      row.push_back(cell.empty() ? std::numeric_limits<double>::quiet_NaN() : std::strtod(cell.c_str(), &end));
      empty.push_back(cell.empty());
      if (!cell.empty() && *end != '\0')
        throw std::runtime_error(path + ": row " + std::to_string(out.rows.size()) + " holds '" + cell +
                                 "', not a number");
    }
    if (row.size() != columns.size() || row[0] != static_cast<double>(out.rows.size()))
      throw std::runtime_error(path + ": row " + std::to_string(out.rows.size()) + " is malformed; cannot resume");
    out.text += line + "\n";
    out.rows.push_back(std::move(row));
    out.empty.push_back(std::move(empty));
  }
  if (out.rows.size() < rows)
    throw std::runtime_error(path + " holds " + std::to_string(out.rows.size()) +
                             " complete rows, but the checkpoint " + "is at step " + std::to_string(rows) +
                             "; cannot resume (start over with --overwrite)");
  return out;
}

}  // namespace xgrad::train
