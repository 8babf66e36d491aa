// Reductions over all elements or a set of axes. Implemented in ops_reduce.cpp, instantiated for float and double.
#pragma once

#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

/// Sum of all elements → 0-d tensor.
template <class T>
basic_tensor<T> sum(const basic_tensor<T>& a);
/// Sum over `axes` (negative axes count from the end); keeps reduced axes as size 1 when keepdim.
/// Throws Error on an axis out of range or repeated.
template <class T>
basic_tensor<T> sum(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);
/// Mean of all elements → 0-d tensor.
template <class T>
basic_tensor<T> mean(const basic_tensor<T>& a);
/// Mean over `axes`, as sum.
template <class T>
basic_tensor<T> mean(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);

/// Largest element → 0-d tensor (torch.amax over all dims). Where several elements tie for the maximum the
/// gradient is split evenly among them (as torch.amax; torch.max(dim) instead routes it to one index). A NaN makes
/// the result NaN. Throws Error on an empty tensor.
template <class T>
basic_tensor<T> max(const basic_tensor<T>& a);
/// Largest element over `axes`, as `sum` for the axes and keepdim, ties as `max(a)`. Throws Error on an axis out
/// of range or repeated, or when reducing over an empty axis.
template <class T>
basic_tensor<T> max(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);
/// Smallest element → 0-d tensor; ties and errors as `max(a)`.
template <class T>
basic_tensor<T> min(const basic_tensor<T>& a);
/// Smallest element over `axes`; as `max(a, axes, keepdim)`.
template <class T>
basic_tensor<T> min(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);

/// Variance of all elements with Bessel's correction (divisor N - 1) → 0-d tensor, as torch.var(a). For the
/// biased variance of all elements pass every axis with correction 0.
template <class T>
basic_tensor<T> var(const basic_tensor<T>& a);
/// Variance over `axes`: sum((x - mean)^2) / (N - correction), N the number of reduced elements; correction = 1
/// (default) is Bessel's unbiased estimator as torch.var, correction = 0 the biased (population) variance.
/// When N - correction <= 0 the result is inf or NaN, as torch.var (which warns). Gradient:
/// 2 (x - mean) / (N - correction). Throws Error on a bad axis list, an empty reduction, or correction < 0.
template <class T>
basic_tensor<T> var(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false, double correction = 1.0);

/// log(sum(exp(a))) over `axes`, numerically stable: the slice max m is subtracted, m + log(sum(exp(a - m))).
/// Gradient: softmax over the slice, exp(a - logsumexp). A slice whose elements are all -inf gives -inf and
/// passes zero gradient (not NaN); a +inf element gives +inf (gradient NaN there, as torch.logsumexp); a NaN gives
/// NaN. The exps are summed in double; over the last axis alone they come from the SIMD exp (float: within 1 ulp,
/// autograd/kernels/softmax.h), over other axes from std::exp in double.
/// Throws Error on a bad axis list or an empty reduction.
template <class T>
basic_tensor<T> logsumexp(const basic_tensor<T>& a, std::vector<int> axes, bool keepdim = false);

}  // namespace xgrad
