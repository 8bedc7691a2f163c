// The Hopper tensor-core kernel's epilogues: a tile's float32 sums, the
// bias added, rounded once and stored: through the copy engine in pieces,
// by the same pieces written a row at a time where out's rows are not the
// copy engine's, by plain stores where out's columns are strided, or (the
// cluster split) after the cluster's blocks have added their sums in split
// order. Torch-free.
#pragma once

#include <cooperative_groups.h>
#include <cutlass/arch/barrier.h>

#include <cuda/atomic>

#include "numeric.cuh"
#include "ptx.cuh"
#include "tf32_split.cuh"
#include "wgmma_config.cuh"

namespace fgl::cuda::wgmma {

using namespace cute;

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
// 4-byte store where out allows it. `bias` is the tile's in shared memory
// from column n0 (zeros without one). The bias is added to every sum
// before the first store: a load queued behind the stores would wait for
// them.
template <bool kSplit, typename T, typename Accum, typename Coords>
__device__ __forceinline__ void store_tile(const GatherLinearParams<T>& p,
                                           Accum& accum, const Coords& coords,
                                           const float* bias, int n0) {
  CUTE_UNROLL
  for (int i = 0; i < size(accum); i += 2) {
    const int m = get<0>(coords(i));
    const int n = get<1>(coords(i));
    const float* b = bias + (n - n0);
    accum(i) = settled<kSplit>(accum(i), p, m, n) + b[0];
    accum(i + 1) = settled<kSplit>(accum(i + 1), p, m, n + 1) + b[1];
  }
  const bool pairs = p.out_stride_k == 1 && p.out_stride_b % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(p.out) % sizeof(Pair<T>) == 0;
  CUTE_UNROLL
  for (int i = 0; i < size(accum); i += 2) {
    const int m = get<0>(coords(i));
    const int n = get<1>(coords(i));
    if (m >= p.B || n >= p.K) continue;
    T* row = p.out + m * p.out_stride_b;
    if (pairs && n + 1 < p.K) {
      Pair<T> pair;
      pair.x = from_acc<T>(accum(i));
      pair.y = from_acc<T>(accum(i + 1));
      *reinterpret_cast<Pair<T>*>(row + n) = pair;
    } else {
      row[n * p.out_stride_k] = from_acc<T>(accum(i));
      if (n + 1 < p.K)
        row[(n + 1) * p.out_stride_k] = from_acc<T>(accum(i + 1));
    }
  }
}

// Calls f(i, row, column) for each pair of a consumer warp group's
// accumulators in one piece of its 64-row share (kChunkCols columns):
// accumulators i and i + 1 are columns `column` and `column + 1` of the
// piece's row `row`.
template <typename Cfg, typename F>
__device__ __forceinline__ void for_each_pair(int piece, int thread, F&& f) {
  const int warp = thread / 32, g = thread % 32 / 4, t = thread % 4;
  constexpr int kCols = Cfg::kChunkCols;
  // Accumulator i of the 64 x N wgmma layout: row 16 warp + g + 8 (i / 2
  // % 2), column 8 (i / 4) + 2 t + i % 2.
  CUTE_UNROLL
  for (int j = 0; j < kCols / 8; ++j) {
    CUTE_UNROLL
    for (int half = 0; half < 2; ++half) {
      f(4 * (piece * kCols / 8 + j) + 2 * half, 16 * warp + g + 8 * half,
        8 * j + 2 * t);
    }
  }
}

// Adds the bias (and where float32's split left NaN, the sum in order) to
// a piece's sums.
template <typename Cfg, typename T, typename Accum>
__device__ __forceinline__ void settle_piece(const GatherLinearParams<T>& p,
                                             Accum& accum, const float* bias,
                                             int piece, int m_chunk,
                                             int n_block, int thread) {
  constexpr int kCols = Cfg::kChunkCols;
  for_each_pair<Cfg>(piece, thread, [&](int i, int row, int column) {
    const int m = m_chunk * kChunkRows + row;
    const int n = n_block * Cfg::kBN + piece * kCols + column;
    const float* b = bias + piece * kCols + column;
    accum(i) = settled<Cfg::kSplitTf32>(accum(i), p, m, n) + b[0];
    accum(i + 1) = settled<Cfg::kSplitTf32>(accum(i + 1), p, m, n + 1) + b[1];
  });
}

// Writes a piece's settled sums, rounded once, into `sC`.
template <typename Cfg, typename T, typename Accum, typename SmemC>
__device__ __forceinline__ void stage_piece(const Accum& accum, SmemC& sC,
                                            int piece, int thread) {
  for_each_pair<Cfg>(piece, thread, [&](int i, int row, int column) {
    Pair<T> pair;
    pair.x = from_acc<T>(accum(i));
    pair.y = from_acc<T>(accum(i + 1));
    const uint32_t at = ptx::smem_addr(raw_pointer_cast(&sC(row, column)));
    if constexpr (sizeof(pair) == 4) {
      ptx::st_shared_u32(at, *reinterpret_cast<const uint32_t*>(&pair));
    } else {
      ptx::st_shared_v2(at, *reinterpret_cast<const uint2*>(&pair));
    }
  });
}

// Hands a consumer warp group's 64-row share of the tile to the copy engine
// in 128-byte wide pieces through two alternating buffers; rows past B and
// columns past K are clipped by the copy engine.
template <typename Cfg, typename T, typename TmaC, typename Accum,
          typename Buffers>
__device__ __forceinline__ void store_pieces(const TmaC& tma_c,
                                             const GatherLinearParams<T>& p,
                                             Accum& accum, Buffers& buffers,
                                             const float* bias, int m_chunk,
                                             int n_block, int consumer,
                                             int& pieces) {
  const int group = consumer / 128, thread = consumer % 128;
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
    settle_piece<Cfg>(p, accum, bias, piece, m_chunk, n_block, thread);
    stage_piece<Cfg, T>(accum, sC, piece, thread);
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

// Stores a consumer warp group's 64-row share of the tile where the copy
// engine cannot (out's rows not 16-byte aligned, columns contiguous): the
// same pieces as store_pieces' staged in shared memory, then each warp
// writes 16 of a piece's rows, a row of 128 bytes a store instruction, a
// 4-byte word a lane (stored from the accumulators, each instruction would
// scatter over 8 rows). A warp reads a run of rows before it stores them.
template <typename Cfg, typename T, typename Accum, typename Buffers>
__device__ __forceinline__ void store_rows(const GatherLinearParams<T>& p,
                                           Accum& accum, Buffers& buffers,
                                           const float* bias, int m_chunk,
                                           int n_block, int consumer,
                                           int& pieces) {
  const int group = consumer / 128, thread = consumer % 128;
  const int warp = thread / 32, lane = thread % 32;
  const uint32_t barrier = 1 + group;  // store_pieces'
  constexpr int kCols = Cfg::kChunkCols;
  constexpr int kRows = kChunkRows / 4;  // a warp's of a piece
  constexpr int kRun = 8;                // rows read before they are stored
  // Every sum settled before the first store (and the bias's loads with
  // it): a load queued behind stores waits for them.
  CUTE_UNROLL
  for (int piece = 0; piece < Cfg::kBN / kCols; ++piece) {
    settle_piece<Cfg>(p, accum, bias, piece, m_chunk, n_block, thread);
  }
  CUTE_UNROLL
  for (int piece = 0; piece < Cfg::kBN / kCols; ++piece, ++pieces) {
    auto& buffer = buffers[pieces % 2];
    Tensor sC =
        make_tensor(make_smem_ptr(buffer.begin()), typename Cfg::SmemLayoutC{});
    stage_piece<Cfg, T>(accum, sC, piece, thread);
    // Every thread has written this piece, and read the buffer's last one
    // (two pieces ago) before writing the one between.
    cutlass::arch::NamedBarrier::sync(128, barrier);
    const int n0 = n_block * Cfg::kBN + piece * kCols;
    // What the stores need, read before the first: p may live in memory.
    const int cols = min(kCols, static_cast<int>(p.K) - n0);
    const int warp_rows =
        static_cast<int>(p.B) - (m_chunk * kChunkRows + kRows * warp);
    const int64_t p_stride = p.out_stride_b;
    T* const warp_out =
        p.out + (m_chunk * kChunkRows + kRows * warp) * p_stride + n0;
    CUTE_UNROLL
    for (int run = 0; run < kRows; run += kRun) {
      const int first_row = kRows * warp + run;
      const int rows = min(kRun, warp_rows - run);
      if (rows <= 0 || cols <= 0) break;
      // Taken afresh each run: the rows' offsets, hoisted out of the
      // pieces, would stay live across the kernel and spill.
      const int64_t stride = ptx::opaque(p_stride);
      T* const out = warp_out + run * stride;
      // Lane l reads word l ^ 4 r of the run's row r (4-byte words): in
      // the swizzled piece (128-byte rows, their 16-byte units permuted by
      // row % 8, and first_row % 8 == 0) that word lies at byte 4 l of the
      // row, so the run's reads take one address, not eight; a store still
      // covers the row's 128 bytes.
      const int l = static_cast<int>(ptx::opaque(lane));
      const uint32_t row_at =
          ptx::smem_addr(raw_pointer_cast(&sC(first_row, 0))) + 4 * l;
      uint32_t words[kRun];
      CUTE_UNROLL
      for (int r = 0; r < kRun; ++r) {
        words[r] = ptx::ld_shared_u32(row_at + r * 128);
      }
      if constexpr (sizeof(T) == 4) {
        CUTE_UNROLL
        for (int r = 0; r < kRun; ++r) {
          const int word = l ^ 4 * r;
          if (r < rows && word < cols) {
            *reinterpret_cast<uint32_t*>(out + r * stride + word) = words[r];
          }
        }
      } else {
        // A row that starts on a word takes the lane's word w = l ^ 4 r as
        // it is, at columns 2 w and 2 w + 1. One that starts off a word
        // (shift 1) takes columns 2 w - 1 and 2 w: the high half of word
        // w - 1, from the lane that read it, and the low half of w; word
        // 0's lane stores column 0 and, from word 31, the piece's last.
        const int first_shift =
            static_cast<int>(reinterpret_cast<uintptr_t>(out) / 2 % 2);
        const int odd_stride = static_cast<int>(stride % 2);
        CUTE_UNROLL
        for (int r = 0; r < kRun; ++r) {
          const int shift = first_shift ^ (r & odd_stride);
          const int w = l ^ 4 * r;
          uint32_t value = words[r];
          if (shift) {
            const uint32_t before =
                __shfl_sync(0xffffffffu, words[r], ((w - 1) & 31) ^ 4 * r);
            value = __byte_perm(before, words[r], 0x5432);
          }
          if (r >= rows) continue;
          const int c = 2 * w - shift;
          T* const row = out + r * stride;
          const bool low = c >= 0 && c < cols, high = c + 1 < cols;
          if (low && high) {
            *reinterpret_cast<uint32_t*>(row + c) = value;
          } else {
            if (low) *reinterpret_cast<uint16_t*>(row + c) = value & 0xffff;
            if (high) *reinterpret_cast<uint16_t*>(row + c + 1) = value >> 16;
          }
          if (c < 0 && kCols - 1 < cols) {
            *reinterpret_cast<uint16_t*>(row + kCols - 1) = value & 0xffff;
          }
        }
      }
    }
  }
}

// The tail split's meeting over a tile whose steps several blocks shared
// (tile_schedule.h). Each consumer warp group writes its sums of the tile to
// its block's slot and arrives; the last of the tile's blocks to arrive adds
// every block's sums, its own read back too, in step order into `accum`
// (the same bits whichever arrives last) and returns true: it stores the
// tile. A tile one block took whole needs no meeting.
template <typename Cfg, typename Accum, typename Arrivals>
__device__ __forceinline__ bool meet_in_tail(const Tail<true>& tail,
                                             Accum& accum, Arrivals& arrivals,
                                             int tile, int consumer) {
  const tile_schedule::Layout& l = tail.layout;
  const int u = tile - l.whole_tiles;
  const int first = tile_schedule::first_block(l, u);
  const int last = tile_schedule::last_block(l, u);
  if (first == last) return true;
  const int group = consumer / 128, thread = consumer % 128;
  constexpr int kVectors = decltype(size(accum))::value / 4;
  constexpr int64_t kTileValues = Cfg::kBM * Cfg::kBN;
  // A group's sums in a slot, 16 bytes a thread in turn: a warp's stores
  // (and the last block's loads) cover 512 contiguous bytes.
  const auto sums_of = [&](int block) {
    return reinterpret_cast<float4*>(
               tail.sums + tile_schedule::slot(l, block, u) * kTileValues) +
           group * kVectors * 128 + thread;
  };
  float4* mine = sums_of(blockIdx.x);
  CUTE_UNROLL
  for (int q = 0; q < kVectors; ++q) {
    __stcg(mine + 128 * q, make_float4(accum(4 * q), accum(4 * q + 1),
                                       accum(4 * q + 2), accum(4 * q + 3)));
  }
  // The group's sums are written before its arrival is counted (release),
  // and every other block's before the last reads them (acquire): the
  // barriers order the group's threads around its one atomic.
  const uint32_t barrier = 1 + group;  // store_pieces' (the group's threads)
  cutlass::arch::NamedBarrier::sync(128, barrier);
  if (thread == 0) {
    ::cuda::atomic_ref<int, ::cuda::thread_scope_device> count(
        tail.counts[u * tile_schedule::kCountsPerTile + group]);
    arrivals.before[group] = count.fetch_add(1, ::cuda::memory_order_acq_rel);
  }
  cutlass::arch::NamedBarrier::sync(128, barrier);
  if (arrivals.before[group] != last - first) return false;
  // kInFlight vectors of a block's sums loaded at a time: the loads' registers
  // beside the accumulators stay within the consumers' share.
  constexpr int kInFlight = 8;
  static_assert(kVectors % kInFlight == 0, "whole runs of loads");
  CUTE_UNROLL
  for (int run = 0; run < kVectors; run += kInFlight) {
    for (int block = first; block <= last; ++block) {
      const float4* sums = sums_of(block);
      CUTE_UNROLL
      for (int q = run; q < run + kInFlight; ++q) {
        const float4 v = __ldcg(sums + 128 * q);
        if (block == first) {
          accum(4 * q) = v.x;
          accum(4 * q + 1) = v.y;
          accum(4 * q + 2) = v.z;
          accum(4 * q + 3) = v.w;
        } else {
          accum(4 * q) += v.x;
          accum(4 * q + 1) += v.y;
          accum(4 * q + 2) += v.z;
          accum(4 * q + 3) += v.w;
        }
      }
    }
  }
  return true;
}

// Four adjacent columns of out, stored as one.
template <typename T>
struct alignas(2 * sizeof(Pair<T>)) Quad {
  Pair<T> lo, hi;
};

// The cluster split's epilogue: the blocks of a cluster have each summed
// their share of the tile's contraction into `accum`; each writes its sums
// to shared memory, and block q adds the q-th slice of the tile's rows over
// every block's sums in split order (the same bits whichever finishes
// first), adds the bias, rounds once and stores. Two meetings on the
// cluster's barrier, which the producer's thread and the bias warp join
// too: the sums are written; no block reads another's any more.
template <typename Cfg, typename T, typename Accum, typename Coords,
          typename Storage, typename BiasPipeline, typename BiasState>
__device__ __forceinline__ void add_in_cluster(
    const GatherLinearParams<T>& p, const Accum& accum, const Coords& coords,
    Storage& smem, BiasPipeline& bias_pipeline, BiasState& bias_read,
    int m_block, int n_block, int rank, int splits, int consumer) {
  namespace cg = cooperative_groups;
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kPitch = Cfg::kPartialPitch;
  static_assert(kBM * kPitch * sizeof(float) <= sizeof(smem.a) + sizeof(smem.b),
                "the sums fit in the ring");
  float* sums = reinterpret_cast<float*>(smem.a.begin());
  // Both consumer groups' multiplies are done with the ring.
  cutlass::arch::NamedBarrier::sync(kConsumerThreads, kClusterSplitBarrier);
  // Accumulators i and i + 1 are adjacent columns of one row.
  CUTE_UNROLL
  for (int i = 0; i < size(accum); i += 2) {
    const int row = get<0>(coords(i)) - m_block * kBM;
    const int column = get<1>(coords(i)) - n_block * kBN;
    *reinterpret_cast<float2*>(sums + row * kPitch + column) =
        make_float2(accum(i), accum(i + 1));
  }
  ptx::cluster_sync_unaligned();
  bias_pipeline.consumer_wait(bias_read);
  const float* bias = smem.bias[bias_read.index()];
  const cg::cluster_group cluster = cg::this_cluster();
  // The block's slice of the tile's rows, those past B left out: their sums
  // are zeros multiplied, and the cluster's bandwidth is what the adds wait
  // on.
  const int first_row = kBM * rank / splits;
  const int rows = max(0, min(kBM * (rank + 1) / splits,
                              static_cast<int>(p.B - int64_t{m_block} * kBM)) -
                              first_row);
  constexpr int kQuads = kBN / 4;  // four columns a thread at a time
  static_assert(kBN % 4 == 0, "quads start at multiples of 4");
  // A quad goes out as one store where out's rows allow it.
  const bool quad_stores =
      p.out_stride_k == 1 && p.out_stride_b % 4 == 0 &&
      reinterpret_cast<uintptr_t>(p.out) % sizeof(Quad<T>) == 0;
  for (int e = consumer; e < rows * kQuads; e += kConsumerThreads) {
    const int row = first_row + e / kQuads, column = 4 * (e % kQuads);
    // Every block's sums asked for before the first add: one round trip
    // across the cluster, not one a block. Added in split order all the
    // same, so the bits do not depend on which answer comes first.
    float4 w[kMaxClusterSplits];
    CUTE_UNROLL
    for (int q = 0; q < kMaxClusterSplits; ++q) {
      if (q < splits) {
        w[q] = *reinterpret_cast<const float4*>(
            cluster.map_shared_rank(sums + row * kPitch + column, q));
      }
    }
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    CUTE_UNROLL
    for (int q = 0; q < kMaxClusterSplits; ++q) {
      if (q < splits) {
        v[0] += w[q].x;
        v[1] += w[q].y;
        v[2] += w[q].z;
        v[3] += w[q].w;
      }
    }
    const int64_t m = int64_t{m_block} * kBM + row;
    const int64_t n = int64_t{n_block} * kBN + column;
    T* out = p.out + m * p.out_stride_b + n * p.out_stride_k;
    if (quad_stores && n + 3 < p.K) {
      Quad<T> quad;
      quad.lo.x = from_acc<T>(v[0] + bias[column]);
      quad.lo.y = from_acc<T>(v[1] + bias[column + 1]);
      quad.hi.x = from_acc<T>(v[2] + bias[column + 2]);
      quad.hi.y = from_acc<T>(v[3] + bias[column + 3]);
      *reinterpret_cast<Quad<T>*>(out) = quad;
    } else {
      for (int c = 0; c < 4 && n + c < p.K; ++c) {
        out[c * p.out_stride_k] = from_acc<T>(v[c] + bias[column + c]);
      }
    }
  }
  bias_pipeline.consumer_release(bias_read);
  ++bias_read;
  ptx::cluster_sync_unaligned();
}

}  // namespace fgl::cuda::wgmma
