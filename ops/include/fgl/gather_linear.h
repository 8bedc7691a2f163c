// Public C++ API of the fgl op library.
//
// gather_linear(x, weight, bias) computes, without materialising the concat,
//   torch.nn.functional.linear(torch.cat([x[0], ..., x[R-1]], -1), weight,
//   bias)
// i.e. out[b, k] = bias[k] + sum_{r, h} x[r, b, h] * weight[k, r * H + h].
//
// Both functions call through the PyTorch dispatcher, so C++, TorchScript and
// Python (torch.ops.fgl.gather_linear) all reach the same CPU, CUDA and Meta
// kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace fgl {

/// x: [R, B, H], weight: [K, R*H], bias: [K] or none. Returns [B, K] with x's
/// dtype and device. Any strides are accepted.
at::Tensor gather_linear(const at::Tensor& x, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias = std::nullopt);

/// Same as gather_linear, writing into `out`, which must already be [B, K]
/// with x's dtype and device and must not overlap the inputs.
at::Tensor& gather_linear_out(
    at::Tensor& out, const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias = std::nullopt);

}  // namespace fgl
