// The warp-dot kernel's geometry, shared by the kernel (warp_dot_kernel.cuh)
// and the policy that plans it (kernel_choice.h). Plain C++: no CUDA type.
#pragma once

#include <cstdint>

namespace fgl::cuda::warp_dot {

constexpr int kMinThreads = 128;  // a block: at least four warps
constexpr int kMaxSplits = 16;    // warps sharing one output column
constexpr int kMaxThreads = 32 * kMaxSplits;

/// Rows of B per warp: the kernel's instances, the fewest covering B (up to
/// 4; more rows take several row tiles, i.e. more warps, which hide memory
/// latency better than one warp holding more rows' loads).
constexpr int rows_per_warp(int64_t B) { return B <= 1 ? 1 : B <= 2 ? 2 : 4; }

/// Bytes of x's and the weight's rows a lane loads at once: a 16-byte
/// vector, or one element where the rows are not 16-byte vectors (e.g.
/// H = 33), so that any contiguous rows are read in place.
constexpr int kVectorBytes = 16;

/// Vectors of the contraction a lane loads before it multiplies: enough
/// bytes in flight to cover memory latency (4 16-byte vectors at up to 2
/// rows, 2 at 4; as many bytes in 4-byte and 8-byte vectors, half as many
/// in 2-byte ones, whose registers hold one element each), few enough
/// registers for the instance's rows.
constexpr int unroll(int rows, int vector_bytes) {
  const int widths = kVectorBytes / vector_bytes;
  return (rows <= 2 ? 4 : rows <= 4 ? 2 : 1) * (widths < 4 ? widths : 4);
}

/// The per-launch layout the host chose (kernel_choice.h's WarpDotPlan).
struct Layout {
  int splits;     // warps per output column, a power of two
  int32_t slice;  // contraction elements per warp, a multiple of 32 vectors
};

}  // namespace fgl::cuda::warp_dot
