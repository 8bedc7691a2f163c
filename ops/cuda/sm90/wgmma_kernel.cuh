// The Hopper tensor-core kernel of fgl::gather_linear (sm_90a), for problems
// with many rows. Torch-free.
//
// The concatenation's K-index r*H + h never needs building: seen as a
// batched GEMM, x is A = (B, H, R) with strides (x_stride_b, 1, x_stride_r)
// and the weight is W = (K, H, R) with strides (weight_stride_k, 1, H), and
// out = sum over r of A[:, :, r] @ W[:, :, r]^T. The copy engine (TMA) reads
// (128 x 128 bytes) tiles of x[r] and (256 x 128 bytes) tiles of
// W[:, r*H : (r+1)*H] where they lie, zero-filling past B, K and H, so an H
// that is not a multiple of the K-tile (64 halves, 32 floats) costs zeros
// multiplied, not a second path. The contraction walks the (h-tile, r)
// pairs in order. float16 and bfloat16 multiply as they are; float32 as
// TF32 where the user allowed TF32, else at float32 accuracy as three TF32
// products (tf32_split.cuh): the copy engine loads float32 as it is, the
// consumers split the weight's stages in shared memory (the big parts in
// place, the remainders beside them) and x's in registers, which wgmma
// takes as its A operand.
//
// A persistent block per multiprocessor takes 128 x 256 tiles of out in
// turn (128 x 128 for float32's split, whose two register sets need the
// room): a producer warp group issues the copies into a ring of kStages
// stages (an mbarrier pipeline), two consumer warp groups multiply with
// wgmma (64 x 256 or 64 x 128 each, float32 accumulators), add the bias in
// float32, round once to T and hand the tile back through shared memory to
// TMA stores, while the producer already fills the next tile's stages and a
// warp of the producer's group reads the next tile's bias. In the ping-pong
// schedule (half types) each consumer warp group takes 64 x 256 tiles of
// its own instead, the two in turn, so that one's epilogue overlaps the
// other's multiplies.
#pragma once

#include <cooperative_groups.h>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "gather_linear_params.h"
#include "numeric.cuh"
#include "ptx.cuh"
#include "tf32_split.cuh"

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

/// kSplit: float32 as three TF32 products of split values (float32
/// accuracy) instead of one TF32 pass. kPingpong: each consumer warp group
/// takes tiles of its own (64 x kBN), the two in turn, so that one rounds
/// and stores its tile while the other multiplies (CUTLASS's "ping-pong");
/// otherwise both share each stage of a 128 x kBN tile (and the split's
/// work on it).
/// kClusterSplit: the blocks of a thread-block cluster take the same tiles,
/// each its share of the contraction, and add their sums in split order
/// through distributed shared memory (half types, shared tiles).
template <typename T, bool kSplit = false, bool kPingpong_ = false,
          bool kClusterSplit_ = false>
struct Config {
  static_assert(!kSplit || std::is_same_v<T, float>, "a float32 instance");
  static_assert(!(kSplit && kPingpong_), "the split shares its stages");
  static_assert(!kClusterSplit_ ||
                    (!kSplit && !kPingpong_ && !std::is_same_v<T, float>),
                "the cluster split: half types, shared tiles");
  static constexpr bool kSplitTf32 = kSplit;
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kClusterSplit = kClusterSplit_;
  static constexpr int kBM = kPingpong ? 64 : 128;  // rows of B per tile
  using Element = typename Types<T>::Operand;
  // What the copy engine loads: the operand, or float32 to be split.
  using Loaded = std::conditional_t<kSplit, float, Element>;
  using Out = typename Types<T>::Out;
  // Output columns per block. The split sums each pair of stages in fresh
  // registers added to the tile's total with rounded adds (the tensor cores
  // truncate their sums, bench/NOTES.md v9): two accumulator sets a thread.
  // The cluster split's tiles are narrower too: twice as many clusters.
  static constexpr int kBN = kSplit || kClusterSplit ? 128 : 256;
  // Contraction per stage and columns per piece of out: 128-byte rows, the
  // width of the swizzle.
  static constexpr int kBK = 128 / sizeof(Element);
  static constexpr int kChunkCols = 128 / sizeof(Out);
  using TileA = Shape<Int<kBM>, Int<kBK>>;
  using TileB = Shape<Int<kBN>, Int<kBK>>;
  // 128-byte swizzled rows: what both TMA writes and wgmma reads without
  // bank conflicts.
  using SmemLayoutA = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kBM>{}, Int<kBK>{}, Int<kStages>{})));
  using SmemLayoutB = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{})));
  // The weight's remainders, kSmallStages stages of them: one is written
  // while the tensor cores read the two before (the consumer loop below).
  static constexpr int kSmallStages = 3;
  using SmemLayoutSmallB = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kBN>{}, Int<kBK>{}, Int<kSmallStages>{})));
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

// The weight's remainders (none without the split).
template <typename Cfg, bool = Cfg::kSplitTf32>
struct SmallParts {};
template <typename Cfg>
struct SmallParts<Cfg, true> {
  alignas(1024) ArrayEngine<typename Cfg::Element,
                            cosize_v<typename Cfg::SmemLayoutSmallB>> b;
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
  uint64_t split_barrier;  // the cluster split's meetings
};

// The tensors the copy engine is described over (host and device agree), of
// the element type E it loads.
template <typename E, typename T>
CUTE_HOST_DEVICE auto x_tensor(const GatherLinearParams<T>& p) {
  return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(p.x)),
                     make_shape(static_cast<int>(p.B), static_cast<int>(p.H),
                                static_cast<int>(p.R)),
                     make_stride(p.x_stride_b, Int<1>{}, p.x_stride_r));
}

template <typename E, typename T>
CUTE_HOST_DEVICE auto weight_tensor(const GatherLinearParams<T>& p) {
  return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(p.weight)),
                     make_shape(static_cast<int>(p.K), static_cast<int>(p.H),
                                static_cast<int>(p.R)),
                     make_stride(p.weight_stride_k, Int<1>{}, p.H));
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

/// Stands for the store atom where out is written by plain stores.
struct NoTmaStore {};

template <typename T>
using Pair = typename Types<T>::Pair;

// The sum of out[m][n] without the bias: the tile's accumulator, or where
// float32's split left it NaN (an infinite operand), the sum in contraction
// order.
template <bool kSplit, typename T>
__device__ __forceinline__ float settled(float sum,
                                         const GatherLinearParams<T>& p, int m,
                                         int n) {
  if constexpr (kSplit) {
    if (isnan(sum) && m < p.B && n < p.K) return dot_in_order_call(p, m, n);
  }
  return sum;
}

// Adds the bias, rounds once and stores the block's accumulators where out
// is not the copy engine's; pairs of adjacent columns go out as one
// 4-byte store where out allows it.
template <bool kSplit, typename T, typename Accum, typename Coords>
__device__ __forceinline__ void store_tile(const GatherLinearParams<T>& p,
                                           const Accum& accum,
                                           const Coords& coords) {
  const bool pairs = p.out_stride_k == 1 && p.out_stride_b % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(p.out) % sizeof(Pair<T>) == 0;
  CUTE_UNROLL
  for (int i = 0; i < size(accum); i += 2) {
    const int m = get<0>(coords(i));
    const int n = get<1>(coords(i));
    if (m >= p.B) continue;
    float v0 = settled<kSplit>(accum(i), p, m, n);
    float v1 = settled<kSplit>(accum(i + 1), p, m, n + 1);
    if (p.bias != nullptr) {
      v0 += to_acc(p.bias[n * p.bias_stride]);
      if (n + 1 < p.K) v1 += to_acc(p.bias[(n + 1) * p.bias_stride]);
    }
    T* row = p.out + m * p.out_stride_b;
    if (pairs && n + 1 < p.K) {
      Pair<T> pair;
      pair.x = from_acc<T>(v0);
      pair.y = from_acc<T>(v1);
      *reinterpret_cast<Pair<T>*>(row + n) = pair;
    } else {
      if (n < p.K) row[n * p.out_stride_k] = from_acc<T>(v0);
      if (n + 1 < p.K) row[(n + 1) * p.out_stride_k] = from_acc<T>(v1);
    }
  }
}

// Hands a consumer warp group's 64-row share of the tile to the copy engine
// in 128-byte wide pieces through two alternating buffers; rows past B and
// columns past K are clipped by the copy engine.
template <typename Cfg, typename T, typename TmaC, typename Accum,
          typename Buffers>
__device__ __forceinline__ void store_pieces(
    const TmaC& tma_c, const GatherLinearParams<T>& p, const Accum& accum,
    Buffers& buffers, const float* bias, int m_chunk, int n_block, int consumer,
    int& pieces) {
  const int group = consumer / 128, thread = consumer % 128;
  const int warp = thread / 32, g = thread % 32 / 4, t = thread % 4;
  const uint32_t barrier = 1 + group;  // 0 is __syncthreads'
  Tensor mC = tma_c.get_tma_tensor(shape(out_tensor(p)));
  constexpr int kCols = Cfg::kChunkCols;
  CUTE_UNROLL
  for (int piece = 0; piece < Cfg::kBN / kCols; ++piece, ++pieces) {
    auto& buffer = buffers[pieces % 2];
    Tensor sC =
        make_tensor(make_smem_ptr(buffer.begin()), typename Cfg::SmemLayoutC{});
    // The copy engine has finished reading this buffer (two pieces ago).
    if (thread == 0) tma_store_wait<1>();
    cutlass::arch::NamedBarrier::sync(128, barrier);
    // Accumulator i of the 64 x N wgmma layout: row 16 warp + g + 8 (i / 2
    // % 2), column 8 (i / 4) + 2 t + i % 2.
    CUTE_UNROLL
    for (int j = 0; j < kCols / 8; ++j) {
      CUTE_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int i = 4 * (piece * kCols / 8 + j) + 2 * half;
        const int row = 16 * warp + g + 8 * half;
        const int column = 8 * j + 2 * t;
        const int m = m_chunk * kChunkRows + row;
        const int n = n_block * Cfg::kBN + piece * kCols + column;
        const float* b = bias + piece * kCols + column;
        Pair<T> pair;
        pair.x =
            from_acc<T>(settled<Cfg::kSplitTf32>(accum(i), p, m, n) + b[0]);
        pair.y = from_acc<T>(
            settled<Cfg::kSplitTf32>(accum(i + 1), p, m, n + 1) + b[1]);
        *reinterpret_cast<Pair<T>*>(raw_pointer_cast(&sC(row, column))) = pair;
      }
    }
    tma_store_fence();  // the stores above, visible to the copy engine
    cutlass::arch::NamedBarrier::sync(128, barrier);
    if (thread == 0) {
      Tensor gC =
          local_tile(mC, typename Cfg::TileC{},
                     make_coord(m_chunk, n_block * (Cfg::kBN / kCols) + piece));
      auto [tCgC, tCsC] =
          tma_partition(tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sC),
                        group_modes<0, 2>(gC));
      copy(tma_c, tCsC, tCgC);
      tma_store_arrive();
    }
  }
}

// Splits kCount float32 values of shared memory in place into their TF32
// big parts, the TF32 remainders going to `small` at the same offsets. The
// consumers share the work, each thread loading all of its vectors before
// it stores any (the loads are in flight together); the caller fences and
// synchronises before the tensor cores read the parts.
template <int kCount>
__device__ __forceinline__ void split_in_place(const void* values,
                                               const void* small,
                                               int consumer) {
  constexpr int kVectors = kCount / 4 / kConsumerThreads;  // a thread's
  static_assert(kCount == 4 * kConsumerThreads * kVectors, "whole vectors");
  const uint32_t v = ptx::smem_addr(values) + 16 * consumer;
  const uint32_t s = ptx::smem_addr(small) + 16 * consumer;
  constexpr uint32_t kStride = 16 * kConsumerThreads;
  uint4 in[kVectors];
  CUTE_UNROLL
  for (int i = 0; i < kVectors; ++i) in[i] = ptx::ld_shared_v4(v + kStride * i);
  CUTE_UNROLL
  for (int i = 0; i < kVectors; ++i) {
    const Tf32Split x = split_tf32(in[i].x), y = split_tf32(in[i].y),
                    z = split_tf32(in[i].z), w = split_tf32(in[i].w);
    ptx::st_shared_v4(v + kStride * i, make_uint4(x.big, y.big, z.big, w.big));
    ptx::st_shared_v4(s + kStride * i,
                      make_uint4(x.small, y.small, z.small, w.small));
  }
}

// The consumers' named barriers (0 is __syncthreads', 1 and 2 store_pieces'):
// for the split stage,
inline constexpr uint32_t kSplitBarrier = 3;
// and for ping-pong's turns at the ring: group g waits on kTurnBarrier + g.
inline constexpr uint32_t kTurnBarrier = 4;

// The cluster split's epilogue: the blocks of a cluster have each summed
// their share of the tile's contraction into `accum`; each writes its sums
// to shared memory, and block q adds the q-th slice of the tile's rows over
// every block's sums in split order (the same bits whichever finishes
// first), adds the bias, rounds once and stores. Two meetings of the
// cluster's consumers: the sums are written; no block reads another's any
// more. A meeting: the block's consumers synchronise, one thread releases
// their writes to each block of the cluster by arriving on its
// split_barrier (one arrival a block), and all wait for their own.
template <typename Cfg, typename T, typename Accum, typename Coords,
          typename Storage, typename BiasPipeline, typename BiasState>
__device__ __forceinline__ void add_in_cluster(
    const GatherLinearParams<T>& p, const Accum& accum, const Coords& coords,
    Storage& smem, BiasPipeline& bias_pipeline, BiasState& bias_read,
    int m_block, int n_block, int rank, int splits, int consumer,
    uint32_t& meetings) {
  namespace cg = cooperative_groups;
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kPitch = Cfg::kPartialPitch;
  static_assert(kBM * kPitch * sizeof(float) <= sizeof(smem.a) + sizeof(smem.b),
                "the sums fit in the ring");
  float* sums = reinterpret_cast<float*>(smem.a.begin());
  const auto meet = [&] {
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kSplitBarrier);
    if (consumer == 0) {
      for (int q = 0; q < splits; ++q) {
        ptx::mbarrier_arrive_in_block(&smem.split_barrier, q);
      }
    }
    ptx::mbarrier_wait<true>(&smem.split_barrier, meetings & 1);
    ++meetings;
  };
  // Both consumer groups' multiplies are done with the ring.
  cutlass::arch::NamedBarrier::sync(kConsumerThreads, kSplitBarrier);
  // Accumulators i and i + 1 are adjacent columns of one row.
  CUTE_UNROLL
  for (int i = 0; i < size(accum); i += 2) {
    const int row = get<0>(coords(i)) - m_block * kBM;
    const int column = get<1>(coords(i)) - n_block * kBN;
    *reinterpret_cast<float2*>(sums + row * kPitch + column) =
        make_float2(accum(i), accum(i + 1));
  }
  meet();
  bias_pipeline.consumer_wait(bias_read);
  const float* bias = smem.bias[bias_read.index()];
  const cg::cluster_group cluster = cg::this_cluster();
  const int first_row = kBM * rank / splits;
  const int rows = kBM * (rank + 1) / splits - first_row;
  constexpr int kQuads = kBN / 4;  // four columns a thread at a time
  for (int e = consumer; e < rows * kQuads; e += kConsumerThreads) {
    const int row = first_row + e / kQuads, column = 4 * (e % kQuads);
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int q = 0; q < splits; ++q) {
      const float4 w = *reinterpret_cast<const float4*>(
          cluster.map_shared_rank(sums + row * kPitch + column, q));
      v[0] += w.x;
      v[1] += w.y;
      v[2] += w.z;
      v[3] += w.w;
    }
    const int64_t m = int64_t{m_block} * kBM + row;
    if (m >= p.B) continue;
    T* out = p.out + m * p.out_stride_b;
    for (int c = 0; c < 4; ++c) {
      const int64_t n = int64_t{n_block} * kBN + column + c;
      if (n < p.K)
        out[n * p.out_stride_k] = from_acc<T>(v[c] + bias[column + c]);
    }
  }
  bias_pipeline.consumer_release(bias_read);
  ++bias_read;
  meet();
}

/// Grid: persistent, at most one block per multiprocessor, each taking the
/// kBM x kBN tiles of out in turn, columns fastest (the tiles in flight
/// share their x rows in L2). kThreads threads; dynamic shared memory
/// sizeof(SharedStorage<Config<T, kSplit, kPingpong>>).
template <typename T, bool kSplit, bool kPingpong, bool kClusterSplit,
          typename TmaA, typename TmaB, typename TmaC>
__global__ void __launch_bounds__(kThreads, 1)
    gather_linear_wgmma_kernel(const __grid_constant__ TmaA tma_a,
                               const __grid_constant__ TmaB tma_b,
                               const __grid_constant__ TmaC tma_c,
                               const GatherLinearParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = Config<T, kSplit, kPingpong, kClusterSplit>;
  using Pipeline = typename Cfg::Pipeline;
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN;
  // The threads that multiply a tile (and release its stages).
  constexpr int kTileThreads = Cfg::kPingpong ? 128 : kConsumerThreads;
  extern __shared__ char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage<Cfg>*>(smem_raw);

  const int n_tiles = (static_cast<int>(p.K) + kBN - 1) / kBN;
  const int tiles = (static_cast<int>(p.B) + kBM - 1) / kBM * n_tiles;
  const int warp_group = threadIdx.x / 128;
  // In the cluster split a cluster takes the tiles a block takes otherwise.
  namespace cg = cooperative_groups;
  const int splits =
      kClusterSplit ? static_cast<int>(cg::this_cluster().num_blocks()) : 1;
  const int rank =
      kClusterSplit ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int first_tile = blockIdx.x / splits;
  const int tile_stride = gridDim.x / splits;

  typename Pipeline::Params params;
  params.transaction_bytes = Cfg::kStageBytes;
  params.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer
                                : Pipeline::ThreadCategory::Consumer;
  params.is_leader = threadIdx.x == 0;
  params.num_consumers = kTileThreads;
  Pipeline pipeline(smem.pipeline, params, Shape<_1, _1, _1>{});
  // Where out goes through the copy engine, warp 1 reads each tile's bias
  // into shared memory while the tile before is multiplied.
  constexpr bool kBiasWarp = !std::is_same_v<TmaC, NoTmaStore> || kClusterSplit;
  using BiasPipeline = typename Cfg::BiasPipeline;
  typename BiasPipeline::Params bias_params;
  bias_params.role =
      threadIdx.x / 32 == 1
          ? BiasPipeline::ThreadCategory::Producer
          : (warp_group == 0 ? BiasPipeline::ThreadCategory::NonParticipant
                             : BiasPipeline::ThreadCategory::Consumer);
  bias_params.producer_arv_count = 32;
  bias_params.consumer_arv_count = kTileThreads;
  BiasPipeline bias_pipeline(smem.bias_pipeline, bias_params);
  if (kClusterSplit && threadIdx.x == 0) {
    ptx::mbarrier_init(&smem.split_barrier, splits);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  // Every block's barriers are set up before another block arrives on them.
  if constexpr (kClusterSplit) cg::this_cluster().sync();
  ptx::await_previous_grid();

  Tensor sA = make_tensor(make_smem_ptr(smem.a.begin()),
                          typename Cfg::SmemLayoutA{});  // (BM, BK, stage)
  Tensor sB = make_tensor(make_smem_ptr(smem.b.begin()),
                          typename Cfg::SmemLayoutB{});  // (BN, BK, stage)
  const int k_tiles = (static_cast<int>(p.H) + Cfg::kBK - 1) / Cfg::kBK;
  // The block's share of a tile's (h-tile, r) steps.
  const int all_steps = k_tiles * static_cast<int>(p.R);
  const int step0 = all_steps * rank / splits;
  const int steps = all_steps * (rank + 1) / splits - step0;

  // Tiles are dealt round-robin to the resident blocks; the ring's state
  // runs on from one tile to the next, so the producer fills the next
  // tile's stages while the consumers store the last one.
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (kBiasWarp && threadIdx.x / 32 == 1) {
      auto state = cutlass::make_producer_start_state<BiasPipeline>();
      for (int tile = first_tile; tile < tiles; tile += tile_stride) {
        const int64_t first = int64_t{tile % n_tiles} * kBN;
        bias_pipeline.producer_acquire(state);
        float* slot = smem.bias[state.index()];
        for (int c = threadIdx.x % 32; c < kBN; c += 32) {
          const int64_t n = first + c;
          slot[c] = p.bias != nullptr && n < p.K
                        ? to_acc(p.bias[n * p.bias_stride])
                        : 0.0f;
        }
        bias_pipeline.producer_commit(state);
        ++state;
      }
      return;
    }
    if (threadIdx.x != 0) return;
    using Loaded = typename Cfg::Loaded;
    Tensor mA = tma_a.get_tma_tensor(shape(x_tensor<Loaded>(p)));
    Tensor mB = tma_b.get_tma_tensor(shape(weight_tensor<Loaded>(p)));
    auto state = cutlass::make_producer_start_state<Pipeline>();
    for (int tile = first_tile; tile < tiles; tile += tile_stride) {
      // (BM, BK, h-tile, r) and (BN, BK, h-tile, r) of this tile.
      Tensor gA = local_tile(mA, typename Cfg::TileA{},
                             make_coord(tile / n_tiles, _, _));
      Tensor gB = local_tile(mB, typename Cfg::TileB{},
                             make_coord(tile % n_tiles, _, _));
      auto [tAgA, tAsA] =
          tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA),
                        group_modes<0, 2>(gA));
      auto [tBgB, tBsB] =
          tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB),
                        group_modes<0, 2>(gB));
      int h_tile = step0 % k_tiles, r = step0 / k_tiles;
      for (int step = 0; step < steps; ++step) {
        pipeline.producer_acquire(state);
        auto* full = pipeline.producer_get_barrier(state);
        copy(tma_a.with(*full), tAgA(_, h_tile, r), tAsA(_, state.index()));
        copy(tma_b.with(*full), tBgB(_, h_tile, r), tBsB(_, state.index()));
        ++state;
        if (++h_tile == k_tiles) {
          h_tile = 0;
          ++r;
        }
      }
    }
    pipeline.producer_tail(state);
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<232>();
  typename Cfg::TiledMma mma;
  const int consumer = threadIdx.x - 128;
  const int group = consumer / 128;
  auto thr = mma.get_thread_slice(consumer % kTileThreads);
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor accum =
      partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});  // float32
  const auto out_coords = make_identity_tensor(
      make_shape(static_cast<int>(p.B), static_cast<int>(p.K)));

  cutlass::PipelineState<kStages> read;
  cutlass::PipelineState<kStages> release;
  typename BiasPipeline::PipelineState bias_read;
  // A stage goes back to this block's producer. The pipeline's own release
  // arrives at the first block of the cluster, whose ring it takes to be
  // shared (multicast); each block of the cluster split fills its own.
  const auto release_stage = [&] {
    smem.pipeline.empty_barrier_[release.index()].arrive();
    ++release;
  };
  uint32_t meetings = 0;  // the cluster split's, so far
  int pieces = 0;         // pieces of out this warp group has handed over
  int split_steps = 0;    // stages split so far: which remainders are next
  // In ping-pong the block's tiles go to the two warp groups in turn: each
  // passes over the other's stages and bias.
  const auto pass_over_a_tile = [&] {
    read.advance(steps);
    release.advance(steps);
    bias_read.advance(1);
  };
  if (Cfg::kPingpong && group == 1) pass_over_a_tile();
  const int group_stride = Cfg::kPingpong ? 2 * tile_stride : tile_stride;
  for (int tile = first_tile + (Cfg::kPingpong ? group * tile_stride : 0);
       tile < tiles; tile += group_stride) {
    const int m_block = tile / n_tiles, n_block = tile % n_tiles;
    Tensor coords = thr.partition_C(local_tile(
        out_coords, Shape<Int<kBM>, Int<kBN>>{}, make_coord(m_block, n_block)));
    clear(accum);
    if constexpr (kSplit) {
      // Stages go in pairs. Each stage's weight is split in shared memory and
      // its x in registers (one register set per stage of a pair), then
      // multiplied into `part`, fresh at each pair, which is added to the
      // total with rounded adds once the tensor cores are done with the
      // pair. The second stage of a pair is multiplied without waiting for
      // the first, and everything but those adds overlaps the multiplies
      // before.
      Tensor sSmallB = make_tensor(make_smem_ptr(smem.small.b.begin()),
                                   typename Cfg::SmemLayoutSmallB{});
      Tensor tCrSmallB = thr.make_fragment_B(thr.partition_B(sSmallB));
      Tensor x_first = thr.partition_fragment_A(sA(_, _, 0));  // (MMA, M, K)
      Tensor x_first_small = make_fragment_like(x_first);
      Tensor x_second = make_fragment_like(x_first);
      Tensor x_second_small = make_fragment_like(x_first);
      // Where this thread's x values lie in each stage, in x_first's order.
      auto x_thread_copy =
          make_tiled_copy_A(
              Copy_Atom<UniversalCopy<uint32_t>, typename Cfg::Element>{}, mma)
              .get_thread_slice(consumer);
      Tensor x_from = x_thread_copy.partition_S(sA);  // (CPY, M, K, stage)
      Tensor part = make_fragment_like(accum);
      // A stage is one contiguous block (tile_to_shape puts the stage mode
      // outermost), split as a flat array.
      constexpr int kStageB = kBN * Cfg::kBK;
      static_assert(typename Cfg::SmemLayoutB{}(0, 0, 1) == kStageB &&
                    cosize_v<typename Cfg::SmemLayoutB> == kStageB * kStages);
      // Waits for the read stage and splits it: the weight's remainders to
      // `small` (the tensor cores' reads of it, three stages back, are done
      // in both warp groups: each waits for all but its last two multiplies
      // before the barrier that precedes this), x into `big` and `x_small`.
      const auto split_stage = [&](int slot, int small, auto& big,
                                   auto& x_small) {
        pipeline.consumer_wait(read);
        split_in_place<kStageB>(raw_pointer_cast(&sB(0, 0, slot)),
                                raw_pointer_cast(&sSmallB(0, 0, small)),
                                consumer);
        // The parts, visible to the tensor cores (the async proxy).
        cutlass::arch::fence_view_async_shared();
        Tensor x_stage = x_from(_, _, _, slot);
        Tensor x_big = x_thread_copy.retile_D(big);
        Tensor x_rest = x_thread_copy.retile_D(x_small);
        CUTE_UNROLL
        for (int i = 0; i < size(x_big); ++i) {
          const Tf32Split v = split_tf32(ptx::ld_shared_u32(
              ptx::smem_addr(raw_pointer_cast(&x_stage(i)))));
          x_big(i) = Cfg::Element::bitcast(v.big);
          x_rest(i) = Cfg::Element::bitcast(v.small);
        }
      };
      const auto multiply = [&](int slot, int small, auto& big, auto& x_small,
                                bool fresh) {
        // Both warp groups' splits of the weight are done.
        cutlass::arch::NamedBarrier::sync(kConsumerThreads, kSplitBarrier);
        warpgroup_fence_operand(big);
        warpgroup_fence_operand(x_small);
        warpgroup_fence_operand(part);
        warpgroup_arrive();
        mma.accumulate_ = fresh ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        CUTE_UNROLL
        for (int k = 0; k < size<2>(big); ++k) {
          gemm(mma, x_small(_, _, k), tCrB(_, _, k, slot), part);
          mma.accumulate_ = GMMA::ScaleOut::One;
          gemm(mma, big(_, _, k), tCrSmallB(_, _, k, small), part);
          gemm(mma, big(_, _, k), tCrB(_, _, k, slot), part);
        }
        warpgroup_commit_batch();
        ++read;
      };
      // The multiplies are done: the last stage not yet released goes back
      // to the producer, and part into the total.
      const auto fold = [&] {
        warpgroup_wait<0>();
        warpgroup_fence_operand(part);
        release_stage();
        CUTE_UNROLL
        for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
      };
      for (int step = 0; step < steps; step += 2) {
        const int first = read.index();
        const int first_small = split_steps++ % Cfg::kSmallStages;
        split_stage(first, first_small, x_first, x_first_small);
        if (step > 0) fold();
        multiply(first, first_small, x_first, x_first_small, true);
        if (step + 1 < steps) {
          const int second = read.index();
          const int second_small = split_steps++ % Cfg::kSmallStages;
          split_stage(second, second_small, x_second, x_second_small);
          multiply(second, second_small, x_second, x_second_small, false);
          // The first stage's multiplies are done: its slot and its x
          // registers are free.
          warpgroup_wait<1>();
          warpgroup_fence_operand(part);
          release_stage();
        }
      }
      fold();
    } else {
      Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
      // In ping-pong a group waits for the other's turn at the ring to end:
      // the ring's waits go by phase parity, which tells a stage's fills
      // apart only one round ahead.
      if (Cfg::kPingpong && tile >= tile_stride) {
        cutlass::arch::NamedBarrier::sync(kConsumerThreads,
                                          kTurnBarrier + group);
      }
      for (int step = 0; step < steps; ++step) {
        pipeline.consumer_wait(read);
        warpgroup_fence_operand(accum);
        warpgroup_arrive();
        gemm(mma, tCrA(_, _, _, read.index()), tCrB(_, _, _, read.index()),
             accum);
        warpgroup_commit_batch();
        // The previous stage's multiplies are done once at most this one is
        // in flight: its slot goes back to the producer.
        warpgroup_wait<1>();
        warpgroup_fence_operand(accum);
        // The cluster split keeps the tile's last kStages stages: the ring,
        // which the producer cannot refill, then takes the block's sums.
        if (step > 0 && (!kClusterSplit || step - 1 < steps - kStages)) {
          release_stage();
        }
        ++read;
      }
      if (Cfg::kPingpong && tile + tile_stride < tiles) {
        cutlass::arch::NamedBarrier::arrive(kConsumerThreads,
                                            kTurnBarrier + 1 - group);
      }
      warpgroup_wait<0>();
      warpgroup_fence_operand(accum);
      if constexpr (!kClusterSplit) {
        release_stage();
      }
    }

    if constexpr (kClusterSplit) {
      add_in_cluster<Cfg>(p, accum, coords, smem, bias_pipeline, bias_read,
                          m_block, n_block, rank, splits, consumer, meetings);
      cutlass::arch::fence_view_async_shared();  // before the copies refill
      for (int k = 0; k < kStages; ++k) {
        release_stage();
      }
    } else if constexpr (std::is_same_v<TmaC, NoTmaStore>) {
      store_tile<kSplit>(p, accum, coords);
    } else {
      bias_pipeline.consumer_wait(bias_read);
      // The tile's 64-row chunk this group stores.
      const int m_chunk = Cfg::kPingpong ? m_block : 2 * m_block + group;
      store_pieces<Cfg>(tma_c, p, accum, smem.c[group],
                        smem.bias[bias_read.index()], m_chunk, n_block,
                        consumer, pieces);
      bias_pipeline.consumer_release(bias_read);
      ++bias_read;
    }
    if (Cfg::kPingpong) pass_over_a_tile();
  }
  if constexpr (!std::is_same_v<TmaC, NoTmaStore>) {
    // Shared memory stays until the copy engine has read the last pieces.
    if (consumer % 128 == 0) tma_store_wait<0>();
  }
#endif
}

}  // namespace fgl::cuda::wgmma
