// The entry points every compute backend registers (gather_linear and
// gather_linear.out), around the backend's own
//   void run(x, weight, bias, const GatherLinearSizes&, Output& out),
// which computes into a checked [B, K] `out.get()` with B, K and R*H > 0,
// and gather_linear_route, around its
//   std::string name_route(x, weight, const GatherLinearSizes&),
// which names the route run() takes for the same inputs.
// Validation and out='s overlap handling are the same for every backend, so
// they live here once.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "gather_linear_checks.h"

namespace fgl::detail {

/// The [B, K] tensor a backend's run() writes: out= itself, or the op's
/// result, allocated at the first get(). A route that needs a temporary of
/// its own (the concatenation of x) makes it first, in the order cat +
/// Linear allocates the two: with glibc's allocator, which returns large
/// blocks to the system and faults them in again, the other order left
/// fgl's CPU GEMM routes slower than the reference's identical calls
/// (bench/NOTES.md, "c10").
class Output {
 public:
  explicit Output(at::Tensor& given) : tensor_(&given) {}
  Output(const GatherLinearSizes& s, const at::TensorOptions& options)
      : B_(s.B), K_(s.K), options_(options) {}
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  at::Tensor& get() {
    if (tensor_ == nullptr) {
      owned_ = at::empty({B_, K_}, options_);
      tensor_ = &owned_;
    }
    return *tensor_;
  }

 private:
  at::Tensor* tensor_ = nullptr;
  at::Tensor owned_;
  int64_t B_ = 0, K_ = 0;
  at::TensorOptions options_;
};

// The cases every backend answers alike, before its run(): nothing to
// compute (B or K is 0), and an empty contraction (R or H is 0), whose out
// is the bias (zeros without one).
inline bool is_trivial(const GatherLinearSizes& s) {
  return s.B == 0 || s.K == 0 || s.R * s.H == 0;
}

// Answers a trivial problem; returns whether `out` was answered.
inline bool answer_trivial(const std::optional<at::Tensor>& bias,
                           const GatherLinearSizes& s, Output& out) {
  if (!is_trivial(s)) return false;
  if (s.B == 0 || s.K == 0) {
    out.get();
    return true;
  }
  if (has_bias(bias)) {
    out.get().copy_(bias->unsqueeze(0).expand({s.B, s.K}));
  } else {
    out.get().zero_();
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
  Output out(s, x.options());
  if (!answer_trivial(bias, s, out)) run(x, weight, bias, s, out);
  return out.get();
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
  Output given(out);
  if (answer_trivial(bias, s, given)) return out;
  if (out_may_overlap_inputs(out, x, weight, bias)) {
    Output fresh(s, x.options());
    run(x, weight, bias, s, fresh);
    out.copy_(fresh.get());
    return out;
  }
  run(x, weight, bias, s, given);
  return out;
}

/// What gather_linear_route answers for problems no backend multiplies.
inline constexpr const char* kEmptyRoute = "empty";

template <typename NameRoute>
std::string gather_linear_route_with(const at::Tensor& x,
                                     const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias,
                                     NameRoute name_route) {
  const auto s = check_gather_linear_inputs(x, weight, bias);
  return is_trivial(s) ? kEmptyRoute : name_route(x, weight, s);
}

}  // namespace fgl::detail
