// The row kernels of softmax and cross_entropy: shifted exps at the widest vector width the CPU runs. Plain
// references: reference::softmax_row and reference::exp (kernels/reference.h); tests/test_kernels.cpp holds the
// kernels to them within a stated ulp bound.
#pragma once

#include <cstddef>

namespace xgrad::simd {

/// out = softmax(in) over n contiguous elements, subtracting the max first; a row whose every entry is -inf (fully
/// masked) gives all zeros. in and out may be the same array. The row kernel of xgrad::softmax (last axis), shared
/// with fused ops that must match it (nn/attention.cpp). float: 16-wide Cephes exp (simd::exp_in_place) in
/// target clones; double: xsimd::exp.
void softmax_row(const float* in, float* out, std::size_t n);
void softmax_row(const double* in, double* out, std::size_t n);

/// out[j] = exp(in[j] - shift) for j in [0, n): a row's shifted exps (cross_entropy). in and out may be the same
/// array. float: as softmax_row; double: std::exp.
void exp_shifted(const float* in, float shift, float* out, std::size_t n);
void exp_shifted(const double* in, double shift, double* out, std::size_t n);

}  // namespace xgrad::simd
