// Torch-free CUDA kernels of fgl::gather_linear. The torch-facing side
// (gather_linear_cuda.cpp) validates, allocates and picks the stream; this
// side only sees raw pointers, sizes and strides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gather_linear_params.h"

namespace fgl::cuda {

using fgl::GatherLinearParams;

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
