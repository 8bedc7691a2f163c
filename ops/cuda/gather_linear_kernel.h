// Torch-free CUDA kernels of fgl::gather_linear. The torch-facing side
// (gather_linear_cuda.cpp) validates, allocates and picks the stream; this
// side only sees raw pointers, sizes and strides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fgl::cuda {

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

/// Enqueues out = bias + gather(x) @ weight^T on `stream`. T is float, double,
/// __half or __nv_bfloat16; half types accumulate in float32, double in
/// double. Requires B > 0 and K > 0 (R*H may be 0: out is then the bias).
/// The caller checks the launch with cudaGetLastError.
template <typename T>
void launch_gather_linear(const GatherLinearParams<T>& params,
                          cudaStream_t stream);

/// Up to this many rows of B the weight-streaming kernels run (when the
/// layout allows 16-byte vectors); more rows take the tiled kernel.
constexpr int64_t kMaxStreamingRows = 64;

/// The largest K one launch covers (the grid's y dimension is K tiles).
int64_t max_gather_linear_k();

}  // namespace fgl::cuda
