// lookback: seq_len symbols drawn uniformly from [0, n_symbols); the target at position i is the symbol
// lookback_distance positions earlier. The answer depends on position only, never on content, so a model must learn
// one sharp positional attention pattern per offset (the "previous token head" of Olsson et al. 2022, "In-context
// Learning and Induction Heads", sec. 2, for lookback_distance = 1).
// The whole extension is this file: the static registration below adds it to --task, its settings to the flags and
// config.json, and makes it sweepable.
#include <cmath>
#include <memory>

#include "autograd/random.h"
#include "data/registry.h"
#include "data/settings.h"

namespace {

using namespace xgrad::data;

class Lookback : public Task {
 public:
  Lookback(std::size_t seq_len, std::size_t n_symbols, std::size_t distance)
      : seq_len_(seq_len), n_symbols_(n_symbols), distance_(distance) {
    check_setting("lookback", "lookback_distance", distance, 1, seq_len - 1);
  }
  std::string name() const override { return "lookback"; }
  std::size_t vocab_size() const override { return n_symbols_; }
  std::size_t seq_len() const override { return seq_len_; }
  double chance_loss() const override { return std::log(static_cast<double>(n_symbols_)); }

 private:
  Batch make_batch(std::uint64_t seed, std::uint64_t index, std::size_t batch_size, Split split) const override {
    Batch b;
    b.inputs = xt::xarray<std::int64_t>::from_shape({batch_size, seq_len_});
    b.targets = xt::xarray<std::int64_t>::from_shape({batch_size, seq_len_});
    b.targets.fill(-1);  // the first lookback_distance positions have nothing to look back to
    xgrad::Generator rng(seed, split_stream(0x6c6b /* "lk" */, split), index);
    for (std::size_t s = 0; s < batch_size; ++s)
      for (std::size_t i = 0; i < seq_len_; ++i) {
        b.inputs(s, i) = static_cast<std::int64_t>(rng.uniform(n_symbols_));
        if (i >= distance_) b.targets(s, i) = b.inputs(s, i - distance_);
      }
    return b;
  }

  std::size_t seq_len_, n_symbols_, distance_;
};

TaskEntry lookback_entry() {
  TaskEntry e;
  e.name = "lookback";
  e.description = "lookback: answer the symbol lookback_distance positions earlier (a previous-token head)";
  e.order = 1000;
  e.settings = {seq_len_setting(), n_symbols_setting(),
                xgrad::whole_setting("lookback_distance", 1, 1, kMaxSeqLen, "how many positions back the answer is")};
  e.build = [](const xgrad::SettingValues& v) -> std::unique_ptr<Task> {
    return std::make_unique<Lookback>(v.get<std::size_t>("seq_len"), v.get<std::size_t>("n_symbols"),
                                      v.get<std::size_t>("lookback_distance"));
  };
  return e;
}

const xgrad::Registration<TaskEntry> registration{lookback_entry()};

}  // namespace
