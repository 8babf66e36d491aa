// lookback through xgrad's task registry: targets are the inputs lookback_distance positions earlier, batches are a
// function of (seed, index, split), and a distance the sequence cannot hold is refused naming the setting.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "data/registry.h"

using namespace xgrad;

TEST_CASE("lookback: the target at i is the input at i - lookback_distance") {
  const SettingValues settings(nlohmann::json{{"seq_len", 12}, {"n_symbols", 5}, {"lookback_distance", 3}});
  const auto task = data::make_task("lookback", settings);
  CHECK(task->vocab_size() == 5);
  CHECK(task->seq_len() == 12);
  CHECK(task->chance_loss() == doctest::Approx(std::log(5.0)));
  const data::Batch b = task->batch(1, 0, 4);
  for (std::size_t s = 0; s < 4; ++s)
    for (std::size_t i = 0; i < 12; ++i) {
      CHECK(b.inputs(s, i) >= 0);
      CHECK(b.inputs(s, i) < 5);
      CHECK(b.targets(s, i) == (i < 3 ? -1 : b.inputs(s, i - 3)));
    }
  CHECK(task->batch(1, 0, 4).inputs == b.inputs);
  CHECK(task->batch(1, 1, 4).inputs != b.inputs);
  CHECK(task->batch(1, 0, 4, data::Split::eval).inputs != b.inputs);
}

TEST_CASE("lookback: a distance of seq_len or more is refused naming lookback_distance") {
  const SettingValues settings(nlohmann::json{{"seq_len", 8}, {"lookback_distance", 8}});
  CHECK_THROWS_WITH_AS(data::make_task("lookback", settings), "lookback: lookback_distance must be in [1, 7], got 8",
                       data::TaskError);
}
