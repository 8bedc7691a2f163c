// The check of fused results against the reference path: error statistics
// and pass/fail against dtype-aware tolerances.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace fgl::app {

/// Passing means |out - ref| <= atol + rtol * |ref| everywhere (allclose).
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// Defaults that leave room for a different summation order and, for the
/// half types, one rounding of each result.
Tolerance default_tolerance(at::ScalarType dtype);

struct ErrorStats {
  double max_abs_err = 0;
  /// Largest |out - ref| / |ref| over elements with |ref| > atol (relative
  /// error means nothing at the zeros of ref).
  double max_rel_err = 0;
  /// NaN or infinite elements of the fused result.
  int64_t nonfinite = 0;
  bool passed = true;

  void merge(const ErrorStats& other);
};

/// Compares `out` with `ref` (same shape) in float64.
ErrorStats compare(const at::Tensor& out, const at::Tensor& ref,
                   const Tolerance& tolerance);

}  // namespace fgl::app
