// What the Hopper tensor-core kernel (wgmma_kernel.cuh) and its launcher
// agree on: the element types, each schedule's tiles and pipeline, the
// shared memory, and the tensors the copy engine reads and writes.
// Torch-free.
#pragma once

#include <cutlass/numeric_types.h>

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "gather_linear_params.h"
#include "tile_schedule.h"

namespace fgl::cuda::wgmma {

using namespace cute;

// What the copy engine loads and wgmma multiplies (Operand), what out holds
// (Out), in CuTe's names, and two adjacent columns of out stored as one
// (Pair). float32 multiplies as TF32: in one pass (where the user allowed
// TF32, kernel_choice.h) the copy engine rounds it to TF32 on the way into
// shared memory, as CUTLASS's TF32 GEMMs have it do.
template <typename T>
struct Types;
template <>
struct Types<__half> {
  using Operand = cutlass::half_t;
  using Out = cutlass::half_t;
  using Pair = __half2;
};
template <>
struct Types<__nv_bfloat16> {
  using Operand = cutlass::bfloat16_t;
  using Out = cutlass::bfloat16_t;
  using Pair = __nv_bfloat162;
};
template <>
struct Types<float> {
  using Operand = cutlass::tfloat32_t;
  using Out = float;
  using Pair = float2;
};

inline constexpr int kStages = 4;
inline constexpr int kChunkRows = 64;         // out goes back in 64-row pieces
inline constexpr int kConsumerThreads = 256;  // two warp groups
inline constexpr int kThreads = 128 + kConsumerThreads;
// float32's split: the producer's group's last two warps (2 and 3) split
// the weight's stages as they land.
inline constexpr int kSplitterThreads = 64;
inline constexpr int kFirstSplitterThread = 128 - kSplitterThreads;
inline constexpr int kMaxClusterSplits = 8;  // the portable cluster size

/// kSplit: float32 as three TF32 products of split values (float32
/// accuracy) instead of one TF32 pass. kPingpong: each consumer warp group
/// takes tiles of its own (64 x kBN), the two in turn, so that one rounds
/// and stores its tile while the other multiplies (CUTLASS's "ping-pong");
/// otherwise both share each stage of a 128 x kBN tile (and the split's
/// work on it).
/// kClusterSplit: the blocks of a thread-block cluster take the same tiles,
/// each its share of the contraction, and add their sums in split order
/// through distributed shared memory (half types, shared tiles).
/// kTailSplit: the last round of shared tiles cut along their steps over
/// every block (tile_schedule.h), where whole tiles would leave blocks idle
/// (float32's three products). kCols: the output columns of one pass's
/// shared tiles (half types, TF32), 0 for the schedule's own
/// (kernel_choice.h's wgmma_fitted_tile_cols chooses). kPackedHeads: 0
/// where a step lies within one head, (h-tile, r) in turn; else the width
/// of heads narrower than a step, kBK / kPackedHeads whole heads a step
/// (shared tiles dealt whole, the instance's own width).
template <typename T, bool kSplit = false, bool kPingpong_ = false,
          bool kClusterSplit_ = false, bool kTailSplit_ = false, int kCols = 0,
          int kPackedHeads_ = 0>
struct Config {
  static_assert(!kSplit || std::is_same_v<T, float>, "a float32 instance");
  static_assert(!(kSplit && kPingpong_), "the split shares its stages");
  static_assert(!kClusterSplit_ ||
                    (!kSplit && !kPingpong_ && !std::is_same_v<T, float>),
                "the cluster split: half types, shared tiles");
  static_assert(!kTailSplit_ || kSplit,
                "the tail split: float32's three products");
  static_assert(kCols == 0 || (!kSplit && !kPingpong_ && !kClusterSplit_ &&
                               !kTailSplit_ && kCols % 64 == 0 && kCols <= 256),
                "other widths: one pass over shared tiles dealt whole");
  static constexpr bool kSplitTf32 = kSplit;
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kClusterSplit = kClusterSplit_;
  static constexpr bool kTailSplit = kTailSplit_;
  static constexpr int kPackedHeads = kPackedHeads_;
  static_assert(kPackedHeads == 0 || (!kPingpong_ && !kClusterSplit_ &&
                                      !kTailSplit_ && kCols == 0),
                "packed heads: shared tiles dealt whole");
  static constexpr int kBM = kPingpong ? 64 : 128;  // rows of B per tile
  using Element = typename Types<T>::Operand;
  // What the copy engine loads: the operand, or float32 to be split.
  using Loaded = std::conditional_t<kSplit, float, Element>;
  using Out = typename Types<T>::Out;
  // Output columns per block. The split holds two accumulator sets a
  // thread, the tile's total and a fresh sum (stages_per_sum below). The
  // cluster split's tiles are narrower too: twice as many clusters.
  static constexpr int kBN =
      kCols != 0 ? kCols : (kSplit || kClusterSplit ? 128 : 256);
  // The split's stages summed in fresh registers before a rounded add to
  // the tile's total: the tensor cores truncate each add (bench/NOTES.md
  // v9), so the error grows with a sum's stages, and fewer stages a sum
  // leave the tensor cores idle more often (a sum is added once its
  // multiplies are done). Four where the contraction is long (`steps`
  // stages a tile) and cuBLAS's own float32 error is larger, two otherwise
  // (bench/NOTES.md v47).
  static constexpr int stages_per_sum(int steps) { return steps >= 64 ? 4 : 2; }
  // Contraction per stage and columns per piece of out: 128-byte rows, the
  // width of the swizzle.
  static constexpr int kBK = 128 / sizeof(Element);
  static constexpr int kChunkCols = 128 / sizeof(Out);
  // Whole heads a step, each row of them at least a 16-byte vector (the
  // copy engine's innermost box).
  static_assert(kPackedHeads == 0 || (kBK % kPackedHeads == 0 &&
                                      kPackedHeads * sizeof(Element) % 16 == 0),
                "packed heads divide a step");
  // A tile's steps: k_tiles along each of r_steps heads in turn, or with
  // packed heads k_tiles steps of whole heads (one pass, r_steps 1).
  CUTE_HOST_DEVICE static int k_tiles(const GatherLinearParams<T>& p) {
    return kPackedHeads == 0
               ? static_cast<int>((p.H + kBK - 1) / kBK)
               : static_cast<int>((p.R * kPackedHeads + kBK - 1) / kBK);
  }
  CUTE_HOST_DEVICE static int r_steps(const GatherLinearParams<T>& p) {
    return kPackedHeads == 0 ? static_cast<int>(p.R) : 1;
  }
  CUTE_HOST_DEVICE static int steps(const GatherLinearParams<T>& p) {
    return k_tiles(p) * r_steps(p);
  }
  using TileA = Shape<Int<kBM>, Int<kBK>>;
  using TileB = Shape<Int<kBN>, Int<kBK>>;
  // 128-byte swizzled rows: what both TMA writes and wgmma reads without
  // bank conflicts.
  // x's tiles of packed heads are not swizzled: the copy engine's boxes of
  // whole heads are narrower than the swizzle's 128-byte rows, and land as
  // wgmma's plain 8-row core matrices instead.
  using SmemLayoutA = decltype(tile_to_shape(
      std::conditional_t<kPackedHeads == 0, GMMA::Layout_K_SW128_Atom<Element>,
                         GMMA::Layout_K_INTER_Atom<Element>>{},
      make_shape(Int<kBM>{}, Int<kBK>{}, Int<kStages>{})));
  using SmemLayoutB = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{})));
  // The weight's remainders, a stage a slot of the ring: a slot's are
  // written again only once its next stage has landed, after the consumers
  // released it.
  using SmemLayoutSmallB = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{})));
  // A consumer warp group multiplies 64 rows of a tile. The split
  // takes x from registers (split there), so that the tensor cores read only
  // the weight from shared memory, whose bandwidth the three products and
  // the split share.
  using MmaShape = Shape<Int<64>, Int<kBN>, Int<kBK>>;
  using TiledMma = decltype(make_tiled_mma(
      std::conditional_t<
          kSplit,
          decltype(GMMA::rs_op_selector<Element, Element, float, MmaShape,
                                        GMMA::Major::K, GMMA::Major::K>()),
          decltype(GMMA::ss_op_selector<Element, Element, float, MmaShape,
                                        GMMA::Major::K, GMMA::Major::K>())>{},
      Layout<Shape<Int<kBM / 64>, _1, _1>>{}));
  // One consumer warp group's 64-row piece of out on its way to the copy
  // engine, swizzled like the operands (conflict-free pair stores).
  using SmemLayoutC =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Out>{},
                             make_shape(Int<kChunkRows>{}, Int<kChunkCols>{})));
  using TileC = Shape<Int<kChunkRows>, Int<kChunkCols>>;
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  // The tiles' bias, read by a warp of its own one tile ahead.
  static constexpr int kBiasSlots = 2;
  using BiasPipeline = cutlass::PipelineAsync<kBiasSlots>;
  static constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(Element);
  // The cluster split's float32 sums of a tile, rows padded against bank
  // conflicts, in the ring (which then holds only the tile's last stages).
  static constexpr int kPartialPitch = kBN + 8;
};

// The weight's remainders and, a slot each, the mbarrier that tells the
// consumers the slot's weight is split (none without the split).
template <typename Cfg, bool = Cfg::kSplitTf32>
struct SmallParts {};
template <typename Cfg>
struct SmallParts<Cfg, true> {
  alignas(1024) ArrayEngine<typename Cfg::Element,
                            cosize_v<typename Cfg::SmemLayoutSmallB>> b;
  uint64_t split[kStages];
};

// What the tail split's consumer warp groups learn of their arrival at a
// tile: how many arrived before them (nothing without the tail split).
template <typename Cfg, bool = Cfg::kTailSplit>
struct TailArrivals {};
template <typename Cfg>
struct TailArrivals<Cfg, true> {
  int before[2];
};

/// Where the tail split's blocks meet (tile_schedule.h): the layout, the
/// arrival counts (zeroed before the launch) and the slots' float32 sums.
/// Empty for the instances that deal every tile whole.
template <bool kTailSplit>
struct Tail {};
template <>
struct Tail<true> {
  tile_schedule::Layout layout;
  int* counts;
  float* sums;
};

template <typename Cfg>
struct SharedStorage {
  alignas(1024)
      ArrayEngine<typename Cfg::Element, cosize_v<typename Cfg::SmemLayoutA>> a;
  alignas(1024)
      ArrayEngine<typename Cfg::Element, cosize_v<typename Cfg::SmemLayoutB>> b;
  // Two pieces of out per consumer warp group: one is filled while the
  // copy engine reads the other.
  alignas(1024) ArrayEngine<typename Cfg::Out,
                            cosize_v<typename Cfg::SmemLayoutC>> c[2][2];
  SmallParts<Cfg> small;
  float bias[Cfg::kBiasSlots][Cfg::kBN];
  typename Cfg::Pipeline::SharedStorage pipeline;
  typename Cfg::BiasPipeline::SharedStorage bias_pipeline;
  TailArrivals<Cfg> tail;
};

// The tensors the copy engine is described over (host and device agree), of
// the element type E it loads: (B, H, R) and (K, H, R), tiled along H a step
// at a time. With kPackedHeads, heads of that static width fold into one
// contraction mode, (B, (H, R), 1) and (K, (H, R), 1), which a step's tile
// crosses head by head: the copy engine reads x into the unswizzled tiles
// of SmemLayoutA as boxes of (16 bytes of a head, rows, heads), zero past
// the last head, and the weight's columns as a plain 2-D box.
template <typename E, int kPackedHeads = 0, typename T>
CUTE_HOST_DEVICE auto x_tensor(const GatherLinearParams<T>& p) {
  const auto x = make_gmem_ptr(reinterpret_cast<const E*>(p.x));
  const int B = static_cast<int>(p.B), R = static_cast<int>(p.R);
  if constexpr (kPackedHeads == 0) {
    return make_tensor(x, make_shape(B, static_cast<int>(p.H), R),
                       make_stride(p.x_stride_b, Int<1>{}, p.x_stride_r));
  } else {
    return make_tensor(
        x, make_shape(B, make_shape(Int<kPackedHeads>{}, R), Int<1>{}),
        make_stride(p.x_stride_b, make_stride(Int<1>{}, p.x_stride_r),
                    Int<0>{}));
  }
}

template <typename E, int kPackedHeads = 0, typename T>
CUTE_HOST_DEVICE auto weight_tensor(const GatherLinearParams<T>& p) {
  const auto w = make_gmem_ptr(reinterpret_cast<const E*>(p.weight));
  const int K = static_cast<int>(p.K), R = static_cast<int>(p.R);
  if constexpr (kPackedHeads == 0) {
    return make_tensor(w, make_shape(K, static_cast<int>(p.H), R),
                       make_stride(p.weight_stride_k, Int<1>{}, p.H));
  } else {
    return make_tensor(
        w, make_shape(K, make_shape(Int<kPackedHeads>{}, R), Int<1>{}),
        make_stride(p.weight_stride_k,
                    make_stride(Int<1>{}, Int<kPackedHeads>{}), Int<0>{}));
  }
}

template <typename T>
CUTE_HOST_DEVICE auto out_tensor(const GatherLinearParams<T>& p) {
  using E = typename Types<T>::Out;
  return make_tensor(make_gmem_ptr(reinterpret_cast<E*>(p.out)),
                     make_shape(static_cast<int>(p.B), static_cast<int>(p.K)),
                     make_stride(p.out_stride_b, Int<1>{}));
}

/// Whether out can be written by the copy engine (out_tensor's layout, rows
/// 16-byte aligned).
template <typename T>
bool out_tma_ok(const GatherLinearParams<T>& p) {
  return p.out_stride_k == 1 && p.out_stride_b > 0 &&
         p.out_stride_b * sizeof(T) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
}

/// Stand for the store atom where the copy engine cannot write out (rows
/// not 16-byte aligned): plain stores a row at a time from shared memory
/// where out's columns are contiguous (RowStores), else from the
/// accumulators (NoTmaStore).
struct NoTmaStore {};
struct RowStores {};

/// Whether TmaC is the copy engine's store atom.
template <typename TmaC>
inline constexpr bool kCopyEngineStores =
    !std::is_same_v<TmaC, NoTmaStore> && !std::is_same_v<TmaC, RowStores>;

template <typename T>
using Pair = typename Types<T>::Pair;

// The consumers' named barriers (0 is __syncthreads', 1 and 2 store_pieces'):
// for the cluster split's epilogue (both groups done with the ring),
inline constexpr uint32_t kClusterSplitBarrier = 3;
// and for ping-pong's turns at the ring: group g waits on kTurnBarrier + g.
inline constexpr uint32_t kTurnBarrier = 4;

}  // namespace fgl::cuda::wgmma
