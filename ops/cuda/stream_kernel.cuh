// The weight-streaming kernel of fgl::gather_linear, for few rows of B
// (decode, small batches), where reading the weight once is the whole cost.
//
// Grid: x = the splits of the contraction c = r*H + h (one thread-block
// cluster along x), y = tiles of kCols output columns, z = tiles of kRows
// rows of B. Each block
//   1. has its producer warp stream its [kCols, c range] weight tile through
//      a ring of shared-memory stages with bulk tensor copies (TMA), each
//      stage a 128-byte-wide tile, swizzled, several of them a copy where
//      the weight's view allows, completing on an mbarrier;
//   2. finds x's rows of a stage beside its weight in the ring, copied by
//      the producer from a 3-D tensor map over x (H, B, R) (the tensor-core
//      instances, where x is laid out for the copy engine and a stage never
//      crosses a head); otherwise the consumers first gather x's rows over
//      the block's whole c range into shared memory (the "slab", read
//      through x's strides). Either way the concatenation never exists.
//   3. multiplies on groups of consumer warps that take stages in turn:
//      tensor cores (mma.sync, the weight in the M slot) for float16,
//      bfloat16 and, three TF32 products a step, float32 (by warp group,
//      wgmma, where x rides in the ring and sm_90a is compiled); CUDA cores
//      for float64 and for float32 blocks of fewer than 8 rows; accumulating
//      in float32 (float64 for double);
//   4. reduces the splits' partial sums across the cluster: each split
//      pushes its sums of the other splits' slices into their shared
//      memory, and each adds its slice's in split order, so that the same
//      inputs give the same bits; adds the bias and stores.
//
// Requires (checked by the host side, kernel_choice.h): the weight contiguous
// along c with 16-byte aligned base and rows (the tensor map's rules). x may
// have any strides.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "gather_linear_params.h"
#include "numeric.cuh"
#include "ptx.cuh"
#include "stream_layout.h"
#include "tf32_split.cuh"

namespace fgl::cuda::stream {

// Byte offset of 16-byte chunk `chunk` of `row` in a stage swizzled by the
// copy engine's 128-byte pattern (chunk index XOR row mod 8).
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return static_cast<uint32_t>(row * kStageBytes + ((chunk ^ (row & 7)) << 4));
}

// Gathers x[b0 + b, c_begin + c] (zero past B and past C) into slab[b][c]
// for c < columns. Thread by column: one division finds the column's head,
// then every row of it is one strided address away. With 16-byte vectors the
// copies are asynchronous (cp.async), so all of them are in flight at once;
// the caller waits with cp.async.wait_all.
template <typename T, int kRows>
__device__ void load_slab(const GatherLinearParams<T>& p, T* slab,
                          const Layout& l, int64_t b0, int64_t c_begin,
                          int64_t columns, int thread, int threads) {
  const int64_t C = p.R * p.H;
  // plan_stream keeps C (and so H and c) below 2^31: 32-bit division.
  const auto head_offset = [&](int64_t c) {
    const int32_t r = static_cast<int32_t>(c) / static_cast<int32_t>(p.H);
    return r * p.x_stride_r + (c - int64_t{r} * p.H) * p.x_stride_h;
  };
  if (l.x_vectors) {
    constexpr int kVec = Vec16<T>::kSize;
    for (int64_t j = thread; j < columns / kVec; j += threads) {
      const int64_t c = c_begin + j * kVec;  // a vector lies in one head
      const T* column = c < C ? p.x + head_offset(c) : p.x;
#pragma unroll
      for (int b = 0; b < kRows; ++b) {
        const bool valid = c < C && b0 + b < p.B;
        ptx::cp_async_16(slab + b * l.slab_pitch + j * kVec,
                         valid ? column + (b0 + b) * p.x_stride_b : p.x,
                         valid ? 16 : 0);
      }
    }
    return;
  }
  for (int64_t j = thread; j < columns; j += threads) {
    const int64_t c = c_begin + j;
    const T* column = c < C ? p.x + head_offset(c) : p.x;
    T v[kRows];
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      v[b] = c < C && b0 + b < p.B ? column[(b0 + b) * p.x_stride_b]
                                   : from_acc<T>(0);
    }
#pragma unroll
    for (int b = 0; b < kRows; ++b) slab[b * l.slab_pitch + j] = v[b];
  }
}

// Where the consumers find x's rows of a stage: the slab, whose rows lie
// pitch bytes apart (padded against bank conflicts), or the stage's x tile
// in the ring, 128-byte rows swizzled like the weight's.
struct SlabRows {
  uint32_t base;  // row 0 at the stage's first column
  uint32_t pitch;
  __device__ __forceinline__ uint32_t at(int row, int chunk) const {
    return base + row * pitch + chunk * 16;
  }
};
struct TileRows {
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int chunk) const {
    return base + swizzled(row, chunk);
  }
};

// Whether this pass compiles warp-group multiplies (sm_90a); other passes
// multiply every instance by mma.sync.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
inline constexpr bool kGroupMma = true;
#else
inline constexpr bool kGroupMma = false;
#endif

// Where a slot's tiles lie in the ring: the slots in runs of `copy`, the
// stages one copy brings, each run its weight tiles back to back (where the
// copy lands) followed by its slots' x tiles (x_slot_size bytes each), on
// the swizzle's 1024-byte period.
struct RingLayout {
  unsigned char* ring;
  int slot_size;  // slot_bytes: a slot's share of its run
  int x_slot_size;
  int copy;  // a power of two
  __device__ __forceinline__ unsigned char* weight(int slot) const {
    return ring + (slot & -copy) * slot_size +
           (slot & (copy - 1)) * kStageTileBytes;
  }
  // A slot's x tile: its run's x slots follow the run's weight tiles.
  __device__ __forceinline__ unsigned char* x(int slot) const {
    return ring + (slot & -copy) * slot_size + copy * kStageTileBytes +
           (slot & (copy - 1)) * x_slot_size;
  }
};

// A consumer group's walk through the ring: group g takes stages g, g +
// groups, ...; with a ring of a multiple of `groups` slots (or one that holds
// every stage, plan_stream) a slot always serves the same group, so its
// phases are waited for in order. Slot and lap advance by counting, as the
// producer's do.
struct GroupRing {
  RingLayout layout;
  // A slot's stage is ready: landed, or where x is split in the ring, split.
  // Slot s waits on ready[s & ready_mask]: the first slot of its copy where
  // that barrier is the copy's.
  uint64_t* ready;
  int ready_mask;
  uint64_t* empty;
  int ring_stages;
  int groups;
  int group;
  int lane;
  int slot = group % ring_stages;
  uint32_t lap = group / ring_stages;

  // Waits for the group's next stage; returns its slot.
  __device__ __forceinline__ int acquire() {
    ptx::mbarrier_wait(&ready[slot & ready_mask], lap & 1);
    const int taken = slot;
    for (slot += groups; slot >= ring_stages;) slot -= ring_stages, ++lap;
    return taken;
  }
  __device__ __forceinline__ uint32_t address(int taken) const {
    return ptx::smem_addr(layout.weight(taken));
  }
  __device__ __forceinline__ uint32_t x_address(int taken) const {
    return ptx::smem_addr(layout.x(taken));
  }
  // Hands a slot back to the producer once the warp is done with it.
  __device__ __forceinline__ void release(int taken) const {
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[taken]);
  }
};

// One 32-byte step along c of a 16-row weight fragment `a` times an 8-row x
// fragment (b0, b1): m16n8k16 for float16/bfloat16, three m16n8k8 TF32
// products for float32.
template <typename T>
struct MmaStep {
  using Sum = float[4];

  __device__ __forceinline__ static void multiply(Sum& acc,
                                                  const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
    ptx::mma_m16n8k16<T>(acc, a, b0, b1);
  }
};

template <>
struct MmaStep<float> {
  // Three accumulators, one per product term, so that consecutive mma.sync
  // do not wait on each other's results.
  using Sum = float[3][4];

  __device__ __forceinline__ static void multiply(Sum& acc,
                                                  const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
    mma_m16n8k8_3xtf32(acc[0], acc[1], acc[2], a, b0, b1);
  }
};

// Tensor cores (float16, bfloat16, float32). Warp w owns weight rows
// [16w, 16w + 16) of the tile, the M side of the mma; the kRows rows of B are
// kRows / 8 n8 tiles. A 32-byte step along c is k16 in half types and k8 in
// float32, so the fragments' byte addressing is the same for both.
// Writes partial[b][column].
template <typename T, int kRows>
struct MmaMath {
  static constexpr int kTiles = kRows / 8;
  static_assert(kRows == 8 || kRows == 16 || kRows == 32, "1, 2 or 4 n8 tiles");
  // float32 blocks of kWarpGroupTf32Rows and more multiply by warp group
  // where x rides in the ring.
  static constexpr bool kByWarpGroup =
      kGroupMma && std::is_same_v<T, float> && kRows >= kWarpGroupTf32Rows;
  float acc[kTiles][4] = {};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // float32 by warp group where kByWarpGroup and x rides in the ring (a
  // consumer group's 4 warps are one warp group): wgmma m64 takes the
  // tile's 64 weight rows, its N the kRows rows of B straight from the ring,
  // whose 128-byte swizzle is wgmma's K-major one, x's TF32 parts split
  // there by the splitter warps; small x big + big x small + big x big as in
  // MmaStep<float>. The group keeps two of its stages in
  // work: it loads and splits the next stage's operands while the tensor
  // cores multiply the last one, whose slot it releases once that stage's
  // sum is added. The 16-bit types multiply by mma.sync, which streamed as
  // fast (bench/NOTES.md v29).
  // `stages`: the group's.
  __device__ __forceinline__ void group_stages_tf32(int64_t stages,
                                                    GroupRing& ring, int warp,
                                                    int lane) {
    if (stages <= 0) return;
    Tf32Operands ops[2];
    float fresh[2][kTiles][4];
    int slot[2];
    for (int64_t i = 0;; i += 2) {
      slot[0] = ring.acquire();
      issue_tf32(ops[0], fresh[0], ring.address(slot[0]),
                 ring.x_address(slot[0]), warp, lane);
      if (i > 0) retire_tf32<1>(fresh[1], ring, slot[1]);
      if (i + 1 == stages) return retire_tf32<0>(fresh[0], ring, slot[0]);
      slot[1] = ring.acquire();
      issue_tf32(ops[1], fresh[1], ring.address(slot[1]),
                 ring.x_address(slot[1]), warp, lane);
      retire_tf32<1>(fresh[0], ring, slot[0]);
      if (i + 2 == stages) return retire_tf32<0>(fresh[1], ring, slot[1]);
    }
  }

  // The weight's TF32 parts of one stage: wgmma's A operand, held in
  // registers until the stage's multiplies are done.
  struct Tf32Operands {
    static constexpr int kSteps = kStageBytes / 32;
    uint32_t big[kSteps][4], small[kSteps][4];
  };

  // Splits the stage's weight tile `w` into registers and starts its 12
  // multiplies into `sum`; x's parts, split in its slot `x`, are read by
  // descriptor.
  __device__ __forceinline__ void issue_tf32(Tf32Operands& a,
                                             float (&sum)[kTiles][4],
                                             uint32_t w, uint32_t x, int warp,
                                             int lane) {
    constexpr int kSteps = Tf32Operands::kSteps;
    const int m = lane / 8;
    const int row = warp * 16 + (m & 1) * 8 + (lane & 7);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      uint32_t v[4];
      ptx::ldmatrix_x4(v, w + swizzled(row, 2 * s + (m >> 1)));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const Tf32Split split = split_tf32(v[i]);
        a.big[s][i] = split.big, a.small[s][i] = split.small;
      }
    }
    const uint64_t b = ptx::wgmma_desc_sw128(x);
    const uint64_t b_small =
        ptx::wgmma_desc_sw128(x + x_tile_bytes(kRows, true));
    // The three products of a step go to one sum, which the tensor cores
    // chain without a wait; a stage's sum starts fresh (see stage below).
    ptx::wgmma_fence();
    ptx::wgmma_rs_tf32<false>(sum, a.small[0], b);
    ptx::wgmma_rs_tf32<true>(sum, a.big[0], b_small);
    ptx::wgmma_rs_tf32<true>(sum, a.big[0], b);
#pragma unroll
    for (int s = 1; s < kSteps; ++s) {
      ptx::wgmma_rs_tf32<true>(sum, a.small[s], b + 2 * s);
      ptx::wgmma_rs_tf32<true>(sum, a.big[s], b_small + 2 * s);
      ptx::wgmma_rs_tf32<true>(sum, a.big[s], b + 2 * s);
    }
    ptx::wgmma_commit();
  }

  // Waits until at most kPending stages' multiplies run (the older one done),
  // adds its sum to the total and hands its slot back.
  template <int kPending>
  __device__ __forceinline__ void retire_tf32(float (&sum)[kTiles][4],
                                              const GroupRing& ring, int slot) {
    ptx::wgmma_wait<kPending>();
    ptx::wgmma_settle(sum);
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[n][j] += sum[n][j];
    }
    ring.release(slot);
  }
#endif

  // X: SlabRows or TileRows, the stage's x rows.
  template <typename X>
  __device__ __forceinline__ void stage(uint32_t ring_slot, const X& x,
                                        int warp, int lane) {
    // The tensor cores add with truncation, not rounding: over a whole
    // contraction that drifts past float32 accuracy. In float32 each stage
    // sums into fresh registers, added to the total with rounded adds.
    if constexpr (std::is_same_v<T, float>) {
      typename MmaStep<T>::Sum sum[kTiles] = {};
      steps(sum, ring_slot, x, warp, lane);
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[n][j] += (sum[n][0][j] + sum[n][1][j]) + sum[n][2][j];
        }
      }
    } else {
      steps(acc, ring_slot, x, warp, lane);
    }
  }

  template <typename X>
  __device__ __forceinline__ static void steps(
      typename MmaStep<T>::Sum (&d)[kTiles], uint32_t ring_slot, const X& x,
      int warp, int lane) {
    const int m = lane / 8;  // which 8x8 (b16) matrix this lane addresses
    const int row = warp * 16 + (m & 1) * 8 + (lane & 7);
    // Pairs of n8 tiles: matrix m is tile m / 2, 16-byte half m % 2.
    const int x_row = (m >> 1) * 8 + (lane & 7);
#pragma unroll
    for (int s = 0; s < kStageBytes / 32; ++s) {
      uint32_t a[4];
      ptx::ldmatrix_x4(a, ring_slot + swizzled(row, 2 * s + (m >> 1)));
      if constexpr (kTiles == 1) {
        uint32_t b[2];
        ptx::ldmatrix_x2(b, x.at(x_row, 2 * s + (m & 1)));
        MmaStep<T>::multiply(d[0], a, b[0], b[1]);
      } else {
#pragma unroll
        for (int pair = 0; pair < kTiles / 2; ++pair) {
          uint32_t b[4];
          ptx::ldmatrix_x4(b, x.at(x_row + pair * 16, 2 * s + (m & 1)));
          MmaStep<T>::multiply(d[2 * pair], a, b[0], b[1]);
          MmaStep<T>::multiply(d[2 * pair + 1], a, b[2], b[3]);
        }
      }
    }
  }

  // Writes (add: adds to) partial[b][column].
  __device__ __forceinline__ void store(float* partial, int warp, int lane,
                                        bool add) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int column = warp * 16 + g + (j >= 2 ? 8 : 0);
        const int b = n * 8 + 2 * t + (j & 1);
        float& out = partial[b * kCols + column];
        out = add ? acc[n][j] + out : acc[n][j];
      }
    }
  }
};

// CUDA cores (float64, and float32 below 8 rows of B). Lane (group, chunk) =
// (lane / 8, lane % 8): 4 weight rows 16w + 4 group + j, one 16-byte chunk of
// each stage row; the 8 chunk lanes' sums meet by shuffles at the end.
template <typename T, int kRows>
struct SimtMath {
  using acc_t = typename AccType<T>::type;
  using V = Vec16<T>;
  static constexpr int kRowsPerLane = 4;
  static constexpr bool kByWarpGroup = false;
  acc_t acc[kRowsPerLane][kRows] = {};

  // slab points at the stage's first column.
  __device__ __forceinline__ void stage(const unsigned char* ring_slot,
                                        const T* slab, int64_t pitch, int warp,
                                        int lane) {
    const int group = lane / 8, chunk = lane % 8;
    V w[kRowsPerLane];
#pragma unroll
    for (int j = 0; j < kRowsPerLane; ++j) {
      const int row = warp * 16 + group * kRowsPerLane + j;
      w[j] = *reinterpret_cast<const V*>(ring_slot + swizzled(row, chunk));
    }
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      const V xv =
          *reinterpret_cast<const V*>(slab + b * pitch + chunk * V::kSize);
#pragma unroll
      for (int e = 0; e < V::kSize; ++e) {
#pragma unroll
        for (int j = 0; j < kRowsPerLane; ++j) {
          acc[j][b] += to_acc(xv.v[e]) * to_acc(w[j].v[e]);
        }
      }
    }
  }

  // Writes (add: adds to) partial[b][column].
  __device__ __forceinline__ void store(acc_t* partial, int warp, int lane,
                                        bool add) {
    const int group = lane / 8, chunk = lane % 8;
#pragma unroll
    for (int j = 0; j < kRowsPerLane; ++j) {
#pragma unroll
      for (int b = 0; b < kRows; ++b) {
        acc_t v = acc[j][b];
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        if (b % 8 == chunk) {
          acc_t& out =
              partial[b * kCols + warp * 16 + group * kRowsPerLane + j];
          out = add ? v + out : v;
        }
      }
    }
  }
};

template <typename T, int kRows>
using Math = std::conditional_t<uses_tensor_cores(sizeof(T), kRows),
                                MmaMath<T, kRows>, SimtMath<T, kRows>>;

// Splitter warp `splitter` of kSplitterWarps: each of the block's `stages`
// x tiles, as it lands in its x slot, split into its TF32 parts, the big
// ones in place and the remainders after the tile, so that the consumer
// groups read both by descriptor without splitting or meeting. The warps
// take a tile in equal parts and each arrives on the slot's split barrier.
// Slot s lands on full[s & full_mask] (GroupRing::ready_mask).
template <int kRows>
__device__ __forceinline__ void split_x_stages(const RingLayout& ring,
                                               uint64_t* full, int full_mask,
                                               uint64_t* split, int ring_stages,
                                               int64_t stages, int splitter,
                                               int lane) {
  constexpr int kChunks = kRows * kStageBytes / 16 / 32 / kSplitterWarps;
  const int first = splitter * kChunks * 32 + lane;  // 16-byte chunks
  int slot = 0;
  uint32_t lap = 0;
  for (int64_t i = 0; i < stages; ++i) {
    ptx::mbarrier_wait(&full[slot & full_mask], lap & 1);
    const uint32_t x = ptx::smem_addr(ring.x(slot));
    const uint32_t remainders = x + x_tile_bytes(kRows, true);
    uint4 v[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      v[c] = ptx::ld_shared_v4(x + (first + c * 32) * 16);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const uint32_t at = (first + c * 32) * 16;
      store_split_tf32(v[c], x + at, remainders + at);
    }
    // The parts, visible to the tensor cores (the async proxy), before the
    // consumers learn of them.
    ptx::fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&split[slot]);
    if (++slot == ring_stages) slot = 0, ++lap;
  }
}

// kCopy: weight stages a copy brings (1, or copy_stages(sizeof(T), kRows) where
// the plan says so).
template <typename T, int kRows, int kCopy>
__global__ void __launch_bounds__(block_threads(sizeof(T), kRows),
                                  blocks_per_multiprocessor(sizeof(T), kRows))
    gather_linear_stream_kernel(const __grid_constant__ CUtensorMap weight_map,
                                const __grid_constant__ CUtensorMap x_map,
                                const GatherLinearParams<T> p, const Layout l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using acc_t = typename AccType<T>::type;
  constexpr int kStageC = kStageBytes / sizeof(T);
  constexpr int kGroups = consumer_groups(sizeof(T), kRows);
  constexpr int kConsumerWarps = kGroups * kGroupWarps;
  constexpr int kThreads = block_threads(sizeof(T), kRows);
  constexpr bool kTensorCores = uses_tensor_cores(sizeof(T), kRows);
  const bool x_in_ring = kTensorCores && l.x_in_ring;
  const int slot_size = slot_bytes(sizeof(T), kRows, x_in_ring);
  static_assert(!Math<T, kRows>::kByWarpGroup || splits_x(sizeof(T), kRows),
                "the warp-group multiplies read x's parts split in the ring");
  // The splitter warps split x's stage tiles where the consumers multiply
  // by warp group.
  const bool x_split_in_ring = Math<T, kRows>::kByWarpGroup && x_in_ring;

  extern __shared__ unsigned char smem[];
  // The ring: [ring_stages][slot_size] in runs of copy_stages slots
  // (RingLayout), a slot [kCols][kStageBytes] of weight and (x_in_ring)
  // [kRows][kStageBytes] of x and (splits_x) [kRows][kStageBytes] of x's
  // TF32 remainders; on the swizzle's 1024-byte period (offsetting the
  // array keeps the compiler's knowledge that these are shared-memory
  // addresses).
  unsigned char* ring = smem + ((1024 - (ptx::smem_addr(smem) & 1023)) & 1023);
  constexpr int copy = kCopy;
  const RingLayout slots{ring, slot_size,
                         x_slot_bytes(sizeof(T), kRows, x_in_ring), copy};
  T* slab = reinterpret_cast<T*>(ring + l.ring_stages * slot_size);
  acc_t* partial = reinterpret_cast<acc_t*>(slab + kRows * l.slab_pitch);
  acc_t* bias = partial + kRows * kCols;  // [kCols]
  constexpr int kTileChunks = tile_chunks(kRows, sizeof(acc_t));
  const int exchange_rows = gridDim.x > 1 ? gridDim.x : 0;
  const int pitch = exchange_pitch(kRows, sizeof(acc_t), gridDim.x);
  // [splits][pitch] 16-byte chunks of partial sums from the other splits
  unsigned char* exchange = reinterpret_cast<unsigned char*>(bias + kCols);
  uint64_t* full =
      reinterpret_cast<uint64_t*>(exchange + exchange_rows * pitch * 16);
  uint64_t* empty = full + l.ring_stages;
  uint64_t* exchanged = empty + l.ring_stages;  // the exchange's arrivals
  uint64_t* x_split = exchanged + 1;  // [ring_stages], where x_split_in_ring
  // x's slab loaded (where x is not in the ring: x_split's place, unused
  // then); an mbarrier rather than a named barrier over the consumer
  // threads, across which compute-sanitizer's racecheck reported races.
  uint64_t* slab_loaded = exchanged + 1;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = warp / kGroupWarps;
  const int group_warp = warp % kGroupWarps;
  const int split = blockIdx.x;  // the block's rank in its cluster
  const int splits = gridDim.x;
  const int64_t k0 = int64_t{blockIdx.y} * kCols;
  const int64_t b0 = int64_t{blockIdx.z} * kRows;
  const int64_t C = p.R * p.H;
  const int64_t total_stages = (C + kStageC - 1) / kStageC;
  const int64_t stage0 = split * l.stages_per_split;
  const int64_t stages =
      max(int64_t{0}, min(l.stages_per_split, total_stages - stage0));

  if (threadIdx.x == 0) {
    for (int i = 0; i < l.ring_stages; ++i) {
      ptx::mbarrier_init(&full[i], 1);
      ptx::mbarrier_init(&empty[i], kGroupWarps);
    }
    ptx::mbarrier_init(exchanged, 1);
    if (!x_in_ring) ptx::mbarrier_init(slab_loaded, kConsumerWarps * 32);
    if (x_split_in_ring) {
      for (int i = 0; i < l.ring_stages; ++i) {
        ptx::mbarrier_init(&x_split[i], kSplitterWarps);
      }
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  // The cluster learns that every block's exchange barrier is set up; its
  // blocks wait for that only when they exchange, long after.
  if (splits > 1) ptx::cluster_arrive_relaxed();
  // A copy brings copy_stages weight stages into consecutive slots: the
  // weight's tensor map (encode_weight_map) is (c, K) with a box of one
  // stage, or (c within a stage, K, stage) with a box of copy_stages.
  const auto copy_weight = [&](unsigned char* dst, uint64_t* bar,
                               int64_t stage) {
    if (copy == 1) {
      ptx::tma_load_2d(dst, &weight_map, bar,
                       static_cast<int32_t>(stage * kStageC),
                       static_cast<int32_t>(k0));
    } else {
      ptx::tma_load_3d(dst, &weight_map, bar, 0, static_cast<int32_t>(k0),
                       static_cast<int32_t>(stage));
    }
  };
  // The weight's first stages are asked of L2 while the grid before this one
  // ends (where that grid let this one start late in its stream, about when
  // its own stream thins out). Safe before the wait: a prefetch only warms
  // L2, which that grid writes through, so no load can see stale bytes.
  if (warp == kConsumerWarps && lane == 0) {
    const int64_t ahead = min(int64_t{l.prefetch_stages}, stages);
    for (int64_t i = 0; i < ahead; i += copy) {
      if (copy == 1) {
        ptx::tma_prefetch_2d(&weight_map,
                             static_cast<int32_t>((stage0 + i) * kStageC),
                             static_cast<int32_t>(k0));
      } else {
        ptx::tma_prefetch_3d(&weight_map, 0, static_cast<int32_t>(k0),
                             static_cast<int32_t>(stage0 + i));
      }
    }
  }
  ptx::wait_previous_grid();
  if (!l.next_grid_after_last_copy) ptx::launch_dependents();

  Math<T, kRows> math;  // the consumers' sums
  if (warp == kConsumerWarps) {
    // Producer: one lane keeps the ring full, a copy or kIssueGroup stages
    // at a time. Slot and lap advance by counting (the ring's depth is a
    // runtime value, and a division by it would cost more than a stage's
    // math); a copy's slots never wrap, the ring a multiple of copies.
    if (lane == 0) {
      ptx::prefetch_tensor_map(&weight_map);
      if (x_in_ring) ptx::prefetch_tensor_map(&x_map);
      int slot = 0;
      uint32_t lap = 0;
      // The next stage's place in x, advanced by counting: a stage lies in
      // one head (plan_stream), so it steps through H in whole stages. The
      // contraction is below 2^31 there (plan_stream), so the one division
      // is 32-bit.
      int32_t x_r = 0;
      int32_t x_h = 0;
      if (x_in_ring) {
        const auto c0 = static_cast<int32_t>(stage0 * kStageC);
        const auto h = static_cast<int32_t>(p.H);
        x_r = c0 / h;
        x_h = c0 - x_r * h;
      }
      // Stages issued back to back: a copy's, or kIssueGroup of one a copy.
      constexpr int kIssue = copy > 1 ? copy : kIssueGroup;
      for (int64_t i0 = 0; i0 < stages; i0 += kIssue) {
        const int n = static_cast<int>(min(int64_t{kIssue}, stages - i0));
        // A copy fills all of its slots, those past the last stage too.
        const int filled = copy > 1 ? copy : n;
        int s = slot;
        uint32_t s_lap = lap;
        for (int q = 0; q < filled; ++q) {
          if (s_lap > 0) ptx::mbarrier_wait(&empty[s], (s_lap - 1) & 1);
          if (++s == l.ring_stages) s = 0, ++s_lap;
        }
        // A copy's stages, x's tiles too, complete on its first slot's
        // barrier.
        uint64_t* bar = &full[slot];
        for (int q = 0; q < filled; ++q) {
          if (copy == 1 || q == 0) {
            bar = &full[slot];
            ptx::mbarrier_arrive_expect_tx(
                bar, copy == 1 ? landed_bytes(kRows, x_in_ring, 1, 1)
                               : landed_bytes(kRows, x_in_ring, copy, n));
            copy_weight(slots.weight(slot), bar, stage0 + i0 + q);
          }
          if (x_in_ring && (copy == 1 || q < n)) {
            ptx::tma_load_3d(slots.x(slot), &x_map, bar, x_h,
                             static_cast<int32_t>(b0), x_r);
            if ((x_h += kStageC) == p.H) x_h = 0, ++x_r;
          }
          if (++slot == l.ring_stages) slot = 0, ++lap;
        }
      }
      if (l.next_grid_after_last_copy) ptx::launch_dependents();
    }
    __syncwarp();  // the warp meets the block barrier below as one
  } else if (warp > kConsumerWarps) {
    // Splitters (split_x_stages).
    if constexpr (splits_x(sizeof(T), kRows)) {
      if (x_split_in_ring) {
        split_x_stages<kRows>(slots, full, -copy, x_split, l.ring_stages,
                              stages, warp - kConsumerWarps - 1, lane);
      }
    }
  } else {
    if (threadIdx.x < kCols) {
      const int64_t k = k0 + threadIdx.x;
      bias[threadIdx.x] = p.bias != nullptr && k < p.K
                              ? to_acc(p.bias[k * p.bias_stride])
                              : acc_t(0);
    }
    if (!x_in_ring) {
      load_slab<T, kRows>(p, slab, l, b0, stage0 * kStageC, stages * kStageC,
                          threadIdx.x, kConsumerWarps * 32);
      ptx::cp_async_wait_all();
      ptx::mbarrier_arrive(slab_loaded);
      ptx::mbarrier_wait(slab_loaded, 0);
    }
    // Where x is split in the ring, a slot is ready when split, each on its
    // own barrier; else when its copy lands.
    GroupRing ring_walk{slots,
                        x_split_in_ring ? x_split : full,
                        x_split_in_ring ? -1 : -copy,
                        empty,
                        l.ring_stages,
                        kGroups,
                        group,
                        lane};
    const int64_t group_stages =
        stages > group ? (stages - group + kGroups - 1) / kGroups : 0;
    bool streamed = false;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (Math<T, kRows>::kByWarpGroup) {
      if (x_in_ring) {
        math.group_stages_tf32(group_stages, ring_walk, group_warp, lane);
        streamed = true;
      }
    }
#endif
    for (int64_t n = 0; !streamed && n < group_stages; ++n) {
      const int64_t i = group + n * kGroups;
      const int slot = ring_walk.acquire();
      if constexpr (kTensorCores) {
        const uint32_t w = ring_walk.address(slot);
        if (x_in_ring) {
          math.stage(w, TileRows{ring_walk.x_address(slot)}, group_warp, lane);
        } else {
          const auto pitch = static_cast<uint32_t>(l.slab_pitch * sizeof(T));
          math.stage(w,
                     SlabRows{ptx::smem_addr(slab) +
                                  static_cast<uint32_t>(i * kStageBytes),
                              pitch},
                     group_warp, lane);
        }
      } else {
        math.stage(slots.weight(slot), slab + i * kStageC, l.slab_pitch,
                   group_warp, lane);
      }
      ring_walk.release(slot);
    }
  }
  // The groups' sums meet in a fixed order: the last group writes, the
  // others add theirs, last to first, block barriers between them.
  for (int g = kGroups - 1; g >= 0; --g) {
    if (warp < kConsumerWarps && group == g) {
      math.store(partial, group_warp, lane, g != kGroups - 1);
    }
    __syncthreads();
  }

  // Epilogue: split q owns chunks [first, last) of the tile's sums. Every
  // other split pushes its sums of them into q's exchange (asynchronous
  // stores counted on q's mbarrier, so no block waits for another to read
  // and none reads remote memory), and q adds them in split order: the same
  // inputs give the same bits.
  constexpr int kPerChunk = 16 / sizeof(acc_t);
  const auto first_chunk = [&](int q) { return kTileChunks * q / splits; };
  const int first = first_chunk(split);
  const int last = first_chunk(split + 1);
  if (splits > 1) {
    if (threadIdx.x == 0) {
      ptx::mbarrier_arrive_expect_tx(exchanged,
                                     (splits - 1) * (last - first) * 16);
    }
    ptx::cluster_wait();  // every block's exchange barrier is set up
    const uint32_t sums = ptx::smem_addr(partial);
    const uint32_t row = ptx::smem_addr(exchange) + split * pitch * 16;
    for (int q = 0; q < splits; ++q) {
      if (q == split) continue;
      const int q_first = first_chunk(q);
      const uint32_t bar = ptx::cluster_map(ptx::smem_addr(exchanged), q);
      for (int c = q_first + threadIdx.x; c < first_chunk(q + 1);
           c += kThreads) {
        ptx::st_async_v4(ptx::cluster_map(row + (c - q_first) * 16, q),
                         ptx::ld_shared_v4(sums + c * 16), bar);
      }
    }
    ptx::mbarrier_wait(exchanged, 0);
  }
  const acc_t* received = reinterpret_cast<const acc_t*>(exchange);
  for (int e = first * kPerChunk + threadIdx.x; e < last * kPerChunk;
       e += kThreads) {
    acc_t v = 0;
    for (int q = 0; q < splits; ++q) {
      v += q == split ? partial[e]
                      : received[q * pitch * kPerChunk + e - first * kPerChunk];
    }
    const int64_t b = b0 + e / kCols;
    const int64_t k = k0 + e % kCols;
    if (b < p.B && k < p.K) {
      if constexpr (std::is_same_v<T, float> && uses_tensor_cores(4, kRows)) {
        if (isnan(v)) v = dot_in_order(p, b, k);
      }
      p.out[b * p.out_stride_b + k * p.out_stride_k] =
          from_acc<T>(v + bias[e % kCols]);
    }
  }
#else
  __trap();  // routed to sm_90 only (kernel_choice.h)
#endif
}

}  // namespace fgl::cuda::stream
