// Which CUDA route a gather_linear problem takes. Plain C++ (no torch, no
// CUDA types), so the policy is unit-tested on machines without a GPU.
#pragma once

#include <cstdint>

namespace fgl::cuda {

enum class Route {
  kStreaming,       // a weight-streaming kernel (SIMT, or mma.sync for 2-byte
                    // types): few rows of B, the weight read once
  kTiled,           // the general tiled kernel: any layout and size
  kGatheredCublas,  // cat + one cuBLAS GEMM: the reference path's own route
};

/// Up to this many rows of B the weight-streaming kernels run: the regime
/// where reading the weight once is the whole cost (bench/NOTES.md).
constexpr int64_t kMaxStreamingRows = 16;

/// The smallest weight, in bytes, for which the float32 streaming kernel
/// beats cat + cuBLAS. H200, bench/NOTES.md v3: 64 MiB weights won (1.16x
/// at B = 1, 1.69x at B = 16) and a 28 KB one lost (0.57x: the kernel's
/// ~8 us of dependent memory round trips against ~4.5 us for two library
/// kernels). With cat + cuBLAS at ~4.5 us + bytes / 3.6 TB/s and the kernel at
/// max(~8 us, bytes / 3.4 TB/s), they cross near 13 MB at B = 1; B = 16,
/// where cuBLAS streams at 0.7 TB/s, crosses lower.
constexpr int64_t kMinStreamingWeightBytes = int64_t{16} << 20;

/// The architecture the routing was measured on: the H200 (sm_90).
constexpr int kMeasuredComputeCapability = 90;

struct RouteQuery {
  int64_t R, B, H, K;
  int element_bytes;       // 2 (float16, bfloat16), 4 (float32), 8 (float64)
  bool streamable;         // x and weight in the streaming kernels' layout
  bool fused_only;         // FGL_CUDA_FUSED_ONLY=1: never leave fused kernels
  int compute_capability;  // 10 * major + minor of the inputs' device
};

/// Fused kernels run where they were measured faster than cat + cuBLAS and
/// nowhere else: only on the measured architecture (other GPUs get the
/// portable cuBLAS route until a benchmark there says otherwise), only the
/// float32 streaming kernel; the half-precision (mma.sync) streaming kernel
/// and the tiled kernel lost on every H200 problem so far, float64 was never
/// measured.
/// Under fused_only every problem stays on a fused kernel (tests,
/// compute-sanitizer, benchmarks of the kernels themselves).
/// Requires R*H > 0, B > 0 and K > 0 (the caller handles empty problems).
constexpr Route choose_route(const RouteQuery& q) {
  const bool streaming_shape = q.streamable && q.B <= kMaxStreamingRows;
  if (q.fused_only) {
    return streaming_shape ? Route::kStreaming : Route::kTiled;
  }
  const int64_t weight_bytes = q.K * q.R * q.H * q.element_bytes;
  if (q.compute_capability == kMeasuredComputeCapability && streaming_shape &&
      q.element_bytes == 4 && weight_bytes >= kMinStreamingWeightBytes) {
    return Route::kStreaming;
  }
  return Route::kGatheredCublas;
}

}  // namespace fgl::cuda
