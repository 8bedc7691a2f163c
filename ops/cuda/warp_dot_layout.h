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

/// 16-byte vectors of the contraction a lane loads before it multiplies:
/// enough bytes in flight to cover memory latency, few enough registers for
/// the instance's rows.
constexpr int unroll(int rows) { return rows <= 2 ? 4 : rows <= 4 ? 2 : 1; }

/// The per-launch layout the host chose (kernel_choice.h's WarpDotPlan).
struct Layout {
  int splits;     // warps per output column, a power of two
  int32_t slice;  // contraction elements per warp, a multiple of 32 vectors
};

}  // namespace fgl::cuda::warp_dot
