// Key-value recall: the batch is a pure function of (seed, index), and every sequence poses a well-defined question.
#include <doctest/doctest.h>

#include <set>

#include "data/kv_recall.h"

using namespace xgrad::data;

TEST_CASE("kv_recall: sizes, token ranges, distinct keys, and a target that answers the query") {
  KeyValueRecall task({/*n_keys=*/10, /*n_values=*/6, /*n_pairs=*/5});
  CHECK(task.seq_len() == 6);
  CHECK(task.vocab_size() == 10 * 6 + 10);
  CHECK(task.chance_loss() == doctest::Approx(std::log(6.0)));
  const Batch b = task.batch(7, 3, 50);
  REQUIRE(b.inputs.shape(0) == 50);
  REQUIRE(b.inputs.shape(1) == 6);
  for (std::size_t s = 0; s < 50; ++s) {
    std::set<std::int64_t> keys;
    for (std::size_t i = 0; i < 5; ++i) {
      const auto tok = b.inputs(s, i);
      REQUIRE(tok >= 0);
      REQUIRE(tok < 60);
      keys.insert(tok / 6);
      CHECK(b.targets(s, i) == -1);  // no loss on context positions
    }
    CHECK(keys.size() == 5);  // keys distinct within a sequence
    const auto query = b.inputs(s, 5);
    REQUIRE(query >= 60);
    REQUIRE(query < 70);
    const auto key = query - 60;
    CHECK(keys.count(key) == 1);  // the queried key is present
    std::int64_t expected = -1;
    for (std::size_t i = 0; i < 5; ++i)
      if (b.inputs(s, i) / 6 == key) expected = b.inputs(s, i) % 6;
    CHECK(b.targets(s, 5) == expected);
  }
}

TEST_CASE("kv_recall: batch i depends only on (seed, i)") {
  KeyValueRecall task({});
  const Batch a = task.batch(1, 5, 8), b = task.batch(1, 5, 8);
  CHECK(a.inputs == b.inputs);
  CHECK(a.targets == b.targets);
  task.batch(1, 4, 8);  // drawing another batch in between changes nothing
  CHECK(task.batch(1, 5, 8).inputs == a.inputs);
  CHECK(task.batch(1, 6, 8).inputs != a.inputs);
  CHECK(task.batch(2, 5, 8).inputs != a.inputs);
}

TEST_CASE("kv_recall: query positions and answers are spread uniformly enough to rule out shortcuts") {
  KeyValueRecall task({8, 8, 8});
  const Batch b = task.batch(0, 0, 4000);
  std::vector<int> answer_count(8, 0);
  for (std::size_t s = 0; s < 4000; ++s) answer_count[static_cast<std::size_t>(b.targets(s, 8))]++;
  for (int c : answer_count) CHECK(c == doctest::Approx(500).epsilon(0.15));
}

TEST_CASE("kv_recall: invalid settings throw with the setting's name") {
  CHECK_THROWS_WITH_AS(KeyValueRecall({4, 8, 5}), doctest::Contains("n_keys"), TaskError);
  CHECK_THROWS_WITH_AS(KeyValueRecall({8, 1, 4}), doctest::Contains("n_values"), TaskError);
  CHECK_THROWS_WITH_AS(KeyValueRecall({8, 8, 0}), doctest::Contains("n_pairs"), TaskError);
}
