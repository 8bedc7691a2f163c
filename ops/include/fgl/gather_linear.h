// Public C++ API of the fgl op library.
//
// gather_linear(x, weight, bias) computes, without materialising the concat,
//   torch.nn.functional.linear(torch.cat([x[0], ..., x[R-1]], -1), weight,
//   bias)
// i.e. out[b, k] = bias[k] + sum_{r, h} x[r, b, h] * weight[k, r * H + h].
//
// The functions call through the PyTorch dispatcher, so C++, TorchScript and
// Python (torch.ops.fgl.gather_linear) all reach the same CPU, CUDA and Meta
// kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

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

/// The route gather_linear(x, weight, bias) takes on x's device, by the
/// routing policy (or a route forced for tests and benchmarks): on CUDA a
/// fused kernel ("stream", "warp-dot", "warp-mma", "wgmma", "wgmma-split",
/// ...) or cuBLAS ("cublas-cat", "cublas-view"), on the CPU "dot",
/// "gemm-view", "gemm-cat" or "gemm-slices"; "empty" where nothing is
/// multiplied (B, K or R*H is 0). Checks the inputs as gather_linear does
/// and reads no element.
std::string gather_linear_route(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias = std::nullopt);

}  // namespace fgl
