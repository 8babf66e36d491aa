// Multi-query associative recall (Arora et al. 2023, Zoology): the sequence layout, that every query's target is the
// value paired with its key earlier in the sequence, the refusal of settings it cannot draw, and a two-layer model
// that learns it.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "data/mqar.h"
#include "data/registry.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_run.h"
#include "train/settings.h"
#include "train/trainer.h"

using namespace xgrad;
using namespace xgrad::data;

namespace {

MultiQueryRecallConfig config(std::size_t n_keys, std::size_t n_values, std::size_t n_pairs, std::size_t seq_len) {
  return MultiQueryRecallConfig{n_keys, n_values, n_pairs, seq_len};
}

}  // namespace

TEST_CASE("mqar: alternating key and value tokens, then one query per key whose target is that key's value") {
  const std::size_t K = 10, V = 12, P = 5, T = 26;  // query region of 16 positions: 8 even slots for 5 queries
  const MultiQueryRecall task(config(K, V, P, T));
  CHECK(task.name() == "mqar");
  CHECK(task.seq_len() == T);
  CHECK(task.vocab_size() == K + V + 1);
  CHECK(task.chance_loss() == doctest::Approx(std::log(12.0)));
  const Batch b = task.batch(3, 7, 200);
  REQUIRE(b.inputs.shape() == std::vector<std::size_t>{200, T});
  REQUIRE(b.targets.shape() == std::vector<std::size_t>{200, T});
  for (std::size_t s = 0; s < 200; ++s) {
    std::map<std::int64_t, std::int64_t> value_of;  // key token -> value token, from the pairs
    std::set<std::int64_t> values;
    for (std::size_t i = 0; i < P; ++i) {
      const std::int64_t key = b.inputs(s, 2 * i), value = b.inputs(s, 2 * i + 1);
      REQUIRE(key >= 0);
      REQUIRE(key < static_cast<std::int64_t>(K));
      REQUIRE(value >= static_cast<std::int64_t>(K));
      REQUIRE(value < static_cast<std::int64_t>(K + V));
      CHECK(value_of.emplace(key, value).second);  // keys distinct within a sequence
      CHECK(values.insert(value).second);          // values distinct (as Zoology draws them)
      CHECK(b.targets(s, 2 * i) == -1);
      CHECK(b.targets(s, 2 * i + 1) == -1);
    }
    std::set<std::int64_t> queried;
    for (std::size_t t = 2 * P; t < T; ++t) {
      const std::int64_t token = b.inputs(s, t), target = b.targets(s, t);
      if (token < static_cast<std::int64_t>(K)) {  // a key: a query, at an even offset from the region's start
        CHECK((t - 2 * P) % 2 == 0);
        CHECK(queried.insert(token).second);  // each key once
        REQUIRE(value_of.count(token) == 1);
        CHECK(target == value_of.at(token));  // the value paired with it earlier
      } else {
        CHECK(target == -1);  // filler carries no loss, and is a value token (never a key)
        CHECK(token < static_cast<std::int64_t>(K + V));
      }
    }
    CHECK(queried.size() == P);  // every key is queried
  }
}

TEST_CASE("mqar: batch i depends only on (seed, i, split); without random_non_queries the filler is the blank") {
  const MultiQueryRecall task(config(8, 8, 4, 16));
  const Batch a = task.batch(1, 5, 8);
  task.batch(1, 4, 8);
  CHECK(task.batch(1, 5, 8).inputs == a.inputs);
  CHECK(task.batch(1, 5, 8).targets == a.targets);
  CHECK(task.batch(1, 6, 8).inputs != a.inputs);
  CHECK(task.batch(2, 5, 8).inputs != a.inputs);
  CHECK(task.batch(1, 5, 8, Split::eval).inputs != a.inputs);

  MultiQueryRecallConfig blank_config = config(8, 8, 4, 16);
  blank_config.random_non_queries = false;
  const Batch blank = MultiQueryRecall(blank_config).batch(1, 5, 8);
  for (std::size_t s = 0; s < 8; ++s)
    for (std::size_t t = 8; t < 16; ++t)
      if (blank.targets(s, t) == -1) CHECK(blank.inputs(s, t) == 16);  // the blank token, K + V
}

TEST_CASE("mqar: power_a puts queries soon after the pairs (Zoology's power law); power_a 1 spreads them evenly") {
  auto first_slot_share = [](double power_a) {
    MultiQueryRecallConfig c = config(4, 4, 1, 2 + 2 * 10);  // one query, 10 gap slots
    c.power_a = power_a;
    const Batch b = MultiQueryRecall(c).batch(0, 0, 5000);
    std::size_t first = 0;
    for (std::size_t s = 0; s < 5000; ++s) first += b.targets(s, 2) != -1;
    return static_cast<double>(first) / 5000.0;
  };
  // p(g) ~ (g + 1)^(a - 1): a = 0.01 gives slot 0 a share of 1 / sum_{g=1..10} g^-0.99 = 0.34; a = 1 gives 0.1.
  CHECK(first_slot_share(0.01) == doctest::Approx(0.34).epsilon(0.1));
  CHECK(first_slot_share(1.0) == doctest::Approx(0.1).epsilon(0.15));
}

TEST_CASE("mqar: settings it cannot draw are refused, naming the flags and the allowed values") {
  CHECK_THROWS_WITH_AS(MultiQueryRecall(config(8, 8, 4, 15)),
                       "mqar: --seq-len (15) must be >= 4 x --n-pairs = 16 (the pairs take 2 x --n-pairs tokens and "
                       "the queries every other position after them): give --seq-len >= 16, or --n-pairs <= 3",
                       TaskError);
  CHECK_THROWS_WITH_AS(MultiQueryRecall(config(3, 8, 4, 16)),
                       "mqar: --n-keys (3) must be >= --n-pairs (4): keys are distinct within a sequence", TaskError);
  CHECK_THROWS_WITH_AS(MultiQueryRecall(config(8, 3, 4, 16)),
                       "mqar: --n-values (3) must be >= --n-pairs (4): values are distinct within a sequence",
                       TaskError);
  MultiQueryRecallConfig flat = config(8, 8, 4, 16);
  flat.power_a = 0.0;
  CHECK_THROWS_WITH_AS(MultiQueryRecall{flat}, doctest::Contains("--power-a must be in (0, 1]"), TaskError);
  // Through the registry, as the CLI builds it: the defaults build (n_pairs 4 fits seq_len 16).
  const auto task = make_task("mqar");
  CHECK(task->seq_len() == 16);
  CHECK(dynamic_cast<const MultiQueryRecall&>(*task).config().n_pairs == 4);
}

TEST_CASE("mqar: a two-layer model learns it, also at 4x the trained length; one layer does not get far") {
  auto run = [](std::size_t n_layers) {
    train::TrainConfig c = xgrad::testing::tiny_run(xgrad::testing::temp_dir("mqar").string(), 400);
    train::set_setting(c, "task", "mqar");
    c.model.n_layers = n_layers;
    c.model.d_model = 32;
    c.model.mlp = false;
    c.lr = 3e-3;
    c.log_every = 100;
    c.checkpoint_every = 0;
    c.eval_seq_len = "64";  // the query region 4x as long, its positions repeating the trained ones
    return train::train(c);
  };
  const train::RunSummary two = run(2), one = run(1);
  INFO("final accuracy: 2 layers " << two.final_accuracy << ", 1 layer " << one.final_accuracy << "; final loss "
                                   << two.final_loss << " / " << one.final_loss << " (chance ln 8 = 2.08)");
  CHECK(two.final_accuracy > 0.9);
  REQUIRE(two.length_eval.size() == 1);
  CHECK(two.length_eval[0].seq_len == 64);
  CHECK(two.length_eval[0].accuracy > 0.9);
  CHECK(one.final_accuracy < 0.6);
}
