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

// T is float, double, __half or __nv_bfloat16; half types accumulate in
// float32, double in double. The launchers require B > 0 and K > 0 (R*H may
// be 0: out is then the bias); the caller checks the launch with
// cudaGetLastError.

/// Up to this many rows of B the weight-streaming kernels run: the regime
/// where reading the weight once is the whole cost (bench/NOTES.md).
constexpr int64_t kMaxStreamingRows = 16;

/// Enqueues a weight-streaming kernel on `stream` when the problem suits one:
/// at most kMaxStreamingRows rows of B, x and weight contiguous along h and c
/// with 16-byte aligned rows and heads. Returns false, enqueuing nothing,
/// otherwise.
template <typename T>
bool try_launch_streaming(const GatherLinearParams<T>& params,
                          cudaStream_t stream);

/// Enqueues the general tiled kernel on `stream`: any strides, K up to
/// max_tiled_k().
template <typename T>
void launch_tiled(const GatherLinearParams<T>& params, cudaStream_t stream);

/// The largest K one tiled launch covers (its grid's y dimension is K tiles).
int64_t max_tiled_k();

}  // namespace fgl::cuda
