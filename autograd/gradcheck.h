// Finite-difference gradient check, as torch.autograd.gradcheck: compares the analytic gradient of a float64
// function with central differences, element by element, and reports the worst element.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric| passes
  double rtol = 1e-4;
};

struct GradcheckResult {
  bool ok = true;
  std::size_t input = 0;    // which input holds the worst element
  std::size_t element = 0;  // flat index of the worst element within that input
  double analytic = 0;      // analytic derivative there
  double numeric = 0;       // central-difference derivative there
  double error = 0;         // |analytic - numeric| - (atol + rtol |numeric|); <= 0 passes
  std::size_t kinks = 0;    // elements where left and right differences disagree (relu at 0, ties of max)
  std::string message;      // a sentence naming the worst element, for test output
};

/// Checks d f(inputs) / d inputs for every input with requires_grad. A non-scalar output is reduced to
/// sum(f * W) with fixed pseudo-random weights W so that no element's error can cancel another's.
/// At a kink (the one-sided differences disagree by more than the tolerance) the analytic value passes if it
/// lies between the two one-sided derivatives, so relu at 0 or ties in max are not false failures.
/// f must be deterministic. Inputs are restored after each perturbation.
GradcheckResult gradcheck(const std::function<DTensor(const std::vector<DTensor>&)>& f,
                          const std::vector<DTensor>& inputs, const GradcheckOptions& options = {});

}  // namespace xgrad
