// The three ways of computing linear(cat(x.unbind(0), -1), weight, bias) that
// the benchmark compares, their inputs, and their accuracy.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>

#include "cases.h"

namespace fgl::bench {

enum class Computation {
  kFused,          // fgl::gather_linear
  kCatLinear,      // at::linear(at::cat(x.unbind(0), -1), w, b): reference
  kPermuteLinear,  // at::linear(x.permute({1, 0, 2}).reshape({B, R*H}), w, b)
};
inline constexpr std::array<Computation, 3> kComputations = {
    Computation::kFused, Computation::kCatLinear, Computation::kPermuteLinear};
/// Their places in kComputations (and in the arrays kept in its order).
inline constexpr size_t kFusedIndex = 0, kCatIndex = 1, kPermuteIndex = 2;

/// How many of kComputations run: all, or with `fgl_only` the fused op
/// alone (kComputations begins with it).
constexpr size_t computations_run(bool fgl_only) {
  static_assert(kFusedIndex == 0);
  return fgl_only ? 1 : kComputations.size();
}

/// Short name: "fgl", "cat_linear", "permute_linear" (used as JSON keys).
const char* computation_name(Computation c);

/// One set of operands for a case.
struct Inputs {
  at::Tensor x;       // [R, B, H]
  at::Tensor weight;  // [K, R*H]
  at::Tensor bias;    // [K], or undefined: none

  /// Bytes of x, weight and bias together.
  int64_t nbytes() const;
};

/// Fresh standard-normal operands (weight scaled by 1/sqrt(R*H)), drawn in
/// float32 on `device` from the global generator and rounded to c.dtype.
Inputs random_inputs(const Case& c, const c10::Device& device);

/// Runs `c` on `in`; returns [B, K].
at::Tensor run_computation(Computation c, const Inputs& in);

/// ||out - ref|| / ||ref|| of each computation (kComputations order) on one set
/// of fresh random inputs made on `device`; ref is computed in float64 on the
/// CPU from the same (dtype-rounded) inputs. NaN for those past
/// computations_run(fgl_only), which do not run.
std::array<double, kComputations.size()> relative_errors(
    const Case& c, const c10::Device& device, bool fgl_only);

}  // namespace fgl::bench
