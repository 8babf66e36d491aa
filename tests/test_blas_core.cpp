// OpenBLAS kernel families agree: a training step's values and gradients computed with OPENBLAS_CORETYPE=Prescott
// (SSE3), Haswell (AVX2) and SkylakeX (AVX-512) match within float tolerance. train/environment.cpp re-executes
// xgrad with a faster core than the one Debian's OpenBLAS detects, so results must not depend on the choice.
//
// The core is read when the library loads, so each one runs in a child process: this binary re-executed with
// OPENBLAS_CORETYPE set and only the "child" test case selected, which writes its results to a file. Cores the CPU
// cannot run are skipped.
#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/blas.h"
#include "autograd/ops.h"
#include "nn/model.h"
#include "tests/support/process.h"

using namespace xgrad;
using namespace xgrad::testing;

namespace {

const char* kOutputVariable = "XGRAD_TEST_BLAS_CORE_OUT";

// Logits, loss and every parameter gradient of one step of a model big enough that OpenBLAS takes its blocked GEMM
// kernels (the projections are [512, 128] @ [128, 128], above the small-matrix path) as well as small ones.
std::vector<std::vector<float>> training_step_results() {
  nn::ModelConfig c;
  c.vocab_size = 32;
  c.max_seq_len = 32;
  c.d_model = 128;
  c.n_heads = 4;
  nn::AttentionModel model(c, 7);
  Generator gen(7, 1);
  index_array tokens = index_array::from_shape({16, 32}), targets = index_array::from_shape({16, 32});
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens.data()[i] = static_cast<std::int64_t>(gen.uniform(32));
  for (std::size_t i = 0; i < targets.size(); ++i) targets.data()[i] = static_cast<std::int64_t>(gen.uniform(32));
  Tensor logits = model.forward(tokens);
  Tensor loss = cross_entropy(logits, targets);
  loss.backward();
  std::vector<std::vector<float>> out;
  out.emplace_back(logits.value().begin(), logits.value().end());
  out.push_back({loss.item()});
  for (const auto& p : model.parameters()) out.emplace_back(p.grad().begin(), p.grad().end());
  return out;
}

struct ChildResult {
  std::string core;  // what openblas_get_corename() said in the child
  std::vector<std::vector<float>> tensors;
};

// Runs the child test case with OPENBLAS_CORETYPE=core; false if the child failed.
bool run_child(const std::string& core, ChildResult& result) {
  const std::string path = "/tmp/xgrad_test_blas_core_" + std::to_string(getpid()) + "_" + core;
  ProcessOptions options;
  options.environment = {{"OPENBLAS_CORETYPE", core}, {kOutputVariable, path}};
  const ProcessResult child =
      run_process({"/proc/self/exe", "--test-case=blas core child*", "--minimal"}, options);  // this executable
  std::cerr << child.err;  // doctest's summary of the child (stdout) is dropped; its failures are shown
  if (child.exit_code != 0) return false;
  std::ifstream in(path, std::ios::binary);
  std::getline(in, result.core);
  std::size_t count = 0;
  while (in.read(reinterpret_cast<char*>(&count), sizeof count)) {
    std::vector<float> t(count);
    in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(count * sizeof(float)));
    result.tensors.push_back(std::move(t));
  }
  std::remove(path.c_str());
  return true;
}

bool cpu_runs(const std::string& core) {
  __builtin_cpu_init();
  if (core == "Haswell") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (core == "SkylakeX")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return true;  // Prescott: SSE3, every x86-64 CPU xgrad runs on
}

}  // namespace

TEST_CASE("blas core child: writes a training step's results computed with the inherited OPENBLAS_CORETYPE") {
  const char* path = std::getenv(kOutputVariable);
  if (!path) return;  // only meaningful when the test below re-executes this binary
  std::ofstream out(path, std::ios::binary);
  out << blas::core_name() << "\n";
  for (const auto& t : training_step_results()) {
    const std::size_t count = t.size();
    out.write(reinterpret_cast<const char*>(&count), sizeof count);
    out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(count * sizeof(float)));
  }
  REQUIRE(out.good());
}

TEST_CASE("OpenBLAS cores Prescott, Haswell and SkylakeX give the same training step within float tolerance") {
  if (std::getenv(kOutputVariable)) return;  // inside a child
  ChildResult reference;
  REQUIRE(run_child("Prescott", reference));
  if (reference.core != "Prescott") {
    MESSAGE("OPENBLAS_CORETYPE is ignored by this OpenBLAS (not a DYNAMIC_ARCH build; it ran "
            << reference.core << "): nothing to compare");
    return;
  }
  REQUIRE(reference.tensors.size() >= 3);
  for (const std::string core : {"Haswell", "SkylakeX"}) {
    if (!cpu_runs(core)) {
      MESSAGE("skipping " << core << ": this CPU cannot run its kernels");
      continue;
    }
    ChildResult r;
    REQUIRE(run_child(core, r));
    CHECK(r.core == core);
    REQUIRE(r.tensors.size() == reference.tensors.size());
    for (std::size_t i = 0; i < r.tensors.size(); ++i) {
      const auto& a = r.tensors[i];
      const auto& b = reference.tensors[i];
      REQUIRE(a.size() == b.size());
      // Tolerance on the tensor's scale: another core sums in another order (and fuses multiply-adds), which moves
      // float results by a few ulp of the largest terms, not by a fraction of a value.
      double scale = 0, worst = 0;
      for (std::size_t j = 0; j < a.size(); ++j) {
        scale = std::max(scale, std::abs(static_cast<double>(b[j])));
        worst = std::max(worst, std::abs(static_cast<double>(a[j]) - b[j]));
      }
      INFO(core << " vs Prescott, result " << i << " (0 logits, 1 loss, then parameter gradients): max difference "
                << worst << " at scale " << scale);
      CHECK(worst <= 1e-4 * scale + 1e-7);
    }
  }
}
