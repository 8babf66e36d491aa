// The readout and cross-entropy only at the positions that carry a target (nn::loss_at_targets), with the last block
// computing only the sequence positions that carry one (its queries, W_o, residual, MLP), against the full
// readout over every position (model.forward, then cross_entropy with ignore index -1): the same loss, the same
// gradient for every parameter and the same accuracy, up to float summation order, for every registered scaling and
// the block's options.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "autograd/ops.h"
#include "data/registry.h"
#include "nn/attention.h"
#include "nn/attention_stats.h"
#include "nn/model.h"
#include "nn/scaling.h"
#include "tests/support/biased_scaling.h"
#include "train/step_metrics.h"

using namespace xgrad;

namespace {

// Float32 results of two evaluation orders: the loss is a mean over rows and each gradient a sum over rows, where
// the full path adds exact zeros of the rows without a target, and the GEMMs under it sum in an order of each BLAS
// kernel's own. Relative to the largest magnitude of the array, with an absolute floor relative to the block's
// largest gradient (block_scale): some gradients are sums whose terms cancel, and what the two orders leave of them
// is rounding noise of the size of the terms, not of the sum. k_norm.bias under qk_layernorm is zero in exact
// arithmetic (a shift of every key moves a query's scores by one constant, which softmax ignores; its terms are the
// key gradients, the size of the block's weight gradients); sigma_reparam's gain sums W * dL/dW over the whole
// matrix. 1e-5 is about 170 float32 ulps: a few hundred terms' worth of reordering.
constexpr double kRelTol = 1e-5;

/// "blocks.N" for a parameter of block N, else the parameter's own name: the group whose gradients set the floor.
std::string block_of(const std::string& name) {
  if (name.rfind("blocks.", 0) != 0) return name;
  return name.substr(0, name.find('.', 7));
}

double max_abs(const xt::xarray<float>& a) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a.data()[i])));
  return m;
}

double max_abs_diff(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i])));
  return m;
}

struct Pass {
  double loss = 0, accuracy = 0;
  std::vector<std::pair<std::string, xt::xarray<float>>> grads;
};

nn::ModelConfig tiny_model(const data::Task& task) {
  nn::ModelConfig c;
  c.vocab_size = task.vocab_size();
  c.max_seq_len = task.seq_len();
  c.d_model = 16;
  c.n_heads = 2;
  c.n_layers = 2;
  c.d_ff = 32;
  return c;
}

using Configure = std::function<void(nn::ModelConfig&)>;

Pass run(const data::Task& task, bool full, std::uint64_t step, const Configure& configure = nullptr,
         bool record = false) {
  nn::ModelConfig config = tiny_model(task);
  if (configure) configure(config);
  nn::AttentionModel model(config, /*seed=*/3);
  for (auto& layer : model.attention_layers()) layer->record_attention = record;
  const data::Batch b = task.batch(/*seed=*/5, step, /*batch_size=*/12);
  Pass p;
  Tensor loss;
  if (full) {
    const Tensor logits = model.forward(b.inputs);
    CHECK(logits.shape() == shape_t{12, task.seq_len(), task.vocab_size()});
    loss = cross_entropy(logits, b.targets);
    p.accuracy = train::accuracy(logits.value(), b.targets);
  } else {
    const nn::TargetLoss out = nn::loss_at_targets(model, b.inputs, b.targets);
    CHECK(out.logits.shape() == shape_t{nn::target_positions(b.targets).size(), task.vocab_size()});
    loss = out.loss;
    p.accuracy = train::accuracy(out.logits.value(), out.targets);
  }
  p.loss = loss.item();
  loss.backward();
  for (const auto& name_param_entry : model.named_parameters()) {
    const auto& name = std::get<0>(name_param_entry);
    const auto& param = std::get<1>(name_param_entry);
    REQUIRE_MESSAGE(param.has_grad(), name);
    p.grads.emplace_back(name, param.grad());
  }
  return p;
}

void check_equivalent(const data::Task& task, const Configure& configure = nullptr, bool record = false) {
  for (std::uint64_t step : {0, 1, 2}) {
    const Pass full = run(task, true, step, configure), rows = run(task, false, step, configure, record);
    CHECK(rows.loss == doctest::Approx(full.loss).epsilon(kRelTol));
    CHECK(rows.accuracy == full.accuracy);
    REQUIRE(rows.grads.size() == full.grads.size());
    std::map<std::string, double> block_scale;
    for (const auto& [name, grad] : full.grads)
      block_scale[block_of(name)] = std::max(block_scale[block_of(name)], max_abs(grad));
    for (std::size_t i = 0; i < full.grads.size(); ++i) {
      INFO(task.name() << " step " << step << ": " << full.grads[i].first);
      REQUIRE(rows.grads[i].first == full.grads[i].first);
      REQUIRE(rows.grads[i].second.shape() == full.grads[i].second.shape());
      const double scale = std::max(max_abs(full.grads[i].second), block_scale[block_of(full.grads[i].first)]);
      CHECK(max_abs(full.grads[i].second) > 0);  // every parameter receives a gradient here
      CHECK(max_abs_diff(rows.grads[i].second, full.grads[i].second) <= kRelTol * scale);
    }
  }
}

}  // namespace

TEST_CASE("target_positions: the flat positions whose target is not -1, in row-major order") {
  index_array t{{-1, 3, -1}, {0, -1, 2}};
  const index_array p = nn::target_positions(t);
  CHECK(p == index_array{1, 3, 5});
  CHECK(nn::target_positions(index_array{{-1, -1}}).size() == 0);
}

TEST_CASE("loss_at_targets equals the full readout: kv_recall (one target per sequence, the last position)") {
  const auto task =
      data::make_task("kv_recall", SettingValues(nlohmann::json{{"n_keys", 6}, {"n_values", 4}, {"n_pairs", 5}}));
  check_equivalent(*task);
}

TEST_CASE("loss_at_targets equals the full readout: copy (targets on the second half, -1 on the first)") {
  const auto task = data::make_task("copy", SettingValues(nlohmann::json{{"seq_len", 6}, {"n_symbols", 5}}));
  const data::Batch b = task->batch(5, 0, 12);
  const std::size_t n = nn::target_positions(b.targets).size();
  REQUIRE(n > 12);                // several targets per sequence
  REQUIRE(n < b.targets.size());  // and positions without one
  check_equivalent(*task);
}

TEST_CASE("loss_at_targets: a batch without targets takes the full readout (loss 0, logits [B, T, V])") {
  const auto task =
      data::make_task("kv_recall", SettingValues(nlohmann::json{{"n_keys", 4}, {"n_values", 3}, {"n_pairs", 3}}));
  nn::AttentionModel model(tiny_model(*task), 1);
  data::Batch b = task->batch(0, 0, 4);
  b.targets.fill(-1);
  const nn::TargetLoss out = nn::loss_at_targets(model, b.inputs, b.targets);
  CHECK(out.loss.item() == 0.0f);
  CHECK(out.logits.shape() == shape_t{4, task->seq_len(), task->vocab_size()});
  CHECK_THROWS_AS(nn::loss_at_targets(model, b.inputs, index_array{{0, -1}}), Error);
}

TEST_CASE("loss_at_targets equals the full readout for every scaling (queries only at target positions)") {
  const auto kv = data::make_task(
      "kv_recall",
      SettingValues(nlohmann::json{{"n_keys", 6}, {"n_values", 4}, {"n_pairs", 5}, {"kv_encoding", "sum"}}));
  const auto copy = data::make_task("copy", SettingValues(nlohmann::json{{"seq_len", 6}, {"n_symbols", 5}}));
  for (const std::string& scale : Registry<nn::ScalingEntry>::instance().names()) {
    INFO("scale " << scale);
    const Configure c = [&](nn::ModelConfig& m) { m.scale = scale; };
    check_equivalent(*kv, c);
    check_equivalent(*copy, c);
  }
}

TEST_CASE("loss_at_targets equals the full readout with each block option of the last block") {
  const auto kv =
      data::make_task("kv_recall", SettingValues(nlohmann::json{{"n_keys", 6}, {"n_values", 4}, {"n_pairs", 5}}));
  const auto copy = data::make_task("copy", SettingValues(nlohmann::json{{"seq_len", 6}, {"n_symbols", 5}}));
  const std::vector<std::pair<std::string, Configure>> options = {
      {"one layer", [](nn::ModelConfig& m) { m.n_layers = 1; }},
      {"no MLP", [](nn::ModelConfig& m) { m.mlp = false; }},
      {"no W_o",
       [](nn::ModelConfig& m) {
         m.settings = SettingValues(nlohmann::json{{"attn_out_proj", false}});
       }},
      {"no LayerNorm", [](nn::ModelConfig& m) { m.layer_norm = false; }},
      {"no residual", [](nn::ModelConfig& m) { m.residual = false; }},
      {"not causal", [](nn::ModelConfig& m) { m.causal = false; }},
      {"the textbook layer",
       [](nn::ModelConfig& m) {
         m.n_layers = 1;
         m.mlp = false;
         m.n_heads = 1;
         m.settings = SettingValues(nlohmann::json{{"attn_out_proj", false}});
       }},
  };
  for (const auto& name_configure_entry : options) {
    const auto& name = std::get<0>(name_configure_entry);
    const auto& configure = std::get<1>(name_configure_entry);
    INFO(name);
    check_equivalent(*kv, configure);
    check_equivalent(*copy, configure);
  }
}

TEST_CASE(
    "loss_at_targets with the attention recorded (a measured step): the same loss, and the last layer's "
    "statistics over the target queries equal the full path's") {
  const auto kv =
      data::make_task("kv_recall", SettingValues(nlohmann::json{{"n_keys", 6}, {"n_values", 4}, {"n_pairs", 5}}));
  const auto copy = data::make_task("copy", SettingValues(nlohmann::json{{"seq_len", 6}, {"n_symbols", 5}}));
  for (const data::Task* task : {kv.get(), copy.get()}) {
    check_equivalent(*task, nullptr, /*record=*/true);
    for (const std::string& scale : Registry<nn::ScalingEntry>::instance().names()) {
      INFO(task->name() << ", scale " << scale);
      const data::Batch b = task->batch(5, 0, 12);
      xt::xarray<bool> targets = xt::xarray<bool>::from_shape(b.targets.shape());
      for (std::size_t i = 0; i < targets.size(); ++i) targets.data()[i] = b.targets.data()[i] >= 0;
      nn::ModelConfig config = tiny_model(*task);
      config.scale = scale;
      std::vector<std::vector<nn::AttentionStats>> stats;
      std::vector<std::size_t> rows;
      for (const bool full : {true, false}) {
        nn::AttentionModel model(config, 3);
        for (auto& layer : model.attention_layers()) layer->record_attention = true;
        Tensor loss = full ? cross_entropy(model.forward(b.inputs), b.targets)
                           : nn::loss_at_targets(model, b.inputs, b.targets).loss;
        loss.backward();
        const nn::AttentionRecord& last = model.attention_layers().back()->last;
        REQUIRE(last.scores.has_grad());
        if (!full) rows.push_back(last.probs.shape(2));
        stats.push_back(nn::attention_stats(last.scores.value(), last.probs, &last.scores.grad(), &targets,
                                            last.query_positions.empty() ? nullptr : &last.query_positions));
      }
      CHECK(rows.front() < task->seq_len());  // the pruned path recorded fewer query rows
      REQUIRE(stats[0].size() == stats[1].size());
      for (std::size_t h = 0; h < stats[0].size(); ++h) {
        const nn::AttentionStats &f = stats[0][h], &p = stats[1][h];
        CHECK(p.n_queries == f.n_queries);
        CHECK(f.n_queries > 0);
        for (auto field :
             {&nn::AttentionStats::score_std, &nn::AttentionStats::score_max_abs, &nn::AttentionStats::entropy_mean,
              &nn::AttentionStats::entropy_min, &nn::AttentionStats::max_prob_mean,
              &nn::AttentionStats::frac_max_prob_above_099, &nn::AttentionStats::score_grad_p10,
              &nn::AttentionStats::score_grad_median, &nn::AttentionStats::score_grad_p90})
          CHECK(p.*field == doctest::Approx(f.*field).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("MultiHeadAttention::forward_at: the rows of forward at the given positions, with their gradients") {
  Generator gen(7, 1);
  for (const std::string& scale : Registry<nn::ScalingEntry>::instance().names()) {
    INFO("scale " << scale);
    for (const bool causal : {true, false}) {
      nn::MultiHeadAttention attn(8, 2, scale, causal, gen, /*max_seq_len=*/7);
      xt::xarray<float> x0 = xt::xarray<float>::from_shape({3, 7, 8});
      for (auto& e : x0) e = static_cast<float>(gen.normal());
      const std::vector<std::size_t> positions = {0, 3, 6};
      Tensor x_full(x0, true), x_rows(x0, true);
      const Tensor full = nn::select_positions(attn.forward(x_full), positions);
      const Tensor rows = attn.forward_at(x_rows, positions);
      REQUIRE(rows.shape() == shape_t{3, 3, 8});
      CHECK(max_abs_diff(rows.value(), full.value()) <= 1e-5 * std::max(max_abs(full.value()), 1.0));
      sum(full * full).backward();
      sum(rows * rows).backward();
      CHECK(max_abs_diff(x_rows.grad(), x_full.grad()) <= 1e-5 * std::max(max_abs(x_full.grad()), 1.0));
    }
  }
}

TEST_CASE("forward_at refuses no positions, and positions that are unsorted, repeated or past the sequence") {
  Generator gen(1, 1);
  nn::MultiHeadAttention attn(8, 2, "sqrt_dk", true, gen, 5);
  const Tensor x(xt::xarray<float>(xt::zeros<float>({2, 5, 8})));
  CHECK_THROWS_WITH_AS(attn.forward_at(x, {3, 1}), doctest::Contains("sorted and distinct"), Error);
  CHECK_THROWS_WITH_AS(attn.forward_at(x, {1, 1}), doctest::Contains("sorted and distinct"), Error);
  CHECK_THROWS_WITH_AS(attn.forward_at(x, {5}), doctest::Contains("outside [0, 5)"), Error);
  CHECK_THROWS_WITH_AS(attn.forward_at(x, {}), doctest::Contains("no query positions"), Error);
}
