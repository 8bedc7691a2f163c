#include "check.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace fgl::app {

Tolerance default_tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return {1e-10, 1e-7};
    case at::kHalf:
      return {1e-2, 1e-2};  // an fp16 rounding is 4.9e-4 relative
    case at::kBFloat16:
      return {4e-2, 2e-2};  // a bf16 rounding is 3.9e-3 relative
    default:
      return {1e-4, 1e-4};  // float32 over R*H-term sums in any order
  }
}

void ErrorStats::merge(const ErrorStats& other) {
  max_abs_err = std::max(max_abs_err, other.max_abs_err);
  max_rel_err = std::max(max_rel_err, other.max_rel_err);
  nonfinite += other.nonfinite;
  passed = passed && other.passed;
}

ErrorStats compare(const at::Tensor& out, const at::Tensor& ref,
                   const Tolerance& tolerance) {
  ErrorStats stats;
  if (ref.numel() == 0) {
    return stats;
  }
  const auto out64 = out.to(at::kDouble);
  stats.nonfinite = out64.isfinite().logical_not().sum().item<int64_t>();
  const auto ref64 = ref.to(at::kDouble);
  const auto err = (out64 - ref64).abs();
  const auto mag = ref64.abs();
  // NaN in either path fails: (NaN <= bound) is false.
  stats.passed =
      (err <= tolerance.atol + tolerance.rtol * mag).all().item<bool>();
  stats.max_abs_err = err.nan_to_num(INFINITY).max().item<double>();
  const auto rel =
      at::where(mag > tolerance.atol, err / mag, at::zeros_like(err));
  stats.max_rel_err = rel.nan_to_num(INFINITY).max().item<double>();
  return stats;
}

}  // namespace fgl::app
