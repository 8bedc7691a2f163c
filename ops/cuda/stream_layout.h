// The streaming kernel's fixed geometry and per-launch layout, shared by the
// kernel (stream_kernel.cuh) and the policy that plans it (kernel_choice.h).
// Plain C++: no CUDA type.
#pragma once

#include <cstdint>

namespace fgl::cuda::stream {

constexpr int kCols = 64;         // weight rows (output columns) per block
constexpr int kStageBytes = 128;  // bytes of one weight row per stage: the
                                  // copy engine's 128-byte swizzle span
constexpr int kGroupWarps = 4;    // a consumer group: 16 weight rows a warp

/// Whether an instance (element size, rows of B per block) multiplies on
/// the tensor cores: float16, bfloat16 and float32 (three TF32 products) in
/// n8 tiles of rows; float64 and blocks of fewer rows on the CUDA cores.
constexpr bool uses_tensor_cores(int element_size, int rows) {
  return element_size != 8 && rows >= 8;
}

/// Consumer groups of an instance; groups take stages in turn. Two hide the
/// tensor-core path's latencies; the CUDA-core path streamed faster with one.
constexpr int consumer_groups(int element_size, int rows) {
  return uses_tensor_cores(element_size, rows) ? 2 : 1;
}

/// float32 blocks of at least this many rows multiply by warp group where
/// x rides in the ring (stream_kernel.cuh, MmaMath::group_stages_tf32);
/// blocks of 8 streamed faster by mma.sync (bench/NOTES.md v30).
constexpr int kWarpGroupTf32Rows = 16;

/// Whether an instance has warps of their own split x's stage tiles into
/// their TF32 parts as they land, where x rides in the ring: float32 by
/// warp group.
constexpr bool splits_x(int element_size, int rows) {
  return element_size == 4 && rows >= kWarpGroupTf32Rows;
}

/// Warps that split x's stage tiles, where splits_x: each splits its part of
/// every tile, so that a tile is ready sooner than one warp splits it.
constexpr int kSplitterWarps = 2;

/// Threads of a block: the consumer warps, one producer warp and, where
/// splits_x, the splitter warps.
constexpr int block_threads(int element_size, int rows) {
  return (consumer_groups(element_size, rows) * kGroupWarps + 1 +
          (splits_x(element_size, rows) ? kSplitterWarps : 0)) *
         32;
}

constexpr int kStageTileBytes = kCols * kStageBytes;
/// Weight stages one bulk copy brings to blocks of `rows`, where the weight
/// splits into whole stages: the copy engine streams fewer, larger boxes
/// faster than one stage's, float32's blocks of up to 16 rows where they
/// stream many stages (plan_stream); the half types and 32-row blocks
/// streamed slower so (bench/NOTES.md v44, v45). An instance's copy is a
/// compile-time constant: a runtime one cost more than the larger boxes won.
constexpr int copy_stages(int element_size, int rows) {
  return element_size == 4 && rows <= 16 ? 4 : 1;
}

// The ring, in runs of a copy's slots: a run's weight tiles back to back, so
// that a copy of several stages lands in one piece, then as many x slots
// (where x rides in the ring): x's stage tile and, where splits_x, its TF32
// remainders (stream_kernel.cuh, RingLayout).

/// Bytes of x's tile of one stage in the ring.
constexpr int x_tile_bytes(int rows, bool x_in_ring) {
  return x_in_ring ? rows * kStageBytes : 0;
}
/// Bytes of one x slot: x's tile, followed where splits_x by as many bytes
/// for its TF32 remainders.
constexpr int x_slot_bytes(int element_size, int rows, bool x_in_ring) {
  return x_tile_bytes(rows, x_in_ring) *
         (x_in_ring && splits_x(element_size, rows) ? 2 : 1);
}
/// Bytes of the ring a stage takes: its weight tile and its x slot.
constexpr int slot_bytes(int element_size, int rows, bool x_in_ring) {
  return kStageTileBytes + x_slot_bytes(element_size, rows, x_in_ring);
}
/// Bytes TMA brings for one copy: all of its `copy_stages` weight tiles
/// (those past the block's last stage too) and x's tiles of the `stages` of
/// them the block streams.
constexpr int landed_bytes(int rows, bool x_in_ring, int copy_stages,
                           int stages) {
  return copy_stages * kStageTileBytes + stages * x_tile_bytes(rows, x_in_ring);
}
/// Bytes of a ring slot's mbarriers: full and empty, and where x is split in
/// the ring, split.
constexpr int slot_barrier_bytes(int element_size, int rows, bool x_in_ring) {
  return x_in_ring && splits_x(element_size, rows) ? 24 : 16;
}
/// Blocks a multiprocessor holds at once as far as registers go (the
/// kernel's launch bounds): blocks of 32 rows take over half the register
/// file, and so do float32's warp-group blocks, which hold two stages' weight
/// operands in registers.
constexpr int blocks_per_multiprocessor(int element_size, int rows) {
  return rows >= 32 || (element_size == 4 && rows >= kWarpGroupTf32Rows) ? 1
                                                                         : 2;
}
constexpr int kIssueGroup = 2;        // stages the producer issues back to back
constexpr int kMaxClusterSplits = 8;  // the portable cluster size

/// The per-launch layout the host chose (kernel_choice.h's StreamPlan).
struct Layout {
  int64_t stages_per_split;  // weight stages each block streams
  int64_t slab_pitch;        // elements per slab row (no slab: 0)
  int ring_stages;           // shared-memory stages in flight
  bool x_vectors;            // x rows load as 16-byte vectors
  bool x_in_ring;            // x's stage tiles ride in the ring: no slab
  int prefetch_stages;       // weight stages asked of L2 before the wait
  // The next grid may start only once every block's producer has issued its
  // last copy (else once every block has waited for the grid before).
  bool next_grid_after_last_copy;
};

/// The cluster's exchange of partial sums: a tile's sums travel in 16-byte
/// chunks, split q owning chunks [tile_chunks * q / splits, tile_chunks *
/// (q + 1) / splits), and each block receives the other splits' sums of its
/// chunks into rows of exchange_pitch chunks, one per split.
constexpr int tile_chunks(int rows, int acc_size) {
  return rows * kCols * acc_size / 16;
}
constexpr int exchange_pitch(int rows, int acc_size, int splits) {
  return (tile_chunks(rows, acc_size) + splits - 1) / splits;
}
/// Bytes of the exchange: its rows (none for one split) and its mbarrier.
constexpr int64_t exchange_bytes(int rows, int acc_size, int splits) {
  return (splits > 1
              ? int64_t{splits} * exchange_pitch(rows, acc_size, splits) * 16
              : 0) +
         16;
}

/// Dynamic shared memory of one block: ring (with its mbarriers), x slab,
/// partial sums, bias, the exchange, and slack to align the ring to the
/// swizzle's 1024-byte period.
constexpr int64_t smem_bytes(int ring_stages, int rows, int64_t slab_pitch,
                             int element_size, int acc_size, bool x_in_ring,
                             int splits) {
  return 1024 +
         int64_t{ring_stages} *
             (slot_bytes(element_size, rows, x_in_ring) +
              slot_barrier_bytes(element_size, rows, x_in_ring)) +
         int64_t{rows} * slab_pitch * element_size +
         int64_t{rows + 1} * kCols * acc_size +
         exchange_bytes(rows, acc_size, splits);
}

}  // namespace fgl::cuda::stream
