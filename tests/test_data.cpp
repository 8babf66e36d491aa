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
  KeyValueRecall task({8, 8, 8});
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

TEST_CASE("kv_recall: answer_positions names the pair whose value is the target, in both encodings") {
  for (const auto encoding : {KeyValueEncoding::pair, KeyValueEncoding::sum}) {
    KeyValueRecall task({/*n_keys=*/10, /*n_values=*/6, /*n_pairs=*/5, encoding});
    const Batch b = task.batch(3, 1, 40);
    const auto answers = task.answer_positions(b);
    REQUIRE(answers.shape(0) == 40);
    REQUIRE(answers.shape(1) == 6);
    for (std::size_t s = 0; s < 40; ++s) {
      for (std::size_t i = 0; i < 5; ++i) CHECK(answers(s, i) == -1);  // no target, no key needed
      const auto at = answers(s, 5);
      REQUIRE(at >= 0);
      REQUIRE(at < 5);
      const auto pos = static_cast<std::size_t>(at);
      // The value stored at that pair is the target; its key is the query's key.
      const auto value = encoding == KeyValueEncoding::sum ? b.inputs(s, pos, 1) : b.inputs(s, pos) % 6;
      CHECK(value == b.targets(s, 5));
      if (encoding == KeyValueEncoding::sum)
        CHECK(b.inputs(s, pos, 0) == b.inputs(s, 5, 0));
      else
        CHECK(b.inputs(s, pos) / 6 == b.inputs(s, 5) - 60);
    }
  }
}

TEST_CASE("kv_recall: invalid settings throw with the setting's name") {
  CHECK_THROWS_WITH_AS(KeyValueRecall({4, 8, 5}), doctest::Contains("n_keys"), TaskError);
  CHECK_THROWS_WITH_AS(KeyValueRecall({8, 1, 4}), doctest::Contains("n_values"), TaskError);
  CHECK_THROWS_WITH_AS(KeyValueRecall({8, 8, 0}), doctest::Contains("n_pairs"), TaskError);
}

// ---------------------------------------------------------------------------------------------------------------
// The task suite: every task through the factory, then each task's answer recomputed from its inputs.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>

#include "data/char_lm.h"
#include "data/induction.h"
#include "data/majority.h"
#include "data/registry.h"
#include "data/sequence_transform.h"
#include "tests/support/task_options.h"

namespace {

using xgrad::testing::make_task;
using xgrad::testing::TaskOptions;

/// A file in the temp directory that exists for the lifetime of the object.
struct TempFile {
  std::filesystem::path path;
  TempFile(const std::string& stem, const std::string& content)
      : path(std::filesystem::temp_directory_path() /
             ("xgrad_test_" + stem + "_" + std::to_string(::getpid()) + ".txt")) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

/// Numbered lines with multi-byte UTF-8 characters, so that bytes >= 128 occur.
std::string sample_text(std::size_t lines) {
  std::string text;
  for (std::size_t i = 0; i < lines; ++i) text += "line " + std::to_string(i) + ": héllo wörld λ → ✓\n";
  return text;
}

std::vector<std::int64_t> row(const xt::xarray<std::int64_t>& a, std::size_t s) {
  std::vector<std::int64_t> r(a.shape(1));
  for (std::size_t t = 0; t < r.size(); ++t) r[t] = a(s, t);
  return r;
}

/// What every task promises: shapes, ranges, purity in (seed, index, split), and eval batches unlike train batches.
void check_task_contract(const Task& task) {
  INFO("task " << task.name());
  const std::size_t B = 16, T = task.seq_len();
  const auto V = static_cast<std::int64_t>(task.vocab_size());
  CHECK(std::isfinite(task.chance_loss()));
  CHECK(task.chance_loss() > 0);
  CHECK(task.chance_loss() <= std::log(static_cast<double>(task.vocab_size())) + 1e-12);
  for (Split split : {Split::train, Split::eval}) {
    const Batch b = task.batch(11, 3, B, split);
    REQUIRE(b.inputs.dimension() == 2);
    REQUIRE(b.inputs.shape(0) == B);
    REQUIRE(b.inputs.shape(1) == T);
    REQUIRE(b.targets.shape() == b.inputs.shape());
    for (std::size_t s = 0; s < B; ++s) {
      std::size_t with_loss = 0;
      for (std::size_t t = 0; t < T; ++t) {
        CHECK(b.inputs(s, t) >= 0);
        CHECK(b.inputs(s, t) < V);
        CHECK(b.targets(s, t) >= -1);
        CHECK(b.targets(s, t) < V);
        with_loss += b.targets(s, t) != -1;
      }
      CHECK(with_loss >= 1);  // every sequence asks something
    }
    const Batch again = task.batch(11, 3, B, split);
    CHECK(again.inputs == b.inputs);
    CHECK(again.targets == b.targets);
    task.batch(11, 4, B, split);  // drawing another batch in between changes nothing
    CHECK(task.batch(11, 3, B, split).inputs == b.inputs);
    CHECK(task.batch(11, 4, B, split).inputs != b.inputs);
    CHECK(task.batch(12, 3, B, split).inputs != b.inputs);
  }
  CHECK(task.batch(11, 3, B).inputs == task.batch(11, 3, B, Split::train).inputs);  // train is the default
  CHECK(task.batch(11, 3, B, Split::eval).inputs != task.batch(11, 3, B, Split::train).inputs);
  CHECK(task.batch(11, 0, 0).inputs.size() == 0);
}

TaskOptions options_for(const std::string& name) {
  TaskOptions options;
  options.name = name;
  return options;
}

}  // namespace

TEST_CASE("task suite: every named task keeps the Task contract") {
  const TempFile text("contract", sample_text(200));
  CHECK(TaskRegistry::instance().names() == std::vector<std::string>{"kv_recall", "copy", "reverse", "sort", "majority",
                                                                     "induction", "mqar", "char_lm", "data"});
  for (const std::string& name : TaskRegistry::instance().names()) {
    if (name == "data") continue;  // user files, read in order whatever the seed: tested in test_npy_task.cpp
    TaskOptions options = options_for(name);
    options.text_path = text.path.string();
    if (name == "mqar") options.n_pairs = 4;  // its pairs and queries fill 4 x n_pairs positions of seq_len 16
    const std::unique_ptr<Task> task = make_task(options);
    REQUIRE(task != nullptr);
    CHECK(task->name() == name);
    check_task_contract(*task);
  }
}

TEST_CASE("make_task: passes each task its own settings") {
  TaskOptions options = options_for("kv_recall");
  options.n_keys = 10;
  options.n_values = 6;
  options.n_pairs = 5;
  auto kv = make_task(options);
  CHECK(kv->seq_len() == 6);
  CHECK(kv->vocab_size() == 70);
  CHECK(kv->chance_loss() == doctest::Approx(std::log(6.0)));

  options.seq_len = 20;
  options.n_symbols = 5;
  for (const char* name : {"copy", "reverse", "sort"}) {
    options.name = name;
    auto task = make_task(options);
    CHECK(task->seq_len() == 20);
    CHECK(task->vocab_size() == 6);  // the symbols and the separator
    CHECK(task->chance_loss() == doctest::Approx(std::log(5.0)));
  }
  options.name = "majority";
  CHECK(make_task(options)->vocab_size() == 5);
  CHECK(make_task(options)->chance_loss() == doctest::Approx(std::log(5.0)));
  options.name = "induction";
  CHECK(make_task(options)->vocab_size() == 5);
  CHECK(make_task(options)->chance_loss() == doctest::Approx(std::log(4.0)));

  const TempFile text("settings", sample_text(100));
  options.name = "char_lm";
  options.text_path = text.path.string();
  auto lm = make_task(options);
  CHECK(lm->seq_len() == 20);
  CHECK(lm->vocab_size() == 256);
  CHECK(lm->chance_loss() == doctest::Approx(std::log(256.0)));
}

TEST_CASE("make_task: unknown names and out-of-range settings throw, naming the setting and its range") {
  CHECK_THROWS_WITH_AS(
      make_task(options_for("copyy")),
      "task 'copyy' is unknown (allowed: kv_recall, copy, reverse, sort, majority, induction, mqar, char_lm, data)",
      TaskError);
  CHECK_THROWS_AS(make_task(options_for("")), TaskError);

  auto with = [](const std::string& name, std::size_t seq_len, std::size_t n_symbols) {
    TaskOptions options = options_for(name);
    options.seq_len = seq_len;
    options.n_symbols = n_symbols;
    return options;
  };
  for (const char* name : {"copy", "reverse", "sort"}) {
    INFO(name);
    CHECK_THROWS_WITH_AS(make_task(with(name, 7, 8)), doctest::Contains("seq_len must be even and in [4, 65536]"),
                         TaskError);
    CHECK_THROWS_WITH_AS(make_task(with(name, 2, 8)), doctest::Contains("seq_len"), TaskError);
    CHECK_THROWS_WITH_AS(make_task(with(name, 65538, 8)), doctest::Contains("seq_len"), TaskError);
    CHECK_THROWS_WITH_AS(make_task(with(name, 8, 1)), doctest::Contains("n_symbols must be in [2, 4096], got 1"),
                         TaskError);
    CHECK_THROWS_WITH_AS(make_task(with(name, 8, 4097)), doctest::Contains("n_symbols"), TaskError);
    CHECK_NOTHROW(make_task(with(name, 4, 2)));
  }
  CHECK_THROWS_WITH_AS(make_task(with("majority", 0, 2)), "majority: seq_len must be in [1, 65536], got 0", TaskError);
  CHECK_THROWS_WITH_AS(make_task(with("majority", 9, 65)), "majority: n_symbols must be in [2, 64], got 65", TaskError);
  CHECK_THROWS_WITH_AS(make_task(with("majority", 9, 1)), doctest::Contains("n_symbols"), TaskError);
  CHECK_NOTHROW(make_task(with("majority", 1, 64)));
  CHECK_THROWS_WITH_AS(make_task(with("induction", 2, 8)), "induction: seq_len must be in [3, 65536], got 2",
                       TaskError);
  CHECK_THROWS_WITH_AS(make_task(with("induction", 8, 2)), "induction: n_symbols must be in [3, 4096], got 2",
                       TaskError);
  CHECK_NOTHROW(make_task(with("induction", 3, 3)));

  TaskOptions kv = options_for("kv_recall");
  kv.n_values = 1;
  CHECK_THROWS_WITH_AS(make_task(kv), "kv_recall: n_values must be in [2, 4096], got 1", TaskError);
  kv = options_for("kv_recall");
  kv.n_keys = 5000;
  CHECK_THROWS_WITH_AS(make_task(kv), doctest::Contains("n_keys must be in [1, 4096]"), TaskError);
}

namespace {

/// Checks the copy/reverse/sort layout and that the targets are `expected(x)`.
template <class Expected>
void check_sequence_transform(const Task& task, std::size_t n_symbols, Expected expected) {
  const std::size_t T = task.seq_len(), n = T / 2;
  const auto separator = static_cast<std::int64_t>(n_symbols);
  for (Split split : {Split::train, Split::eval}) {
    const Batch b = task.batch(5, 2, 64, split);
    for (std::size_t s = 0; s < 64; ++s) {
      const std::vector<std::int64_t> in = row(b.inputs, s), target = row(b.targets, s);
      const std::vector<std::int64_t> x(in.begin(), in.begin() + n);
      for (std::int64_t symbol : x) CHECK(symbol < separator);
      const std::vector<std::int64_t> y = expected(x);
      for (std::size_t i = 0; i < n; ++i) CHECK(target[i] == -1);
      CHECK(in[n] == separator);
      for (std::size_t i = 0; i < n; ++i) CHECK(target[n + i] == y[i]);
      for (std::size_t i = 0; i + 1 < n; ++i) CHECK(in[n + 1 + i] == y[i]);  // teacher forcing: answer so far
    }
  }
}

}  // namespace

TEST_CASE("copy, reverse, sort: the second half is the first half copied, reversed, sorted") {
  const SymbolSequenceConfig config{14, 5};
  check_sequence_transform(CopySequence(config), 5, [](std::vector<std::int64_t> x) { return x; });
  check_sequence_transform(ReverseSequence(config), 5, [](std::vector<std::int64_t> x) {
    std::reverse(x.begin(), x.end());
    return x;
  });
  check_sequence_transform(SortSequence(config), 5, [](std::vector<std::int64_t> x) {
    std::sort(x.begin(), x.end());
    return x;
  });
}

TEST_CASE("copy: every symbol occurs at every position with about equal frequency") {
  const Batch b = CopySequence({8, 4}).batch(0, 0, 4000);
  for (std::size_t t = 0; t < 4; ++t) {
    std::vector<int> count(4, 0);
    for (std::size_t s = 0; s < 4000; ++s) count[static_cast<std::size_t>(b.inputs(s, t))]++;
    for (int c : count) CHECK(c == doctest::Approx(1000).epsilon(0.15));
  }
}

/// Calls check(b, s, T) for every sequence s of the batch (seed, index, n) of a Task built from each config, in
/// both splits; T is the config's seq_len.
template <class Task, class Check>
static void for_each_sequence(std::initializer_list<SymbolSequenceConfig> configs, std::uint64_t seed,
                              std::uint64_t index, std::size_t n, const Check& check) {
  for (const SymbolSequenceConfig config : configs) {
    INFO("seq_len " << config.seq_len << ", n_symbols " << config.n_symbols);
    const Task task(config);
    for (Split split : {Split::train, Split::eval}) {
      const Batch b = task.batch(seed, index, n, split);
      for (std::size_t s = 0; s < n; ++s) check(b, s, config.seq_len);
    }
  }
}

TEST_CASE("majority: the target at the last position is the unique most frequent symbol") {
  const auto configs = {SymbolSequenceConfig{9, 2}, SymbolSequenceConfig{8, 4}, SymbolSequenceConfig{3, 64},
                        SymbolSequenceConfig{1, 3}};
  for_each_sequence<Majority>(configs, 3, 1, 200, [](const Batch& b, std::size_t s, std::size_t T) {
    std::map<std::int64_t, std::size_t> count;
    for (std::size_t t = 0; t < T; ++t) count[b.inputs(s, t)]++;
    std::size_t best = 0, n_best = 0;
    std::int64_t winner = -1;
    for (const auto& [symbol, c] : count) {
      if (c > best) best = c, n_best = 0, winner = symbol;
      n_best += c == best;
    }
    CHECK(n_best == 1);  // ties are redrawn
    for (std::size_t t = 0; t + 1 < T; ++t) CHECK(b.targets(s, t) == -1);
    CHECK(b.targets(s, T - 1) == winner);
  });
}

TEST_CASE("majority: every symbol wins about equally often") {
  const Batch b = Majority({7, 3}).batch(0, 0, 3000);
  std::vector<int> wins(3, 0);
  for (std::size_t s = 0; s < 3000; ++s) wins[static_cast<std::size_t>(b.targets(s, 6))]++;
  for (int w : wins) CHECK(w == doctest::Approx(1000).epsilon(0.15));
}

TEST_CASE("induction: the final token occurs once before, and the target is the token that followed it") {
  const auto configs = {SymbolSequenceConfig{12, 6}, SymbolSequenceConfig{3, 3}};
  for_each_sequence<InductionHeads>(configs, 9, 4, 300, [](const Batch& b, std::size_t s, std::size_t T) {
    const std::int64_t a = b.inputs(s, T - 1);
    std::vector<std::size_t> earlier;
    for (std::size_t t = 0; t + 1 < T; ++t)
      if (b.inputs(s, t) == a) earlier.push_back(t);
    REQUIRE(earlier.size() == 1);
    REQUIRE(earlier[0] + 2 < T);  // B lies before the final A
    const std::int64_t expected = b.inputs(s, earlier[0] + 1);
    CHECK(expected != a);
    for (std::size_t t = 0; t + 1 < T; ++t) CHECK(b.targets(s, t) == -1);
    CHECK(b.targets(s, T - 1) == expected);
  });
}

TEST_CASE("induction: the first A is equally likely at every possible position") {
  const std::size_t T = 10;
  const Batch b = InductionHeads({T, 8}).batch(1, 0, 4000);
  std::vector<int> at(T - 2, 0);
  for (std::size_t s = 0; s < 4000; ++s)
    for (std::size_t t = 0; t + 2 < T; ++t)
      if (b.inputs(s, t) == b.inputs(s, T - 1)) at[t]++;
  for (int c : at) CHECK(c == doctest::Approx(500).epsilon(0.15));
}

TEST_CASE("char_lm: windows of the file, the next byte as target, the last 10% held out") {
  const std::string text = sample_text(120);
  const TempFile file("windows", text);
  const std::size_t T = 24;
  const CharLM task({file.path.string(), T});
  CHECK(task.vocab_size() == 256);
  CHECK(task.seq_len() == T);
  CHECK(task.chance_loss() == doctest::Approx(std::log(256.0)));
  REQUIRE(task.bytes().size() == text.size());
  CHECK(task.eval_begin() == text.size() - text.size() / 10);
  const std::string train_part = text.substr(0, task.eval_begin()), eval_part = text.substr(task.eval_begin());

  bool saw_multibyte = false;
  for (Split split : {Split::train, Split::eval}) {
    const std::string& part = split == Split::train ? train_part : eval_part;
    const Batch b = task.batch(4, 7, 100, split);
    for (std::size_t s = 0; s < 100; ++s) {
      std::string window;
      for (std::size_t t = 0; t < T; ++t) {
        REQUIRE(b.inputs(s, t) >= 0);
        REQUIRE(b.inputs(s, t) < 256);
        saw_multibyte |= b.inputs(s, t) >= 128;
        window += static_cast<char>(static_cast<unsigned char>(b.inputs(s, t)));
        if (t + 1 < T) CHECK(b.targets(s, t) == b.inputs(s, t + 1));
      }
      window += static_cast<char>(static_cast<unsigned char>(b.targets(s, T - 1)));
      CHECK(part.find(window) != std::string::npos);  // the whole window lies inside its split
    }
  }
  CHECK(saw_multibyte);  // UTF-8 bytes >= 128 are tokens 128..255, not negative chars
}

TEST_CASE("char_lm: window starts cover the split, ends included") {
  // 330 bytes, T = 32: the eval split is the last 33 bytes, exactly one window; the train split has 265 starts.
  std::string text(330, 'a');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  const TempFile file("ends", text);
  const CharLM task({file.path.string(), 32});
  REQUIRE(task.eval_begin() == 297);
  const Batch eval = task.batch(0, 0, 50, Split::eval);
  for (std::size_t s = 0; s < 50; ++s) CHECK(eval.inputs(s, 0) == static_cast<std::int64_t>(text[297]));
  const Batch train = task.batch(0, 0, 4000, Split::train);
  std::set<std::int64_t> first;
  for (std::size_t s = 0; s < 4000; ++s) first.insert(train.inputs(s, 0));
  CHECK(first.size() == 26);
}

TEST_CASE("char_lm: missing, unreadable and too short files throw, naming the path") {
  const std::string missing = (std::filesystem::temp_directory_path() / "xgrad_test_no_such_file.txt").string();
  CHECK_THROWS_WITH_AS(CharLM({missing, 8}), doctest::Contains(("'" + missing + "' does not exist").c_str()),
                       TaskError);
  const std::string directory = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH_AS(CharLM({directory, 8}), doctest::Contains(("'" + directory + "' is a directory").c_str()),
                       TaskError);
  CHECK_THROWS_WITH_AS(CharLM({"", 8}), doctest::Contains("char_lm: --text is required"), TaskError);

  const TempFile text("short", sample_text(40));
  CHECK_THROWS_WITH_AS(CharLM({text.path.string(), 0}), "char_lm: seq_len must be in [1, 65536], got 0", TaskError);
  // Both splits need seq_len + 1 bytes, so the file needs 10 (seq_len + 1): the eval split is the short one.
  const std::string exact(10 * 9, 'x'), one_short(10 * 9 - 1, 'x');
  const TempFile exact_file("exact", exact), short_file("one_short", one_short), empty_file("empty", "");
  CHECK_NOTHROW(CharLM({exact_file.path.string(), 8}));
  CHECK_THROWS_WITH_AS(CharLM({short_file.path.string(), 8}),
                       doctest::Contains(("'" + short_file.path.string() + "' is too short for --seq-len 8").c_str()),
                       TaskError);
  CHECK_THROWS_WITH_AS(CharLM({empty_file.path.string(), 8}), doctest::Contains("too short"), TaskError);

  TaskOptions options = options_for("char_lm");
  options.text_path = missing;
  CHECK_THROWS_WITH_AS(make_task(options), doctest::Contains(missing.c_str()), TaskError);
}

TEST_CASE("kv_recall: eval batches pose the same kind of question as train batches") {
  KeyValueRecall task({10, 6, 5});
  const Batch b = task.batch(7, 3, 50, Split::eval);
  for (std::size_t s = 0; s < 50; ++s) {
    const auto key = b.inputs(s, 5) - 60;
    std::int64_t expected = -1;
    for (std::size_t i = 0; i < 5; ++i)
      if (b.inputs(s, i) / 6 == key) expected = b.inputs(s, i) % 6;
    CHECK(b.targets(s, 5) == expected);
  }
}
