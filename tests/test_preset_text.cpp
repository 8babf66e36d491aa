// `xgrad experiment --preset text --quick` through the real executable (label preset_quick), on a text of this
// repository's own documentation: the grid it promises (d_k 16 and 64 as n_heads 4 and 1 at d_model 64, and as d_model
// 16 and 64 at one head; none and sqrt_dk; nanoGPT's training settings), each arm's held-out loss in the table as the
// runs' metrics.csv hold it, the verdict counts from those numbers, and each arm's sample equal to `xgrad sample`'s.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <doctest/doctest.h>

#include "common/escape.h"
#include "report/preset_report.h"
#include "tests/support/paths.h"
#include "tests/support/preset_run.h"
#include "tests/support/temp_dir.h"

using xgrad::testing::TempDir;

namespace {

// The last finite eval_loss of a run's metrics.csv.
double final_eval_loss(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "metrics.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::size_t start = 0, comma; start <= line.size(); start = comma + 1) {
    comma = line.find(',', start);
    if (comma == std::string::npos) comma = line.size();
    header.push_back(line.substr(start, comma - start));
  }
  const auto column = static_cast<std::size_t>(std::find(header.begin(), header.end(), "eval_loss") - header.begin());
  REQUIRE(column < header.size());
  double last = NAN;
  while (std::getline(in, line)) {
    std::size_t start = 0;
    for (std::size_t k = 0; k < column; ++k) start = line.find(',', start) + 1;
    const double v = std::strtod(line.c_str() + start, nullptr);
    if (std::isfinite(v)) last = v;
  }
  return last;
}

std::string three_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

TEST_CASE("preset text --quick: d_k 16 and 64 two ways, none vs sqrt_dk; held-out loss, verdicts and samples") {
  TempDir tmp("preset_text");
  const std::string text = xgrad::testing::write_docs_text(tmp.path());
  const auto run = xgrad::testing::run_preset("text", tmp / "text", "--text " + text);
  xgrad::testing::check_preset_run(run, "text", 6);
  const std::string section = xgrad::testing::required_section(run.report, "text");
  const std::string samples = xgrad::testing::required_section(run.report, "text-samples");
  // (d_model, n_heads) -> scale -> held-out loss
  std::map<std::pair<int, int>, std::map<std::string, double>> loss;
  for (const auto& r : run.sweep.at("runs")) {
    const auto& config = r.at("config");
    CHECK(config.at("task") == "char_lm");
    CHECK(config.at("seq_len") == 64);
    CHECK(config.at("batch_size") == 12);
    CHECK(config.at("lr_schedule") == "cosine");
    CHECK(config.at("beta2") == doctest::Approx(0.99));
    CHECK(config.at("weight_decay_params") == "matrices");
    CHECK(config.at("tie_word_embeddings") == true);
    CHECK(config.at("bias") == false);
    const int d_model = config.at("d_model"), n_heads = config.at("n_heads"), d_k = r.at("d_k");
    CHECK(n_heads * d_k == d_model);
    CHECK((d_model == 64 || n_heads == 1));
    const std::filesystem::path dir = run.dir / r.at("dir").get<std::string>();
    const double eval = final_eval_loss(dir);
    REQUIRE(std::isfinite(eval));
    loss[{d_model, n_heads}][r.at("scale").get<std::string>()] = eval;
    // The table row of this arm holds its held-out loss (one seed: the value itself, 3 decimals).
    const std::string row_start = "| " + std::to_string(d_model) + " | " + std::to_string(n_heads) + " | " +
                                  std::to_string(d_k) + " | " +
                                  xgrad::report::markdown_text(r.at("scale").get<std::string>(), true) + " | 1 | ";
    CHECK(section.find(row_start + three_decimals(eval) + " |") != std::string::npos);
    // Its sample is what `xgrad sample` writes with the options the section states.
    const auto sampled =
        xgrad::testing::run_xgrad({"sample", dir.string(), "--tokens", "300", "--temperature", "0.8", "--seed", "0"});
    REQUIRE(sampled.exit_code == 0);
    INFO(sampled.out);
    CHECK(samples.find("(run " + dir.filename().string() + ")") != std::string::npos);
    // The sample shows control bytes but newline and tab as \xNN.
    std::string shown;
    for (char ch : sampled.out) {
      const auto u = static_cast<unsigned char>(ch);
      const bool control = (u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f;
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", u);
      shown += control ? std::string(escaped) : std::string(1, ch);
    }
    // And, as all of report.md, with tabs and C1 controls escaped for the terminal that may show it.
    CHECK(samples.find(xgrad::escape_control(shown, true)) != std::string::npos);
  }
  REQUIRE(loss.size() == 3);
  // The verdict counts follow from the held-out losses: lower by more than 2% of the larger.
  std::size_t scaled = 0, unscaled = 0, same = 0;
  for (const auto& [model, by_scale] : loss) {
    const double s = by_scale.at("sqrt_dk"), n = by_scale.at("none"), tol = 0.02 * std::max(s, n);
    (s < n - tol ? scaled : s > n + tol ? unscaled : same) += 1;
  }
  const std::string counts = xgrad::report::preset_text(
      "text.counts", {{"better", scaled}, {"n", 3}, {"worse", unscaled}, {"same", same}, {"not_decided", "@"}});
  CHECK(section.find(counts.substr(0, counts.find('@'))) != std::string::npos);
  xgrad::testing::check_figure(run, "text_eval_loss_vs_d_k");
  // Every arm learned something of the text: below the uniform guess over bytes, ln 256 = 5.55 nats.
  for (const auto& [model, by_scale] : loss)
    for (const auto& [scale, value] : by_scale) CHECK(value < 4.0);
}
