#include "bench/bench_configs.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace xgrad::bench {

const std::vector<BenchConfig>& bench_configs() {
  static const std::vector<BenchConfig> configs{
      {"S", 64, 1, 32, 16, 20, 400},
      {"M", 128, 4, 64, 32, 10, 100},
      {"L", 512, 8, 32, 64, 3, 20},
  };
  return configs;
}

const BenchConfig& bench_config(const std::string& name) {
  for (const auto& c : bench_configs())
    if (c.name == name) return c;
  throw std::invalid_argument("unknown configuration '" + name + "' (allowed: S, M, L)");
}

BenchConfig parse_shape(const std::string& shape) {
  const std::string form = " (form: d_model,n_heads,d_k,batch,seq_len,vocab, e.g. 512,8,0,32,64,32)";
  std::vector<std::size_t> v;
  std::size_t start = 0;
  while (true) {  // every entry, empty ones too (std::getline drops a trailing one)
    const std::size_t comma = shape.find(',', start);
    const std::string item = shape.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty() || item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("--shape: '" + item + "' in '" + shape + "' is not a whole number" + form);
    v.push_back(static_cast<std::size_t>(std::stoull(item)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (v.size() != 6 || v[0] == 0 || v[1] == 0 || v[3] == 0 || v[4] == 0 || v[5] == 0)
    throw std::invalid_argument("--shape: expected six whole numbers, all > 0 but d_k, got '" + shape + "'" + form);
  auto cap = [&](const char* what, double value, double limit) {
    if (value > limit)
      throw std::invalid_argument(
          fmt::format("--shape: {} must be at most {}, got {} in '{}'", what, limit, value, shape));
  };
  const double d_model = v[0], n_heads = v[1], batch = v[3], seq_len = v[4], vocab = v[5];
  cap("d_model", d_model, kMaxShapeDModel);
  cap("n_heads", n_heads, d_model);
  cap("d_k", v[2], kMaxShapeDk);
  if (v[2] == 0 && v[0] % v[1] != 0)
    throw std::invalid_argument(
        fmt::format("--shape: d_k 0 means d_model / n_heads, but {} is not divisible by {}", v[0], v[1]));
  cap("batch * seq_len", batch * seq_len, kMaxShapeRows);
  cap("vocab", vocab, kMaxShapeVocab);
  BenchConfig c{"custom", v[0], v[1], v[3], v[4], 3, 20};
  c.d_k = v[2];
  c.vocab = v[5];
  double largest = 0;  // bytes of A, B and C of the largest GEMM, which sgemm allocates at once
  for (const auto& g : step_gemms(model_config(c), c.batch, c.seq_len))
    largest = std::max(largest, 4.0 * g.count *
                                    (static_cast<double>(g.m) * g.k + static_cast<double>(g.k) * g.n +
                                     static_cast<double>(g.m) * g.n));
  if (largest > kMaxShapeGemmBytes)
    throw std::invalid_argument(
        fmt::format("--shape: its largest GEMM needs {:.1f} GiB (limit {:.0f}); reduce "
                    "batch, seq_len, vocab or d_model in '{}'",
                    largest / (1 << 30), kMaxShapeGemmBytes / (1 << 30), shape));
  return c;
}

nn::ModelConfig model_config(const BenchConfig& c) {
  nn::ModelConfig mc;
  mc.vocab_size = c.vocab;
  mc.max_seq_len = c.seq_len;
  mc.d_model = c.d_model;
  mc.n_heads = c.n_heads;
  mc.d_k = c.d_k;
  mc.n_layers = 1;
  mc.d_ff = 4 * c.d_model;
  mc.mlp = true;
  mc.layer_norm = true;
  mc.residual = true;
  mc.causal = true;
  mc.scale = "sqrt_dk";
  return mc;
}

std::vector<GemmShape> step_gemms(const nn::ModelConfig& mc, std::size_t batch, std::size_t seq_len,
                                  const NeededRows& needed) {
  const std::size_t rows = batch * seq_len, d = mc.d_model, h = mc.n_heads;
  const std::size_t d_k = mc.d_k ? mc.d_k : d / h, inner = h * d_k, d_ff = mc.d_ff ? mc.d_ff : 4 * d;
  const std::size_t t = seq_len, heads = batch * h;
  const std::size_t last_t = needed.positions ? needed.positions : t, last_rows = batch * last_t;
  const std::size_t readout_rows = needed.readout_rows ? needed.readout_rows : rows;
  std::vector<GemmShape> out;
  // x [m, in] @ W [in, out], then dX = dY W^T and dW = X^T dY.
  auto linear = [&](std::size_t m, std::size_t in, std::size_t o, std::size_t times) {
    out.push_back({false, false, m, o, in, times});
    out.push_back({false, true, m, in, o, times});
    out.push_back({true, false, in, o, m, times});
  };
  // Per (batch, head) matrix: A [m, k] @ B [k, n] and its two gradients.
  auto batched = [&](std::size_t m, std::size_t n, std::size_t k) {
    out.push_back({false, false, m, n, k, heads});
    out.push_back({false, true, m, k, n, heads});
    out.push_back({true, false, k, n, m, heads});
  };
  for (std::size_t layer = 0; layer < mc.n_layers; ++layer) {
    const bool last = layer + 1 == mc.n_layers;
    const std::size_t q_t = last ? last_t : t, q_rows = last ? last_rows : rows;
    linear(q_rows, d, inner, 1);                       // q projection
    linear(rows, d, inner, 2);                         // k, v projections
    batched(q_t, t, d_k);                              // scores = q @ k^T
    batched(q_t, d_k, t);                              // probs @ v
    if (needed.out_proj) linear(q_rows, inner, d, 1);  // output projection
    if (mc.mlp) {
      linear(q_rows, d, d_ff, 1);
      linear(q_rows, d_ff, d, 1);
    }
  }
  linear(readout_rows, d, mc.vocab_size, 1);  // readout
  return out;
}

double step_flops(const nn::ModelConfig& mc, std::size_t batch, std::size_t seq_len, const NeededRows& needed) {
  double total = 0;
  for (const auto& g : step_gemms(mc, batch, seq_len, needed)) total += g.flops();
  return total;
}

}  // namespace xgrad::bench
