// Batched matrix product on BLAS. Batch dims broadcast as in numpy.matmul; each matrix pair is one GEMM. 1-D
// operands are promoted to a row or a column as numpy.matmul does.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/blas.h"
#include "autograd/kernels/gradient_buffers.h"
#include "autograd/kernels/parallel.h"
#include "autograd/ops_matmul.h"

namespace xgrad {

namespace {

// For each element of the broadcast batch, the index of the matrix it reads in an operand of batch shape `own`.
std::vector<std::size_t> batch_offsets(const shape_t& batch, const shape_t& own) {
  std::size_t total = 1;
  for (auto d : batch) total *= d;
  std::vector<std::size_t> offsets(total);
  const std::size_t lead = batch.size() - own.size();
  std::vector<std::size_t> idx(batch.size(), 0);
  for (std::size_t flat = 0; flat < total; ++flat) {
    std::size_t off = 0;
    for (std::size_t d = lead; d < batch.size(); ++d) {
      const std::size_t size = own[d - lead];
      off = off * size + (size == 1 ? 0 : idx[d]);
    }
    offsets[flat] = off;
    for (std::size_t d = batch.size(); d-- > 0;) {  // odometer increment
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return offsets;
}

struct MatmulPlan {
  std::size_t m, k, n;
  shape_t out_shape;
  std::vector<std::size_t> a_off, b_off;  // per batch element, matrix index into a and b
  std::size_t a_count, b_count;           // matrices stored in a and b (differ from the batch when broadcast)
  bool fold_rows;                         // b is one matrix: all rows of a go through a single GEMM
};

std::size_t count_of(const shape_t& batch) {
  std::size_t n = 1;
  for (auto d : batch) n *= d;
  return n;
}

MatmulPlan plan(const shape_t& a_shape, const shape_t& b_shape) {
  if (a_shape.empty() || b_shape.empty())
    throw Error("matmul: operands need at least 1 dim, got " + shape_str(a_shape) + " and " + shape_str(b_shape));
  // numpy.matmul: a 1-D left operand is a row [1, K], a 1-D right operand a column [K, 1], and the added axis is
  // dropped from the output. Only the shapes change: [K], [1, K] and [K, 1] lay their data out alike, so the GEMMs
  // below and their gradients need no copies.
  shape_t as = a_shape, bs = b_shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  MatmulPlan p;
  p.m = as[as.size() - 2];
  p.k = as[as.size() - 1];
  p.n = bs[bs.size() - 1];
  if (bs[bs.size() - 2] != p.k)
    throw Error("matmul: inner sizes differ: " + shape_str(a_shape) + " @ " + shape_str(b_shape));
  const shape_t a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  shape_t batch;
  try {
    batch = broadcast_shapes(a_batch, b_batch, "matmul");
  } catch (const Error&) {
    throw Error("matmul: batch dims do not broadcast: " + shape_str(a_shape) + " @ " + shape_str(b_shape));
  }
  p.a_off = batch_offsets(batch, a_batch);
  p.b_off = batch_offsets(batch, b_batch);
  p.a_count = count_of(a_batch);
  p.b_count = count_of(b_batch);
  p.fold_rows = b_batch.empty();
  p.out_shape = batch;
  if (a_shape.size() > 1) p.out_shape.push_back(p.m);
  if (b_shape.size() > 1) p.out_shape.push_back(p.n);
  return p;
}

// Where a gradient GEMM writes, and its beta. Each writes straight into the input's gradient: beta = 1 adds to an
// earlier gradient (an activation read by several products, such as the input of the q, k and v projections). A
// fresh gradient is overwritten with beta = 0, unless broadcasting (`shared`) makes several batch elements add into
// one matrix.
template <class T>
std::pair<T*, T> gradient_target(Node<T>& input, bool shared) {
  bool fresh = false;
  T* g = grad_slot(input, fresh).data();
  if (fresh && shared) std::fill(g, g + input.value.size(), T(0));
  return {g, fresh && !shared ? T(0) : T(1)};
}

// Handing a product to the second thread costs a few microseconds, the time of about 1e5 multiply-adds here.
constexpr std::size_t kSideBySideMinMacs = std::size_t(1) << 17;
// Row blocks of the gradients start at multiples of this many rows (a multiple of every sgemm kernel's unroll).
constexpr std::size_t kRowBlockAlign = 32;
// The largest share of dB a row block computes apart (floats; 4 MiB): the shares are kept for the next product, so
// this bounds what row blocks hold, threads x 4 MiB, whatever the model's widest weight (a 50k-token readout).
constexpr std::size_t kRowBlockMaxShare = std::size_t(1) << 20;

// How many row blocks the gradients of a product of `rows` rows of A with a [K, N] matrix B of `kn` elements take:
// one per thread, each of at least kRowBlockAlign rows; 0 (no row blocks) for double (its reference GEMM is not
// split), one thread, too little work or too wide a B.
template <class T>
std::size_t thread_row_blocks(std::size_t rows, std::size_t kn) {
  const auto threads = static_cast<std::size_t>(xgrad::num_threads());
  if (!std::is_same<T, float>::value || threads < 2 || detail::in_parallel() || rows < 2 * kRowBlockAlign ||
      rows * kn < kSideBySideMinMacs || kn > kRowBlockMaxShare)
    return 0;
  return std::min(threads, rows / kRowBlockAlign);
}

// Room for `n` elements of dB's shares: the calling thread's, kept for its next product.
template <class T>
T* row_block_shares(std::size_t n) {
  thread_local std::vector<T> kept;
  if (kept.size() < n) kept.resize(n);
  return kept.data();
}

// Both gradients of C = A @ B ([rows, K] @ [K, N]) with each thread on one block of A's rows: dA's rows of the
// block and the block's share of dB, A_blk^T @ dC_blk, so each thread reads only the rows it wrote in the forward
// and the rest of the backward (rows split alike: parallel_for gives the caller the first block). The shares are
// then added to dB in block order, each thread on the part of dB that the optimizer's loop gives it. dB's sum is
// cut at the blocks' edges, so it depends on the thread count; a run on the same count repeats bit for bit.
template <class T>
void row_block_backward(const MatmulPlan& p, std::size_t rows, std::size_t blocks, T* shares, const T* G, const T* A,
                        const T* B, std::pair<T*, T> ga, std::pair<T*, T> gb) {
  const std::size_t kn = p.k * p.n;
  const auto first_row = [&](std::size_t b) {
    return std::min(rows, (rows * b / blocks + kRowBlockAlign - 1) / kRowBlockAlign * kRowBlockAlign);
  };
  parallel_for(0, blocks, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t b = lo; b < hi; ++b) {
      const std::size_t r0 = first_row(b), r = first_row(b + 1) - r0;
      if (r == 0) continue;
      if (ga.first)
        blas::gemm<T>(false, true, r, p.k, p.n, T(1), G + r0 * p.n, p.n, B, p.n, ga.second, ga.first + r0 * p.k, p.k);
      if (gb.first)
        blas::gemm<T>(true, false, p.k, p.n, r, T(1), A + r0 * p.k, p.k, G + r0 * p.n, p.n, T(0), shares + b * kn, p.n);
    }
  });
  if (!gb.first) return;
  parallel_for(0, kn, grain_for(blocks, 64), [&](std::size_t lo, std::size_t hi) {
    T* dst = gb.first;
    if (gb.second == T(0)) std::fill(dst + lo, dst + hi, T(0));
    for (std::size_t b = 0; b < blocks; ++b)
      if (first_row(b + 1) > first_row(b))
        for (std::size_t i = lo; i < hi; ++i) dst[i] += shares[b * kn + i];
  });
}

template <class T>
void backward(Node<T>& self, const MatmulPlan& p) {
  const std::size_t batch = p.a_off.size();
  const T* G = self.grad.data();
  const T* A = self.inputs[0]->value.data();
  const T* B = self.inputs[1]->value.data();
  const bool want_a = needs_grad(self, 0), want_b = needs_grad(self, 1);
  // The two products are independent unless both gradients are one array (a @ a).
  const bool distinct = self.inputs[0] != self.inputs[1];
  const std::size_t blocks = p.fold_rows && distinct ? thread_row_blocks<T>(batch * p.m, p.k * p.n) : 0;
  // Allocated before any gradient is made: a failed allocation leaves no gradient unwritten.
  T* shares = blocks != 0 && want_b ? row_block_shares<T>(blocks * p.k * p.n) : nullptr;
  std::pair<T*, T> ga{nullptr, T(0)}, gb{nullptr, T(0)};
  if (want_a) ga = gradient_target(*self.inputs[0], !p.fold_rows && p.a_count != batch);
  if (want_b) gb = gradient_target(*self.inputs[1], !p.fold_rows && p.b_count != batch);
  const auto grad_a = [&] {  // dA = dC @ B^T, accumulated into the matrix each batch element read
    if (p.fold_rows) {
      blas::gemm<T>(false, true, batch * p.m, p.k, p.n, T(1), G, p.n, B, p.n, ga.second, ga.first, p.k);
      return;
    }
    for (std::size_t i = 0; i < batch; ++i)
      blas::gemm<T>(false, true, p.m, p.k, p.n, T(1), G + i * p.m * p.n, p.n, B + p.b_off[i] * p.k * p.n, p.n,
                    ga.second, ga.first + p.a_off[i] * p.m * p.k, p.k);
  };
  const auto grad_b = [&] {  // dB = A^T @ dC
    if (p.fold_rows) {
      blas::gemm<T>(true, false, p.k, p.n, batch * p.m, T(1), A, p.k, G, p.n, gb.second, gb.first, p.n);
      return;
    }
    for (std::size_t i = 0; i < batch; ++i)
      blas::gemm<T>(true, false, p.k, p.n, p.m, T(1), A + p.a_off[i] * p.m * p.k, p.k, G + i * p.m * p.n, p.n,
                    gb.second, gb.first + p.b_off[i] * p.k * p.n, p.n);
  };
  if (blocks != 0) {
    row_block_backward(p, batch * p.m, blocks, shares, G, A, B, ga, gb);
    return;
  }
  if (want_a && want_b && distinct && batch * p.m * p.n * p.k >= kSideBySideMinMacs) {
    blas::side_by_side(grad_a, grad_b);
    return;
  }
  if (want_a) grad_a();
  if (want_b) grad_b();
}

}  // namespace

template <class T>
basic_tensor<T> matmul(const basic_tensor<T>& a, const basic_tensor<T>& b) {
  MatmulPlan p = plan(a.shape(), b.shape());
  xt::xarray<T> out = xt::xarray<T>::from_shape(p.out_shape);
  const std::size_t batch = p.a_off.size();
  const T* A = a.value().data();
  const T* B = b.value().data();
  // [..., M, K] @ [K, N]: all rows of a in one GEMM (the Linear layer case).
  if (p.fold_rows) {
    blas::gemm<T>(false, false, batch * p.m, p.n, p.k, T(1), A, p.k, B, p.n, T(0), out.data(), p.n);
  } else {
    for (std::size_t i = 0; i < batch; ++i)
      blas::gemm<T>(false, false, p.m, p.n, p.k, T(1), A + p.a_off[i] * p.m * p.k, p.k, B + p.b_off[i] * p.k * p.n, p.n,
                    T(0), out.data() + i * p.m * p.n, p.n);
  }
  return make_result<T>("matmul", std::move(out), {a, b}, [p = std::move(p)](Node<T>& self) { backward(self, p); });
}

template basic_tensor<float> matmul<float>(const basic_tensor<float>&, const basic_tensor<float>&);
template basic_tensor<double> matmul<double>(const basic_tensor<double>&, const basic_tensor<double>&);

}  // namespace xgrad
