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
// pairs in order. Heads of 16, 32 or 64 bytes would leave much of such a step
// empty; there (kPackedHeads) a step spans whole heads instead, x's tiles
// unswizzled and the weight's columns read as they lie (wgmma_config.cuh's
// x_tensor). float16 and bfloat16 multiply as they are; float32 as TF32 where
// the user allowed TF32, else at float32 accuracy as three TF32 products
// (tf32_split.cuh): the copy engine loads float32 as it is, two warps of the
// producer's group split the weight's stages in shared memory as they land (the
// big parts in place, the remainders beside them), and the consumers split x's
// in registers, which wgmma takes as its A operand.
//
// A persistent block per multiprocessor takes 128 x 256 tiles of out in
// turn (128 x 128 for float32's split, whose two register sets need the
// room; one pass's 192 columns where those fill the grid's rounds better,
// kernel_choice.h): a producer warp group issues the copies into a
// ring of kStages stages (an mbarrier pipeline), two consumer warp groups
// multiply with wgmma (64 x kBN each, float32 accumulators), add the bias
// in float32, round once to T and hand the tile back through shared memory
// to TMA stores (or, where out's rows are not the copy engine's, to stores
// a row wide), while the producer already fills the next tile's stages
// and a warp of the producer's group reads the next tile's bias. In the
// ping-pong schedule (half types) each consumer warp group takes 64 x 256
// tiles of its own instead, the two in turn, so that one's epilogue
// overlaps the other's multiplies. In the cluster split (half types, for
// few tiles with long contractions) the blocks of a thread-block cluster
// take the same 128 x 128 tiles, each its share of the (h-tile, r) steps,
// and add their float32 sums in split order through distributed shared
// memory (wgmma_epilogue.cuh). The tiles and shared memory are in
// wgmma_config.cuh.
#pragma once

#include <cooperative_groups.h>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "numeric.cuh"
#include "ptx.cuh"
#include "tf32_split.cuh"
#include "wgmma_config.cuh"
#include "wgmma_epilogue.cuh"

namespace fgl::cuda::wgmma {

using namespace cute;

// Splits kCount float32 values of shared memory in place into their TF32
// big parts, the TF32 remainders going to `small` at the same offsets.
// kThreads threads share the work, each loading a few vectors before it
// stores any (those loads are in flight together); the caller fences before
// the tensor cores read the parts.
template <int kCount, int kThreads>
__device__ __forceinline__ void split_in_place(const void* values,
                                               const void* small, int thread) {
  constexpr int kVectors = kCount / 4 / kThreads;  // a thread's
  constexpr int kInFlight = 4;
  static_assert(kCount == 4 * kThreads * kVectors && kVectors % kInFlight == 0,
                "whole vectors");
  const uint32_t v = ptx::smem_addr(values) + 16 * thread;
  const uint32_t s = ptx::smem_addr(small) + 16 * thread;
  constexpr uint32_t kStride = 16 * kThreads;
  CUTE_NO_UNROLL
  for (int first = 0; first < kVectors; first += kInFlight) {
    uint4 in[kInFlight];
    CUTE_UNROLL
    for (int i = 0; i < kInFlight; ++i) {
      in[i] = ptx::ld_shared_v4(v + kStride * (first + i));
    }
    CUTE_UNROLL
    for (int i = 0; i < kInFlight; ++i) {
      const uint32_t at = kStride * (first + i);
      store_split_tf32(in[i], v + at, s + at);
    }
  }
}

/// Grid: persistent, at most one block per multiprocessor, each (in the
/// cluster split each cluster) taking the kBM x kBN tiles of out in turn,
/// columns fastest (the tiles in flight share their x rows in L2); where
/// `tail` cuts the last round's tiles (tile_schedule.h), pieces of those
/// after. kThreads threads; dynamic shared memory
/// sizeof(SharedStorage<Config<T, kSplit, kPingpong, kClusterSplit,
/// kTailSplit, kCols, kPackedHeads>>).
template <typename T, bool kSplit, bool kPingpong, bool kClusterSplit,
          bool kTailSplit, int kCols, int kPackedHeads, typename TmaA,
          typename TmaB, typename TmaC>
__global__ void __launch_bounds__(kThreads, 1)
    gather_linear_wgmma_kernel(const __grid_constant__ TmaA tma_a,
                               const __grid_constant__ TmaB tma_b,
                               const __grid_constant__ TmaC tma_c,
                               const GatherLinearParams<T> p,
                               const Tail<kTailSplit> tail) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = Config<T, kSplit, kPingpong, kClusterSplit, kTailSplit, kCols,
                     kPackedHeads>;
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
  // Warp 1 reads each tile's bias into shared memory while the tile before
  // is multiplied.
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
  if constexpr (kSplit) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < kStages; ++i) {
        cutlass::arch::ClusterBarrier::init(&smem.small.split[i],
                                            kSplitterThreads);
      }
    }
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  ptx::await_previous_grid();

  Tensor sA = make_tensor(make_smem_ptr(smem.a.begin()),
                          typename Cfg::SmemLayoutA{});  // (BM, BK, stage)
  Tensor sB = make_tensor(make_smem_ptr(smem.b.begin()),
                          typename Cfg::SmemLayoutB{});  // (BN, BK, stage)
  const int k_tiles = Cfg::k_tiles(p);
  // The block's share of a tile's (h-tile, r) steps.
  const int all_steps = Cfg::steps(p);
  const int step0 = all_steps * rank / splits;
  const int steps = all_steps * (rank + 1) / splits - step0;
  // The block's shares of tiles go by an index v = first_tile + i *
  // tile_stride: tile v and the block's steps of it or, where the tail
  // split deals the tiles (a block a tile group), its i-th share
  // (tile_schedule.h).
  int whole_tiles = tiles, shares_end = tiles;
  if constexpr (Cfg::kTailSplit) {
    whole_tiles = tail.layout.whole_tiles;
    shares_end = first_tile +
                 tile_stride * tile_schedule::shares(tail.layout, blockIdx.x);
  }
  const auto share_at = [&](int v) {
    tile_schedule::Piece share{v, step0, step0 + steps};
    if constexpr (Cfg::kTailSplit) {
      share = tile_schedule::share(tail.layout, blockIdx.x,
                                   (v - first_tile) / tile_stride);
    }
    return share;
  };
  // Its steps (the instances without a tail: the block's of every tile).
  const auto steps_of = [&](const tile_schedule::Piece& share) {
    return Cfg::kTailSplit ? share.end_step - share.first_step : steps;
  };

  // Tiles are dealt round-robin to the resident blocks; the ring's state
  // runs on from one tile to the next, so the producer fills the next
  // tile's stages while the consumers store the last one.
  // In the cluster split every thread that has not exited joins each tile's
  // two meetings on the cluster's barrier (add_in_cluster); the first also
  // sees every block of the cluster running before any reads another's
  // shared memory.
  const auto join_the_meetings = [] {
    ptx::cluster_sync_unaligned();
    ptx::cluster_sync_unaligned();
  };
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x / 32 == 1) {
      auto state = cutlass::make_producer_start_state<BiasPipeline>();
      for (int v = first_tile; v < shares_end; v += tile_stride) {
        const int tile = share_at(v).tile;
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
        if constexpr (kClusterSplit) join_the_meetings();
      }
      return;
    }
    if constexpr (kSplit) {
      if (threadIdx.x >= kFirstSplitterThread) {
        // A stage's weight, split as it lands: the big parts in place, the
        // remainders into the slot's part of `small`, made visible to the
        // tensor cores (the async proxy) before the consumers are told.
        // A stage is one contiguous block (tile_to_shape puts the stage
        // mode outermost), split as a flat array.
        constexpr int kStageB = kBN * Cfg::kBK;
        static_assert(typename Cfg::SmemLayoutB{}(0, 0, 1) == kStageB &&
                      typename Cfg::SmemLayoutSmallB{}(0, 0, 1) == kStageB);
        cutlass::PipelineState<kStages> landed;
        for (int v = first_tile; v < shares_end; v += tile_stride) {
          const int share_steps = steps_of(share_at(v));
          for (int step = 0; step < share_steps; ++step) {
            const int slot = landed.index();
            pipeline.consumer_wait(landed);
            split_in_place<kStageB, kSplitterThreads>(
                raw_pointer_cast(&sB(0, 0, slot)),
                smem.small.b.begin() + slot * kStageB,
                threadIdx.x - kFirstSplitterThread);
            cutlass::arch::fence_view_async_shared();
            cutlass::arch::ClusterBarrier::arrive(&smem.small.split[slot]);
            ++landed;
          }
        }
        return;
      }
    }
    if (threadIdx.x != 0) return;
    using Loaded = typename Cfg::Loaded;
    Tensor mA = tma_a.get_tma_tensor(shape(x_tensor<Loaded, kPackedHeads>(p)));
    Tensor mB =
        tma_b.get_tma_tensor(shape(weight_tensor<Loaded, kPackedHeads>(p)));
    auto state = cutlass::make_producer_start_state<Pipeline>();
    for (int v = first_tile; v < shares_end; v += tile_stride) {
      const auto share = share_at(v);
      const int tile = share.tile;
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
      const int first_step = Cfg::kTailSplit ? share.first_step : step0;
      int h_tile = first_step % k_tiles, r = first_step / k_tiles;
      for (int step = 0; step < steps_of(share); ++step) {
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
      // The ring is held until the second meeting: waiting there costs the
      // copies nothing.
      if constexpr (kClusterSplit) join_the_meetings();
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
  int pieces = 0;  // pieces of out this warp group has handed over
  // In ping-pong the block's tiles go to the two warp groups in turn: each
  // passes over the other's stages and bias.
  const auto pass_over_a_tile = [&] {
    read.advance(steps);
    release.advance(steps);
    bias_read.advance(1);
  };
  if (Cfg::kPingpong && group == 1) pass_over_a_tile();
  const int group_stride = Cfg::kPingpong ? 2 * tile_stride : tile_stride;
  for (int v = first_tile + (Cfg::kPingpong ? group * tile_stride : 0);
       v < shares_end; v += group_stride) {
    const auto share = share_at(v);
    const int tile = share.tile;
    const int m_block = tile / n_tiles, n_block = tile % n_tiles;
    Tensor coords = thr.partition_C(local_tile(
        out_coords, Shape<Int<kBM>, Int<kBN>>{}, make_coord(m_block, n_block)));
    clear(accum);
    if constexpr (kSplit) {
      // Each stage's x is split in registers (two register sets, which the
      // stages take in turn), its weight split already in shared memory,
      // then multiplied into `part`, fresh every Cfg::stages_per_sum
      // stages, which is added to the total with rounded adds once the
      // tensor cores are done with it. A stage is multiplied without
      // waiting for the one before, and everything but those adds overlaps
      // the multiplies before.
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
      // Waits for the read stage and its weight's split, and splits its x
      // into `big` and `x_small`.
      const auto split_stage = [&](int slot, auto& big, auto& x_small) {
        pipeline.consumer_wait(read);
        cutlass::arch::ClusterBarrier::wait(&smem.small.split[slot],
                                            read.phase());
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
      const auto multiply = [&](int slot, auto& big, auto& x_small,
                                bool fresh) {
        warpgroup_fence_operand(big);
        warpgroup_fence_operand(x_small);
        warpgroup_fence_operand(part);
        warpgroup_arrive();
        mma.accumulate_ = fresh ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        CUTE_UNROLL
        for (int k = 0; k < size<2>(big); ++k) {
          gemm(mma, x_small(_, _, k), tCrB(_, _, k, slot), part);
          mma.accumulate_ = GMMA::ScaleOut::One;
          gemm(mma, big(_, _, k), tCrSmallB(_, _, k, slot), part);
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
      // A stage: its x split, then (starting a sum) the last sum folded,
      // then its multiplies; within a sum, the stage before's multiplies
      // done, its slot and x registers free.
      const int stages_per_sum = Cfg::stages_per_sum(steps);
      const auto stage = [&](int step, auto& big, auto& x_small) {
        const int slot = read.index();
        split_stage(slot, big, x_small);
        const bool fresh = (step & (stages_per_sum - 1)) == 0;
        if (fresh && step > 0) fold();
        multiply(slot, big, x_small, fresh);
        if (!fresh) {
          warpgroup_wait<1>();
          warpgroup_fence_operand(part);
          release_stage();
        }
      };
      const int share_steps = steps_of(share);
      for (int step = 0; step < share_steps; step += 2) {
        stage(step, x_first, x_first_small);
        if (step + 1 < share_steps) stage(step + 1, x_second, x_second_small);
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
      const int share_steps = steps_of(share);
      for (int step = 0; step < share_steps; ++step) {
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
                          m_block, n_block, rank, splits, consumer);
      cutlass::arch::fence_view_async_shared();  // before the copies refill
      for (int k = 0; k < kStages; ++k) {
        release_stage();
      }
    } else {
      // Where the tail split cut the tile, the last of its blocks to arrive
      // stores it.
      bool stores = true;
      if constexpr (Cfg::kTailSplit) {
        if (tile >= whole_tiles) {
          stores = meet_in_tail<Cfg>(tail, accum, smem.tail, tile, consumer);
        }
      }
      bias_pipeline.consumer_wait(bias_read);
      const float* bias = smem.bias[bias_read.index()];
      if (stores) {
        // The tile's 64-row chunk this group stores.
        const int m_chunk = Cfg::kPingpong ? m_block : 2 * m_block + group;
        if constexpr (std::is_same_v<TmaC, NoTmaStore>) {
          store_tile<kSplit>(p, accum, coords, bias, n_block * kBN);
        } else if constexpr (std::is_same_v<TmaC, RowStores>) {
          store_rows<Cfg>(p, accum, smem.c[group], bias, m_chunk, n_block,
                          consumer, pieces);
        } else {
          store_pieces<Cfg>(tma_c, p, accum, smem.c[group], bias, m_chunk,
                            n_block, consumer, pieces);
        }
      }
      bias_pipeline.consumer_release(bias_read);
      ++bias_read;
    }
    if (Cfg::kPingpong) pass_over_a_tile();
  }
  if constexpr (kCopyEngineStores<TmaC>) {
    // Shared memory stays until the copy engine has read the last pieces.
    if (consumer % 128 == 0) tma_store_wait<0>();
  }
#endif
}

}  // namespace fgl::cuda::wgmma
