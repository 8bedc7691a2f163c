// Input validation shared by every backend of fgl::gather_linear, so that CPU,
// CUDA and Meta reject the same inputs with the same messages.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <cstdint>
#include <optional>

namespace fgl::detail {

/// Whether a bias was given: present and defined (Python's None arrives as
/// either).
inline bool has_bias(const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined();
}

/// The problem sizes: x [R, B, H], weight [K, R*H], out [B, K].
template <typename Int>
struct BasicGatherLinearSizes {
  Int R, B, H, K;
};
using GatherLinearSizes = BasicGatherLinearSizes<int64_t>;
/// Symbolic sizes, for the Meta kernel: under torch.compile and torch.export
/// (fake tensors with dynamic shapes) reading int64_t sizes would specialise
/// every dimension, dynamic batch included.
using SymGatherLinearSizes = BasicGatherLinearSizes<c10::SymInt>;

/// Checks ranks, R*H agreement, bias length, dtypes (float32, float64,
/// float16, bfloat16, all equal) and devices (all equal). Each message names
/// the argument, the expected and the actual value.
GatherLinearSizes check_gather_linear_inputs(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias);

/// check_gather_linear_inputs on symbolic sizes: guards only what the checks
/// compare (weight columns == R*H, bias length == K).
SymGatherLinearSizes check_gather_linear_inputs_symint(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias);

/// Checks that `out` is [B, K] with x's dtype and device and shares no memory
/// with the inputs, where that can be decided (dense tensors).
void check_gather_linear_out(const at::Tensor& out, const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias,
                             const GatherLinearSizes& sizes);
void check_gather_linear_out_symint(const at::Tensor& out, const at::Tensor& x,
                                    const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    const SymGatherLinearSizes& sizes);

/// Whether `out` may overlap an input although check_gather_linear_out passed:
/// it shares an input's storage and one of the two is not dense, where ATen's
/// overlap test gives up. The backends then compute into a fresh tensor and
/// copy it into `out` (backend_entry.h), so every input is read before `out`
/// is written.
bool out_may_overlap_inputs(const at::Tensor& out, const at::Tensor& x,
                            const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias);

}  // namespace fgl::detail
