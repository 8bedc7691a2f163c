// The two entry points every compute backend registers (gather_linear and
// gather_linear.out), around the backend's own
//   void run(x, weight, bias, const GatherLinearSizes&, at::Tensor& out),
// which computes into a checked [B, K] `out` with B, K and R*H > 0. Validation
// and out='s overlap handling are the same for every backend, so they live here
// once.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "gather_linear_checks.h"

namespace fgl::detail {

// The cases every backend answers alike, before its run(): nothing to
// compute (B or K is 0), and an empty contraction (R or H is 0), whose out
// is the bias (zeros without one). Returns whether `out` was answered.
inline bool answer_trivial(const std::optional<at::Tensor>& bias,
                           const GatherLinearSizes& s, at::Tensor& out) {
  if (out.numel() == 0) return true;
  if (s.R * s.H != 0) return false;
  if (has_bias(bias)) {
    out.copy_(bias->unsqueeze(0).expand({s.B, s.K}));
  } else {
    out.zero_();
  }
  return true;
}

/// out = gathered @ weight^T (+ bias) by the library's GEMM (BLAS, cuBLAS);
/// half types accumulate in float32 inside it and round once.
inline void library_gemm(const at::Tensor& gathered, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias,
                         at::Tensor& out) {
  if (has_bias(bias)) {
    at::addmm_out(out, *bias, gathered, weight.t());
  } else {
    at::mm_out(out, gathered, weight.t());
  }
}

template <typename Run>
at::Tensor gather_linear_with(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, Run run) {
  const auto s = check_gather_linear_inputs(x, weight, bias);
  at::Tensor out = at::empty({s.B, s.K}, x.options());
  if (!answer_trivial(bias, s, out)) run(x, weight, bias, s, out);
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
  if (answer_trivial(bias, s, out)) return out;
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
