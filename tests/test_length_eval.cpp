// Evaluation at another length than training (--eval-seq-len, --eval-n-pairs): which trained position each
// evaluated position takes, that the evaluated model is the trained one, what summary.json records (also after a
// resume), and the settings refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <xtensor/xview.hpp>

#include "autograd/ops.h"
#include "data/mqar.h"
#include "data/registry.h"
#include "tests/support/run_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/length_eval.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::train;
namespace fs = std::filesystem;
using xgrad::testing::read_json;
using xgrad::testing::temp_dir;
using xgrad::testing::tiny_run;

namespace {

std::unique_ptr<data::Task> task(const std::string& name, nlohmann::json settings) {
  return data::make_task(name, SettingValues(settings));
}

// kv_recall in the sum encoding with 16 keys, trained at 4 pairs, evaluated at `n_pairs`.
TrainConfig kv_sum_run(const std::string& out, std::size_t steps, const std::string& eval_n_pairs) {
  TrainConfig c = tiny_run(out, steps);
  set_setting(c, "kv_encoding", "sum");
  set_setting(c, "n_keys", 16);
  set_setting(c, "n_pairs", 4);
  c.eval_n_pairs = eval_n_pairs;
  c.eval_batches = 2;
  c.batch_size = 16;
  c.checkpoint_every = 0;
  return c;
}

}  // namespace

TEST_CASE("trained_positions: kv_recall keeps the query at the trained query position; pairs repeat the trained ones") {
  const auto trained = task("kv_recall", {{"n_keys", 32}, {"n_pairs", 4}});
  const auto longer = task("kv_recall", {{"n_keys", 32}, {"n_pairs", 10}});
  CHECK(longer->trained_positions(*trained) == std::vector<std::size_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 4});
  const auto shorter = task("kv_recall", {{"n_keys", 32}, {"n_pairs", 2}});
  CHECK(shorter->trained_positions(*trained) == std::vector<std::size_t>{0, 1, 4});
  CHECK(trained->trained_positions(*trained) == std::vector<std::size_t>{0, 1, 2, 3, 4});  // identity
  // copy (the default): the trained positions, then from the start again.
  const auto copy = task("copy", {{"seq_len", 6}}), copy_long = task("copy", {{"seq_len", 10}});
  CHECK(copy_long->trained_positions(*copy) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3});
}

TEST_CASE("trained_positions: mqar repeats the trained pairs' positions and the query region's, keeping parity") {
  // Trained: 2 pairs (positions 0-3) and a query region of 5 positions (4-8), of which the first 4 repeat.
  const auto trained = task("mqar", {{"n_pairs", 2}, {"seq_len", 9}});
  const auto longer = task("mqar", {{"n_pairs", 3}, {"seq_len", 16}});
  const std::vector<std::size_t> p = longer->trained_positions(*trained);
  CHECK(p == std::vector<std::size_t>{0, 1, 2, 3, 0, 1, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5});
  for (std::size_t t = 0; t < p.size(); ++t) CHECK(p[t] % 2 == t % 2);  // keys stay even, their values odd
  CHECK(trained->trained_positions(*trained) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 4});
}

TEST_CASE("model_at_length: the trained weights; at the trained length the logits are the trained model's") {
  const auto trained_task = task("kv_recall", {{"n_keys", 16}, {"n_pairs", 4}, {"kv_encoding", "sum"}});
  TrainConfig cfg = kv_sum_run("unused", 1, "");
  const nn::ModelConfig mc = model_config(cfg, *trained_task);
  nn::AttentionModel model(mc, 3);
  const data::Batch b = trained_task->batch(0, 0, 4);
  const auto same = model_at_length(model, mc, *trained_task, *trained_task);
  CHECK(same->forward(b.inputs).value() == model.forward(b.inputs).value());

  const auto longer = task("kv_recall", {{"n_keys", 16}, {"n_pairs", 12}, {"kv_encoding", "sum"}});
  const auto at_12 = model_at_length(model, mc, *trained_task, *longer);
  const auto named = at_12->named_parameters(), original = model.named_parameters();
  REQUIRE(named.size() == original.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    if (named[i].first != "pos_emb.weight") {
      CHECK(named[i].second.value() == original[i].second.value());
      continue;
    }
    const auto rows = longer->trained_positions(*trained_task);
    REQUIRE(named[i].second.value().shape(0) == 13);
    for (std::size_t t = 0; t < 13; ++t)
      CHECK(xt::view(named[i].second.value(), t) == xt::view(original[i].second.value(), rows[t]));
  }
}

TEST_CASE("--eval-n-pairs: summary.json gets each evaluation; at the trained length it is the held-out loss") {
  const std::string out = temp_dir("length_eval").string();
  const TrainConfig c = kv_sum_run(out, 30, "4,8,16");
  const RunSummary s = train::train(c);
  const nlohmann::json summary = read_json(fs::path(out) / "summary.json");
  REQUIRE(summary.at("length_eval").size() == 3);
  CHECK(read_json(fs::path(out) / "config.json").at("eval_n_pairs") == "4,8,16");
  const std::size_t pairs[] = {4, 8, 16};
  for (std::size_t i = 0; i < 3; ++i) {
    const LengthEval e = LengthEval::from_json(summary.at("length_eval").at(i));
    INFO("n_pairs " << pairs[i]);
    CHECK(e.setting == "n_pairs");
    CHECK(e.value == pairs[i]);
    CHECK(e.seq_len == pairs[i] + 1);
    CHECK(e.accuracy >= 0.0);
    CHECK(e.accuracy <= 1.0);
    CHECK(std::isfinite(e.loss));
    // One query over n_pairs + 1 keys: the largest weight lies between uniform and one-hot.
    CHECK(e.max_prob_mean >= 1.0 / static_cast<double>(pairs[i] + 1) - 1e-6);
    CHECK(e.max_prob_mean <= 1.0);
    CHECK(e.entropy_mean >= 0.0);
    CHECK(e.entropy_mean <= std::log(static_cast<double>(pairs[i] + 1)) + 1e-6);
  }
  CHECK(s.length_eval.size() == 3);
}

TEST_CASE("evaluate_lengths at the trained length: the trained model's loss on held-out batches 0, 1, ...") {
  TrainConfig cfg = kv_sum_run("unused", 1, "4");
  const auto trained_task = cfg.make_task();
  nn::AttentionModel model(model_config(cfg, *trained_task), 5);
  const std::vector<LengthEval> evals = evaluate_lengths(model, *trained_task, cfg);
  REQUIRE(evals.size() == 1);
  double loss = 0;
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < cfg.eval_batches; ++i) {
    const data::Batch b = trained_task->batch(cfg.data_seed, i, cfg.batch_size, data::Split::eval);
    loss += nn::loss_at_targets(model, b.inputs, b.targets).loss.item();
  }
  CHECK(evals[0].loss == doctest::Approx(loss / static_cast<double>(cfg.eval_batches)).epsilon(1e-12));
  CHECK(evals[0].seq_len == 5);
}

TEST_CASE("--eval-n-pairs after --resume: the uninterrupted run's evaluations") {
  const std::string whole = temp_dir("length_eval_whole").string(), parts = temp_dir("length_eval_parts").string();
  train::train(kv_sum_run(whole, 16, "8,12"));
  train::train(kv_sum_run(parts, 8, "8,12"));
  TrainConfig resumed = kv_sum_run(parts, 16, "8,12");
  resumed.resume = true;
  train::train(resumed);
  CHECK(read_json(fs::path(parts) / "summary.json").at("length_eval") ==
        read_json(fs::path(whole) / "summary.json").at("length_eval"));
}

TEST_CASE("--eval-seq-len and --eval-n-pairs are refused where they are not defined, naming the flag") {
  TrainConfig c = tiny_run(temp_dir("length_eval_refused").string());
  c.eval_seq_len = "32";
  CHECK_THROWS_WITH_AS(c.validate(),
                       "--eval-seq-len: the task kv_recall has no --seq-len (evaluation at another seq_len is defined "
                       "for --task copy, reverse, sort, majority, induction, mqar, char_lm); kv_recall's length is "
                       "--n-pairs: use --eval-n-pairs",
                       ConfigError);
  c.eval_seq_len = "";
  c.eval_n_pairs = "16";  // 16 distinct keys of 8
  CHECK_THROWS_WITH_AS(c.validate(),
                       "--eval-n-pairs 16: kv_recall: n_keys (8) must be >= n_pairs (16): keys are distinct within a "
                       "sequence",
                       ConfigError);
  c.eval_n_pairs = "4,,8";
  CHECK_THROWS_WITH_AS(c.validate(),
                       "--eval-n-pairs: '4,,8': each value must be a whole number in [1, 4096] (comma-separated, e.g. "
                       "16,32,64); got ''",
                       ConfigError);
  c.eval_n_pairs = "0";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("got '0'"), ConfigError);
  set_setting(c, "task", "copy");
  c.eval_n_pairs = "4";
  CHECK_THROWS_WITH_AS(c.validate(),
                       "--eval-n-pairs: the task copy has no --n-pairs (evaluation at another n_pairs is defined for "
                       "--task kv_recall, mqar)",
                       ConfigError);
  // mqar: more pairs need a longer sequence (the task's own check, named by the flag).
  set_setting(c, "task", "mqar");
  c.eval_n_pairs = "8";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("--eval-n-pairs 8: mqar: --seq-len (16) must be >= 4 x"),
                       ConfigError);
  c.eval_n_pairs = "";
  c.eval_seq_len = "32,64";
  CHECK_NOTHROW(c.validate());
}

TEST_CASE(
    "memory estimate: the logits are counted at the positions that carry a target (kv_recall: one per sequence)") {
  TrainConfig c;
  c.task = "kv_recall";
  c.model.d_model = 16;
  c.batch_size = 64;
  set_setting(c, "n_keys", 4096);
  set_setting(c, "kv_encoding", "sum");
  set_setting(c, "n_pairs", 1500);
  const std::unique_ptr<data::Task> task = c.make_task();
  CHECK(task->targets_per_sequence() == 1);
  const MemoryEstimate m = c.estimate_memory(*task);
  const auto logits =
      std::find_if(m.terms.begin(), m.terms.end(), [](const MemoryTerm& t) { return t.what == "the logits"; });
  REQUIRE(logits != m.terms.end());
  // value and gradient of the logits, the softmax and its gradient: 3 x 8 bytes per logit, one row per sequence
  CHECK(logits->bytes == doctest::Approx(8.0 * 3 * 64 * 1 * static_cast<double>(task->vocab_size())));
  CHECK(logits->factors == "--batch-size x the targets per sequence (1) x V");
  // The breaker's case: evaluating at 1500 pairs was refused as about 14 GiB, 9 of it logits that are never formed.
  c.settings = SettingValues(nlohmann::json{{"n_keys", 4096}, {"kv_encoding", "sum"}});
  c.eval_n_pairs = "1500";
  c.out = (temp_dir("estimate_1500") / "run").string();
  CHECK_NOTHROW(c.validate());

  // mqar queries every key once: n_pairs targets; copy keeps the default (every position may carry one).
  TrainConfig q;
  q.task = "mqar";
  set_setting(q, "n_pairs", 3);
  CHECK(q.make_task()->targets_per_sequence() == 3);
  TrainConfig copy;
  copy.task = "copy";
  CHECK(copy.make_task()->targets_per_sequence() == copy.make_task()->seq_len());
}
