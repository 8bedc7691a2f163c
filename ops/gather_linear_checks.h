// Input validation shared by every backend of fgl::gather_linear, so that CPU,
// CUDA and Meta reject the same inputs with the same messages.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace fgl::detail {

/// The problem sizes: x [R, B, H], weight [K, R*H], out [B, K].
struct GatherLinearSizes {
  int64_t R, B, H, K;
};

/// Checks ranks, R*H agreement, bias length, dtypes (float32, float64,
/// float16, bfloat16, all equal) and devices (all equal). Each message names
/// the argument, the expected and the actual value.
GatherLinearSizes check_gather_linear_inputs(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias);

/// Checks that `out` is [B, K] with x's dtype and device and shares no memory
/// with the inputs.
void check_gather_linear_out(const at::Tensor& out, const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias,
                             const GatherLinearSizes& sizes);

}  // namespace fgl::detail
