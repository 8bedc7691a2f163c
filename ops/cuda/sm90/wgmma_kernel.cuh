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
// pairs in order. float16 and bfloat16 multiply as they are, float32 as
// TF32 (only where the user allowed TF32).
//
// A persistent block per multiprocessor takes 128 x 256 tiles of out in
// turn: a producer warp group issues the copies into a ring of kStages
// stages (an mbarrier pipeline), two consumer warp groups multiply with
// wgmma (64 x 256 each, float32 accumulators), add the bias in float32,
// round once to T and hand the tile back through shared memory to TMA
// stores, while the producer already fills the next tile's stages.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "gather_linear_params.h"
#include "numeric.cuh"

namespace fgl::cuda::wgmma {

using namespace cute;

// What the copy engine loads and wgmma multiplies (Operand), what out holds
// (Out), in CuTe's names, and two adjacent columns of out stored as one
// (Pair). float32 multiplies as TF32, which runs only where the user allowed
// TF32 (kernel_choice.h): the copy engine rounds it to TF32 on the way into
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

inline constexpr int kBM = 128;  // rows of B per block
inline constexpr int kBN = 256;  // output columns per block
inline constexpr int kStages = 4;
inline constexpr int kChunkRows = 64;         // out goes back in 64-row pieces
inline constexpr int kConsumerThreads = 256;  // two warp groups
inline constexpr int kThreads = 128 + kConsumerThreads;

template <typename T>
struct Config {
  using Element = typename Types<T>::Operand;
  using Out = typename Types<T>::Out;
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
  // Each consumer warp group owns 64 of the block's 128 rows.
  using TiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<Int<64>, Int<kBN>, Int<kBK>>, GMMA::Major::K,
                           GMMA::Major::K>(),
      Layout<Shape<_2, _1, _1>>{}));
  // One consumer warp group's 64-row piece of out on its way to the copy
  // engine, swizzled like the operands (conflict-free pair stores).
  using SmemLayoutC =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Out>{},
                             make_shape(Int<kChunkRows>{}, Int<kChunkCols>{})));
  using TileC = Shape<Int<kChunkRows>, Int<kChunkCols>>;
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  static constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(Element);
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
  float bias[2][kBN];  // each consumer warp group's copy of the tile's bias
  typename Cfg::Pipeline::SharedStorage pipeline;
};

// The tensors the copy engine is described over (host and device agree).
template <typename T>
CUTE_HOST_DEVICE auto x_tensor(const GatherLinearParams<T>& p) {
  using E = typename Config<T>::Element;
  return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(p.x)),
                     make_shape(static_cast<int>(p.B), static_cast<int>(p.H),
                                static_cast<int>(p.R)),
                     make_stride(p.x_stride_b, Int<1>{}, p.x_stride_r));
}

template <typename T>
CUTE_HOST_DEVICE auto weight_tensor(const GatherLinearParams<T>& p) {
  using E = typename Config<T>::Element;
  return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(p.weight)),
                     make_shape(static_cast<int>(p.K), static_cast<int>(p.H),
                                static_cast<int>(p.R)),
                     make_stride(p.weight_stride_k, Int<1>{}, p.H));
}

template <typename T>
CUTE_HOST_DEVICE auto out_tensor(const GatherLinearParams<T>& p) {
  using E = typename Config<T>::Out;
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

// Adds the bias, rounds once and stores the block's accumulators where out
// is not the copy engine's; pairs of adjacent columns go out as one
// 4-byte store where out allows it.
template <typename T, typename Accum, typename Coords>
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
    float v0 = accum(i), v1 = accum(i + 1);
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

// Hands a consumer warp group's 64 x 256 share of the tile to the copy
// engine in 128-byte wide pieces through two alternating buffers; rows past
// B and columns past K are clipped by the copy engine.
template <typename T, typename TmaC, typename Accum, typename Buffers>
__device__ __forceinline__ void store_pieces(
    const TmaC& tma_c, const GatherLinearParams<T>& p, const Accum& accum,
    Buffers& buffers, const float* bias, int m_block, int n_block, int consumer,
    int& pieces) {
  using Cfg = Config<T>;
  const int group = consumer / 128, thread = consumer % 128;
  const int warp = thread / 32, g = thread % 32 / 4, t = thread % 4;
  const uint32_t barrier = 1 + group;  // 0 is __syncthreads'
  Tensor mC = tma_c.get_tma_tensor(shape(out_tensor(p)));
  CUTE_UNROLL
  constexpr int kCols = Cfg::kChunkCols;
  for (int piece = 0; piece < kBN / kCols; ++piece, ++pieces) {
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
        const int column = 8 * j + 2 * t;
        const float* b = bias + piece * kCols + column;
        Pair<T> pair;
        pair.x = from_acc<T>(accum(i) + b[0]);
        pair.y = from_acc<T>(accum(i + 1) + b[1]);
        *reinterpret_cast<Pair<T>*>(
            raw_pointer_cast(&sC(16 * warp + g + 8 * half, column))) = pair;
      }
    }
    tma_store_fence();  // the stores above, visible to the copy engine
    cutlass::arch::NamedBarrier::sync(128, barrier);
    if (thread == 0) {
      Tensor gC = local_tile(
          mC, typename Cfg::TileC{},
          make_coord(2 * m_block + group, n_block * (kBN / kCols) + piece));
      auto [tCgC, tCsC] =
          tma_partition(tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sC),
                        group_modes<0, 2>(gC));
      copy(tma_c, tCsC, tCgC);
      tma_store_arrive();
    }
  }
}

/// Grid: persistent, at most one block per multiprocessor, each taking the
/// 128 x 256 tiles of out in turn, columns fastest (the tiles in flight
/// share their x rows in L2). kThreads threads; dynamic shared memory
/// sizeof(SharedStorage<Config<T>>).
template <typename T, typename TmaA, typename TmaB, typename TmaC>
__global__ void __launch_bounds__(kThreads, 1)
    gather_linear_wgmma_kernel(const __grid_constant__ TmaA tma_a,
                               const __grid_constant__ TmaB tma_b,
                               const __grid_constant__ TmaC tma_c,
                               const GatherLinearParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = Config<T>;
  using Pipeline = typename Cfg::Pipeline;
  extern __shared__ char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage<Cfg>*>(smem_raw);

  const int n_tiles = (static_cast<int>(p.K) + kBN - 1) / kBN;
  const int tiles = (static_cast<int>(p.B) + kBM - 1) / kBM * n_tiles;
  const int warp_group = threadIdx.x / 128;

  typename Pipeline::Params params;
  params.transaction_bytes = Cfg::kStageBytes;
  params.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer
                                : Pipeline::ThreadCategory::Consumer;
  params.is_leader = threadIdx.x == 0;
  params.num_consumers = kConsumerThreads;
  Pipeline pipeline(smem.pipeline, params, Shape<_1, _1, _1>{});
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  Tensor sA = make_tensor(make_smem_ptr(smem.a.begin()),
                          typename Cfg::SmemLayoutA{});  // (BM, BK, stage)
  Tensor sB = make_tensor(make_smem_ptr(smem.b.begin()),
                          typename Cfg::SmemLayoutB{});  // (BN, BK, stage)
  const int k_tiles = (static_cast<int>(p.H) + Cfg::kBK - 1) / Cfg::kBK;
  const int steps = k_tiles * static_cast<int>(p.R);

  // Tiles are dealt round-robin to the resident blocks; the ring's state
  // runs on from one tile to the next, so the producer fills the next
  // tile's stages while the consumers store the last one.
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x != 0) return;
    Tensor mA = tma_a.get_tma_tensor(shape(x_tensor(p)));
    Tensor mB = tma_b.get_tma_tensor(shape(weight_tensor(p)));
    auto state = cutlass::make_producer_start_state<Pipeline>();
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
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
      int h_tile = 0, r = 0;
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
  auto thr = mma.get_thread_slice(consumer);
  Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor accum =
      partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});  // float32
  const auto out_coords = make_identity_tensor(
      make_shape(static_cast<int>(p.B), static_cast<int>(p.K)));

  cutlass::PipelineState<kStages> read;
  cutlass::PipelineState<kStages> release;
  int pieces = 0;  // pieces of out this warp group has handed over
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int m_block = tile / n_tiles, n_block = tile % n_tiles;
    Tensor coords = thr.partition_C(local_tile(
        out_coords, Shape<Int<kBM>, Int<kBN>>{}, make_coord(m_block, n_block)));
    clear(accum);
    if constexpr (!std::is_same_v<TmaC, NoTmaStore>) {
      // The tile's bias, read while the first stage arrives; the previous
      // tile's pieces have all been read from it (store_pieces' barriers).
      for (int c = consumer % 128; c < kBN; c += 128) {
        const int64_t n = int64_t{n_block} * kBN + c;
        smem.bias[consumer / 128][c] = p.bias != nullptr && n < p.K
                                           ? to_acc(p.bias[n * p.bias_stride])
                                           : 0.0f;
      }
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
      if (step > 0) {
        pipeline.consumer_release(release);
        ++release;
      }
      ++read;
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(accum);
    pipeline.consumer_release(release);
    ++release;

    if constexpr (std::is_same_v<TmaC, NoTmaStore>) {
      store_tile(p, accum, coords);
    } else {
      store_pieces<T>(tma_c, p, accum, smem.c[consumer / 128],
                      smem.bias[consumer / 128], m_block, n_block, consumer,
                      pieces);
    }
  }
  if constexpr (!std::is_same_v<TmaC, NoTmaStore>) {
    // Shared memory stays until the copy engine has read the last pieces.
    if (consumer % 128 == 0) tma_store_wait<0>();
  }
#endif
}

}  // namespace fgl::cuda::wgmma
