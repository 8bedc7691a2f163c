// The two entry points every compute backend registers (gather_linear and
// gather_linear.out), around the backend's own
//   void run(x, weight, bias, const GatherLinearSizes&, at::Tensor& out),
// which computes into a checked [B, K] `out`. Validation and out='s overlap
// handling are the same for every backend, so they live here once.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "gather_linear_checks.h"

namespace fgl::detail {

template <typename Run>
at::Tensor gather_linear_with(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, Run run) {
  const auto s = check_gather_linear_inputs(x, weight, bias);
  at::Tensor out = at::empty({s.B, s.K}, x.options());
  run(x, weight, bias, s, out);
  return out;
}

// An `out` that may overlap an input (out_may_overlap_inputs) gets the
// result through a fresh tensor, so every input is read before it is written.
template <typename Run>
at::Tensor& gather_linear_out_with(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   at::Tensor& out, Run run) {
  const auto s = check_gather_linear_inputs(x, weight, bias);
  check_gather_linear_out(out, x, weight, bias, s);
  if (out_may_overlap_inputs(out, x, weight, bias)) {
    at::Tensor fresh = at::empty({s.B, s.K}, x.options());
    run(x, weight, bias, s, fresh);
    out.copy_(fresh);
    return out;
  }
  run(x, weight, bias, s, out);
  return out;
}

}  // namespace fgl::detail
