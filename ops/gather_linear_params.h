// The torch-free description of one gather_linear problem that the CPU and
// CUDA kernels take: raw pointers, sizes and strides.
#pragma once

#include <cstdint>

namespace fgl {

/// One gather_linear problem. All sizes and strides are in elements and
/// 64-bit, so tensors past 2^31 elements and arbitrary views are addressed
/// directly.
template <typename T>
struct GatherLinearParams {
  const T* x;       // [R, B, H]
  const T* weight;  // [K, R*H]
  const T* bias;    // [K], or nullptr for no bias
  T* out;           // [B, K]
  int64_t R, B, H, K;
  int64_t x_stride_r, x_stride_b, x_stride_h;
  int64_t weight_stride_k, weight_stride_c;
  int64_t bias_stride;
  int64_t out_stride_b, out_stride_k;
};

}  // namespace fgl
