// The CUDA routing policy of fgl::gather_linear: which kernel takes a
// problem, and how the streaming kernel is laid out for it. Plain C++ with no
// CUDA or torch type, so it is unit-tested on every machine; the thresholds
// come from the measurements in bench/NOTES.md ("CUDA routing").
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "stream_layout.h"
#include "tile_schedule.h"

namespace fgl::cuda {

/// How many clusters of each size (the index, up to the portable size) the
/// GPU holds at once.
using ResidentClusters = std::array<int, stream::kMaxClusterSplits + 1>;

/// Everything the policy looks at, read off the checked tensors and the
/// device by the torch-facing side.
struct Problem {
  int arch = 0;                    // compute capability, major * 10 + minor
  int sm_count = 0;                // multiprocessors
  int64_t max_smem_per_block = 0;  // opt-in dynamic shared memory, bytes
  int element_size = 0;            // bytes: 2 (float16, bfloat16), 4, 8
  int64_t R = 0, B = 0, H = 0, K = 0;
  // The copy engine can read the weight: contiguous along its columns, base
  // and row stride multiples of 16 bytes, rows not overlapping.
  bool weight_tma_ok = false;
  // x's rows load as 16-byte vectors: contiguous along h, H and the other
  // strides multiples of 16 bytes, base aligned.
  bool x_vectors = false;
  // The copy engine can read x as (B, H, R) tiles: x_vectors, and the
  // strides along B and R not 0.
  bool x_tma_ok = false;
  // x contiguous along h and the weight along c: the warp-dot kernel reads
  // rows that are not 16-byte vectors an element at a time.
  bool rows_contiguous = false;
  // x's strides already hold the concatenation (gathered_view.h).
  bool x_gathered_view = false;
  // This build has the Hopper tensor-core kernel (CUTLASS was found).
  bool wgmma_built = false;
  // float32 may be multiplied as TF32: the user allowed it for float32
  // matmuls (at::globalContext().allowTF32CuBLAS(), which the reference's
  // cuBLAS call follows too). Otherwise float32 stays float32-accurate.
  bool tf32_allowed = false;
  // Clusters of the streaming kernel's blocks the GPU holds at once, one
  // block a multiprocessor (a cluster stays within one group of
  // multiprocessors, so fewer than sm_count / size fit). All 0 where not
  // known: sm_count / size are assumed.
  ResidentClusters stream_clusters{};
  // The GPU's peak memory bandwidth, GB/s (0: not known). The table was
  // measured on the H200's; where memory is slower, the routes whose
  // margin it takes go to cuBLAS (kernel_choice.cpp).
  int64_t memory_gbps = 0;
};

enum class Route {
  kWarpDot,        // warp_dot_kernel.cuh: small problems, one warp a column
  kWarpMma,        // warp_mma_kernel.cuh: 16-bit decode, warps on tensor cores
  kStream,         // stream_kernel.cuh: the weight streamed once, few rows
  kWgmma,          // sm90/wgmma_kernel.cuh: many rows, Hopper tensor cores
  kWgmmaPingpong,  // the same, each consumer warp group its own tiles
  kWgmmaSplit,     // the same, a tile's contraction split over a cluster
  kWgmmaStationary,  // sm90/stationary_kernel.cuh: the weight in registers
  kWgmmaPacked,      // sm90/wgmma_kernel.cuh, a step over whole narrow heads
  kTiled,            // tiled_kernel.cuh: any problem, CUDA cores
  kCublasView,       // one cuBLAS GEMM over x's gathered view
  kCublasCat,        // cat + one cuBLAS GEMM: the reference's own route
};

/// Every route, in the order above.
inline constexpr Route kRoutes[] = {
    Route::kWarpDot,         Route::kWarpMma,       Route::kStream,
    Route::kWgmma,           Route::kWgmmaPingpong, Route::kWgmmaSplit,
    Route::kWgmmaStationary, Route::kWgmmaPacked,   Route::kTiled,
    Route::kCublasView,      Route::kCublasCat};

const char* route_name(Route route);

/// How stream_kernel.cuh covers one problem.
struct StreamPlan {
  int rows_per_block = 0;        // kRows: rows of B per block
  int splits = 0;                // blocks per cluster along the contraction
  int64_t stages_per_split = 0;  // 128-byte weight stages per block
  int ring_stages = 0;           // stages in flight per block
  // Weight stages one bulk copy brings into consecutive slots (the ring a
  // multiple of them): stream::copy_stages where C is a multiple of a stage,
  // the ring holds two copies and a block of few rows streams many stages,
  // else 1.
  int copy_stages = 1;
  // x's stage tiles travel in the ring beside the weight's (tensor-core
  // instances, x_tma_ok, H a multiple of a stage); else the block gathers
  // an x slab first.
  bool x_in_ring = false;
  int64_t slab_pitch = 0;    // elements per row of the block's x slab (or 0)
  int64_t smem_bytes = 0;    // dynamic shared memory per block
  int64_t column_tiles = 0;  // grid.y
  int64_t row_tiles = 0;     // grid.z
  // Weight stages each block asks L2 for before the grid before it ends.
  int prefetch_stages = 0;
  // The next grid starts once every block has issued its last copy, rather
  // than once every block has waited for the grid before (its prefetches
  // then fall in this grid's tail).
  bool next_grid_after_last_copy = false;
};

/// The compute capability (major * 10 + minor) the streaming kernel is
/// built for.
inline constexpr int kStreamArch = 90;

/// The streaming kernel's layout for `p`, or nullopt where it cannot run it
/// (not sm_90, weight not readable by the copy engine, x slab too large).
std::optional<StreamPlan> plan_stream(const Problem& p);

/// How warp_dot_kernel.cuh covers one problem.
struct WarpDotPlan {
  int rows_per_warp = 0;  // kRows: rows of B per warp
  // Bytes a lane loads at once: warp_dot::kVectorBytes where x and the
  // weight load as 16-byte vectors, else the element size.
  int vector_bytes = 0;
  int splits = 0;            // warps per output column
  int64_t slice = 0;         // contraction elements per warp
  int threads = 0;           // per block
  int64_t column_tiles = 0;  // grid.x
  int64_t row_tiles = 0;     // grid.y
};

/// The warp-dot kernel's layout for `p`, or nullopt where it cannot run it:
/// x's rows or the weight's not contiguous, R*H reaches 2^30, or B exceeds
/// its grid.
std::optional<WarpDotPlan> plan_warp_dot(const Problem& p);

/// How warp_mma_kernel.cuh covers one problem.
struct WarpMmaPlan {
  int row_tiles_per_warp = 0;  // kRowTiles: n-tiles of 8 rows per warp
  int splits = 0;              // warps per group of 16 output columns
  int64_t slice = 0;           // contraction elements per warp
  int threads = 0;             // per block
  int64_t column_tiles = 0;    // grid.x
  int64_t row_tiles = 0;       // grid.y
  // Each warp asks L2 for its first step's weight before it waits for the
  // grid before it (dependent_launch.cuh).
  bool prefetch_first_step = false;
};

/// The warp-mma kernel's layout for `p`, or nullopt where it cannot run it:
/// not float16 or bfloat16, before sm_80, x and the weight do not load as
/// 16-byte vectors, R*H reaches 2^30, or B exceeds its grid.
std::optional<WarpMmaPlan> plan_warp_mma(const Problem& p);

/// Whether the Hopper tensor-core kernel can take `p`: built, sm_90,
/// float16, bfloat16 or float32, x and the weight
/// readable by the copy engine, and every size (and the tiles of out) below
/// 2^31.
bool can_run_wgmma(const Problem& p);
/// Whether its ping-pong schedule can take `p`: can_run_wgmma(p), float16
/// or bfloat16.
bool can_run_wgmma_pingpong(const Problem& p);
/// The cluster sizes the split schedule takes, largest first, up to the
/// portable cluster size (not 5 to 7: 6 took longer than 4 at 16 tiles,
/// bench/NOTES.md "v23").
inline constexpr std::array<int, 4> kWgmmaClusterSplitSizes = {8, 4, 3, 2};
static_assert(kWgmmaClusterSplitSizes[0] <= stream::kMaxClusterSplits);
/// The blocks a cluster of the split schedule splits each of `tiles` tiles'
/// contraction of `steps` stages over: the largest of its sizes whose
/// clusters, one a tile, are all resident at once with each block keeping
/// at least 4 of the steps; 2 where none fits at once and pairs keep 4
/// steps, else 1.
int wgmma_cluster_splits(int64_t tiles, int64_t steps,
                         const ResidentClusters& resident);
/// Whether the split schedule can take `p`: can_run_wgmma_pingpong(p), its
/// 128 x 128 tiles in pairs of blocks within the multiprocessors, and 4
/// steps a block of a pair.
bool can_run_wgmma_split(const Problem& p);
/// Whether the stationary-weight kernel can take `p`:
/// can_run_wgmma_pingpong(p), a contraction of up to 8 stages of 64 (one
/// 128-column tile's weight in its consumers' registers), and no more
/// 128-column tiles than multiprocessors.
bool can_run_wgmma_stationary(const Problem& p);
/// The widths in bytes of the heads narrower than a step of the Hopper
/// kernel (128 bytes) that its packed instances take, a step spanning whole
/// heads: float32 heads of 4, 8 and 16, half-type heads of 8, 16 and 32.
inline constexpr std::array<int64_t, 3> kWgmmaPackedHeadBytes = {16, 32, 64};
/// Whether the packed instances (kWgmmaPacked) can take `p`:
/// can_run_wgmma(p), heads of kWgmmaPackedHeadBytes, and float32 in three
/// products (TF32 not allowed) or a half type.
bool can_run_wgmma_packed(const Problem& p);
/// Whether the stationary-weight kernel's `resident` blocks (of
/// `sm_count` multiprocessors, over `tiles` tiles) ask L2 for their first
/// tile's stages before they wait for the grid before them: where they
/// fill at most half the multiprocessors or each takes many tiles.
bool wgmma_stationary_asks_l2_first(int64_t resident, int64_t tiles,
                                    int sm_count);

/// How the Hopper tensor-core kernel's default schedule (kWgmma) cuts the
/// last round of its tiles (tile_schedule.h).
struct WgmmaTailPlan {
  tile_schedule::Layout layout;
  int64_t workspace_bytes = 0;  // tile_schedule::workspace_bytes
};

/// The tail split for float32's `p` in three products (TF32 not allowed),
/// which that schedule can take (can_run_wgmma(p)), or nullopt where its
/// tiles are short, fill whole rounds of the grid or nearly fill the last,
/// or where the last round's would give each block only a few steps.
std::optional<WgmmaTailPlan> plan_wgmma_tail(const Problem& p);

/// The output columns of the Hopper kernel's default-schedule tiles (128
/// rows each) for one pass over `p` (half types, TF32): of 256 and 192,
/// the width whose rounds of tiles over a persistent grid of
/// `p.sm_count` blocks take the least time (rounds times width times the
/// width's measured cost a column), the widest where they tie.
int wgmma_fitted_tile_cols(const Problem& p);

/// A route, with the fused kernel's plan when it is kWarpDot, kWarpMma or
/// kStream, and for kWgmma its tail split where it has one or its one
/// pass's narrower tiles where they fit the grid better (0: the instance's
/// own width).
struct RouteChoice {
  Route route = Route::kCublasCat;
  std::optional<WarpDotPlan> warp_dot;
  std::optional<WarpMmaPlan> warp_mma;
  std::optional<StreamPlan> stream;
  std::optional<WgmmaTailPlan> wgmma_tail;
  int wgmma_tile_cols = 0;
};

/// The route for `p`, by the measured table; requires B, K and R*H > 0 (the
/// torch-facing side answers an empty contraction with the bias itself).
RouteChoice choose(const Problem& p);
/// choose(p).route.
Route choose_route(const Problem& p);

/// Tests and benchmarks force a route with this (nullopt: the policy's).
/// A forced fused kernel falls back to the policy where it cannot run.
void force_route(std::optional<Route> route);
std::optional<Route> forced_route();

}  // namespace fgl::cuda
