// The warp-mma kernel's geometry, shared by the kernel (warp_mma_kernel.cuh)
// and the policy that plans it (kernel_choice.h). Plain C++: no CUDA type.
#pragma once

#include <cstdint>

namespace fgl::cuda::warp_mma {

constexpr int kColumns = 16;     // output columns per warp: mma's m16
constexpr int kRowsPerTile = 8;  // rows of B per n-tile: mma's n8
constexpr int kMaxRowTiles = 2;  // n-tiles per warp: B up to 16 in one pass
/// Contraction values a chunk covers: 4 lanes of 16 bytes.
constexpr int chunk(int element_size) { return 4 * 16 / element_size; }
constexpr int kUnroll = 4;        // chunks a lane loads before it multiplies
constexpr int kMinThreads = 128;  // a block: at least four warps
constexpr int kMaxSplits = 16;    // warps sharing one group of columns
constexpr int kMaxThreads = 32 * kMaxSplits;

/// n-tiles per warp: the fewest covering B, at most kMaxRowTiles (more rows
/// take several row tiles of the grid).
constexpr int row_tiles_per_warp(int64_t B) {
  return B <= kRowsPerTile ? 1 : kMaxRowTiles;
}

/// The per-launch layout the host chose (kernel_choice.h's WarpMmaPlan).
struct Layout {
  int splits;     // warps per group of columns, a power of two
  int32_t slice;  // contraction elements per warp, a multiple of chunk()
  bool prefetch_first_step;  // WarpMmaPlan's
};

}  // namespace fgl::cuda::warp_mma
