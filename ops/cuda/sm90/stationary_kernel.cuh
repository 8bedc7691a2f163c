// The Hopper tensor-core kernel's stationary weight, held in registers
// (sm_90a): many rows over a short contraction, at most kMaxSteps stages of
// 64 (R * H up to 512 at H = 64). Torch-free.
//
// Each block keeps one 128-column tile of the weight, its whole
// contraction, as wgmma's A operand in its consumers' registers: each of
// the two consumer warp groups 64 output columns, 128 registers a thread.
// The weight's stages come through the ring once, each ahead of the first
// tile's x stage of the same step, and are read into registers (ldmatrix)
// as that tile is multiplied. After that the ring carries x alone, 128 rows
// a stage (wgmma's B operand, read by descriptor), so out comes out
// transposed: a group's accumulators are 64 columns of out by 128 rows of
// B. Both groups multiply every stage, each releasing it when its tensor
// cores are done, the second group some stages behind the first so that
// their epilogues fall apart. A group adds the bias, rounds, writes its
// 128 x 64 piece of out transposed into shared memory (stmatrix .trans),
// and the copy engine stores it while the group multiplies the next tile.
// Where the launcher finds it pays, the blocks ask L2 for their first
// tile's stages before the grid before them ends.
// Against keeping the weight in shared memory, the tensor cores read 4 KB
// of shared memory a m64n128k16 instead of 6, and the weight's 128 KB
// deepen x's ring.
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include "numeric.cuh"
#include "ptx.cuh"
#include "wgmma_config.cuh"

namespace fgl::cuda::wgmma::stationary {

using namespace cute;

inline constexpr int kRows = 128;             // rows of B a tile: wgmma's N
inline constexpr int kGroupCols = 64;         // a group's output columns: its M
inline constexpr int kCols = 2 * kGroupCols;  // a block's column tile
inline constexpr int kStepC = 64;  // contraction a stage: 128-byte rows
inline constexpr int kMaxSteps = 8;
inline constexpr int kRingStages = 12;
inline constexpr int kThreads = 384;  // a producer warp group, two consumers
inline constexpr uint32_t kStageBytes = kRows * 128;
inline constexpr uint32_t kPieceBytes = kRows * kGroupCols * 2;

template <typename T>
struct Layouts {
  using Element = typename Types<T>::Operand;
  using TileX = Shape<Int<kRows>, Int<kStepC>>;
  using TileOut = Shape<Int<kRows>, Int<kGroupCols>>;
  using TileW = Shape<Int<kCols>, Int<kStepC>>;  // a weight stage: one slot
  // 128-byte swizzled rows, as the copy engine writes and wgmma reads them.
  using SmemRing = decltype(tile_to_shape(
      GMMA::Layout_K_SW128_Atom<Element>{},
      make_shape(Int<kRows>{}, Int<kStepC>{}, Int<kRingStages>{})));
  using SmemOut =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, TileOut{}));
};

struct SharedStorage {
  alignas(1024) unsigned char ring[kRingStages][kStageBytes];
  // One piece of out a group: the copy engine has read it long before the
  // group's next tile is done.
  alignas(1024) unsigned char out[2][kPieceBytes];
  uint64_t full[kRingStages];
  uint64_t empty[kRingStages];
};
// The dynamic shared memory's start is aligned to 1024 bytes in the kernel.
inline constexpr int kSmemBytes = sizeof(SharedStorage) + 1024;

// A place in the ring: its slot, and how many times the ring has come
// round to it (the parity of the slot's barriers).
struct RingPosition {
  int slot = 0;
  uint32_t lap = 0;
  __device__ __forceinline__ void advance() {
    if (++slot == kRingStages) slot = 0, ++lap;
  }
};

// Two float32 values rounded to T and packed, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  Pair<T> pair;
  pair.x = from_acc<T>(lo);
  pair.y = from_acc<T>(hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

/// Grid: persistent, a block a multiprocessor in whole rows of column tiles
/// (gridDim.x a multiple of ceil(K / kCols)), so that block i takes the
/// tiles i, i + gridDim.x, ... and keeps column tile i % ceil(K / kCols).
/// kThreads threads, kSmemBytes of dynamic shared memory.
template <typename T, typename TmaX, typename TmaW, typename TmaOut>
__global__ void __launch_bounds__(kThreads, 1)
    gather_linear_stationary_kernel(const __grid_constant__ TmaX tma_x,
                                    const __grid_constant__ TmaW tma_w,
                                    const __grid_constant__ TmaOut tma_out,
                                    const GatherLinearParams<T> p,
                                    const bool ask_l2_first) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layouts<T>;
  using Element = typename L::Element;
  extern __shared__ unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage*>(
      smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023));

  const int n_tiles = (static_cast<int>(p.K) + kCols - 1) / kCols;
  const int tiles = (static_cast<int>(p.B) + kRows - 1) / kRows * n_tiles;
  const int k_tiles = (static_cast<int>(p.H) + kStepC - 1) / kStepC;
  const int steps = k_tiles * static_cast<int>(p.R);
  const int warp_group = threadIdx.x / 128;

  // The producer's view: the ring, the weight's stages of the block's
  // column tile (kCols, kStepC, h-tile, r), x's of a row tile (kRows,
  // kStepC, h-tile, r).
  Tensor mX = tma_x.get_tma_tensor(shape(x_tensor<Element>(p)));
  Tensor mW = tma_w.get_tma_tensor(shape(weight_tensor<Element>(p)));
  Tensor sX =
      make_tensor(make_smem_ptr(reinterpret_cast<Element*>(&smem.ring[0][0])),
                  typename L::SmemRing{});
  Tensor gW = local_tile(mW, typename L::TileW{},
                         make_coord(blockIdx.x % n_tiles, _, _));
  auto [tWgW, tWsW] =
      tma_partition(tma_w, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sX),
                    group_modes<0, 2>(gW));
  const auto x_stages = [&](int row_tile) {
    Tensor gX = local_tile(mX, typename L::TileX{}, make_coord(row_tile, _, _));
    return tma_partition(tma_x, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sX),
                         group_modes<0, 2>(gX));
  };

  if (threadIdx.x == 0 && ask_l2_first) {
    // The first tile's stages asked of L2 before waiting for the grid
    // before (safe: L2 is where that grid's writes land), shared out among
    // the blocks that load them: each weight stage by one block of its
    // column tile, each x stage by one block of its row tile.
    const int row_tile = blockIdx.x / n_tiles;
    const int col_tile = blockIdx.x % n_tiles;
    const int blocks_per_col = gridDim.x / n_tiles;
    auto [tXgX, tXsX] = x_stages(row_tile);
    int h_tile = 0, r = 0;
    for (int step = 0; step < steps; ++step) {
      if (step % blocks_per_col == row_tile % blocks_per_col) {
        prefetch(tma_w, tWgW(_, h_tile, r));
      }
      if (step % n_tiles == col_tile) prefetch(tma_x, tXgX(_, h_tile, r));
      if (++h_tile == k_tiles) h_tile = 0, ++r;
    }
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < kRingStages; ++i) {
      ptx::mbarrier_init(&smem.full[i], 1);
      ptx::mbarrier_init(&smem.empty[i], 8);  // every consumer warp
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  ptx::await_previous_grid();

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x != 0) return;
    // Producer: one thread keeps the ring full.
    RingPosition at;
    // The next slot, once the consumers have released it, armed for a stage.
    const auto next_slot = [&] {
      if (at.lap > 0)
        ptx::mbarrier_wait(&smem.empty[at.slot], (at.lap - 1) & 1);
      ptx::mbarrier_arrive_expect_tx(&smem.full[at.slot], kStageBytes);
      return at.slot;
    };
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      auto [tXgX, tXsX] = x_stages(tile / n_tiles);
      int h_tile = 0, r = 0;
      for (int step = 0; step < steps; ++step) {
        // The first tile's stages each come after the weight's of the same
        // step, in a slot of their own.
        if (tile == static_cast<int>(blockIdx.x)) {
          const int slot = next_slot();
          copy(tma_w.with(smem.full[slot]), tWgW(_, h_tile, r), tWsW(_, slot));
          at.advance();
        }
        const int slot = next_slot();
        copy(tma_x.with(smem.full[slot]), tXgX(_, h_tile, r), tXsX(_, slot));
        at.advance();
        if (++h_tile == k_tiles) h_tile = 0, ++r;
      }
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<232>();
  const int consumer = threadIdx.x - 128;
  const int group = consumer / 128;
  const int thread = consumer % 128;
  const int warp = thread / 32, lane = thread % 32;
  const int col0 = blockIdx.x % n_tiles * kCols + group * kGroupCols;
  // This thread's two rows of A: output columns of the group's 64.
  const int64_t m_lo = col0 + 16 * warp + lane / 4;
  const int64_t m_hi = m_lo + 8;

  // The weight as wgmma's A fragments, read from each weight slot of the
  // first tile: register q of k-block kb holds columns 16 kb + 2 (lane % 4)
  // + 8 (q / 2) and the next of row m_lo (q even) or m_hi (q odd) of the
  // stage.
  uint32_t a[kMaxSteps][4][4];
  const auto bias_of = [&](int64_t m) {
    return p.bias != nullptr && m < p.K ? to_acc(p.bias[m * p.bias_stride])
                                        : 0.0f;
  };
  const float bias_lo = bias_of(m_lo), bias_hi = bias_of(m_hi);

  // The second group starts 3/8 of a tile's stages behind the first, so
  // that their epilogues fall apart.
  constexpr uint32_t kLagBarrier = 3;  // 1 and 2: the groups' epilogues
  const int lag_stages = min(max(1, 3 * steps / 8), steps);
  if (group == 1) ptx::named_barrier_sync(kLagBarrier, 256);

  const uint32_t ring = ptx::smem_addr(&smem.ring[0][0]);
  const uint32_t piece = ptx::smem_addr(&smem.out[group][0]);
  const uint32_t epilogue_barrier = 1 + group;
  RingPosition at;
  bool first_tile = true;
  float d[64];
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int row_tile = tile / n_tiles;
    int last_slot = 0;
    CUTE_UNROLL
    for (int st = 0; st < kMaxSteps; ++st) {
      if (st < steps) {
        if (first_tile) {
          ptx::mbarrier_wait(&smem.full[at.slot], at.lap & 1);
          // Lane 8 q + i: row 8 (q % 2) + i of the warp's 16, columns
          // 16 kb + 8 (q / 2) on, in the 128-byte swizzle.
          const int row =
              64 * group + 16 * warp + 8 * (lane / 8 % 2) + lane % 8;
          const uint32_t w = ring +
                             static_cast<uint32_t>(at.slot) * kStageBytes +
                             static_cast<uint32_t>(row * 128);
          CUTE_UNROLL
          for (int kb = 0; kb < 4; ++kb) {
            const int chunk = 2 * kb + lane / 16;
            ptx::ldmatrix_x4(
                a[st][kb], w + static_cast<uint32_t>((chunk ^ (row % 8)) << 4));
          }
          if (lane == 0) ptx::mbarrier_arrive(&smem.empty[at.slot]);
          at.advance();
        }
        ptx::mbarrier_wait(&smem.full[at.slot], at.lap & 1);
        ptx::wgmma_fence();
        const uint64_t b = ptx::wgmma_desc_sw128(
            ring + static_cast<uint32_t>(at.slot) * kStageBytes);
        CUTE_UNROLL
        for (int kb = 0; kb < 4; ++kb) {
          if (st == 0 && kb == 0) {
            ptx::wgmma_m64n128k16_rs<T, false>(d, a[st][kb], b);
          } else {
            ptx::wgmma_m64n128k16_rs<T, true>(d, a[st][kb], b + 2 * kb);
          }
        }
        ptx::wgmma_commit();
        if (first_tile && group == 0 && st + 1 == lag_stages) {
          ptx::named_barrier_arrive(kLagBarrier, 256);
        }
        // The stage before is multiplied: its slot goes back.
        ptx::wgmma_wait<1>();
        if (st > 0 && lane == 0) ptx::mbarrier_arrive(&smem.empty[last_slot]);
        last_slot = at.slot;
        at.advance();
      }
    }
    first_tile = false;
    ptx::wgmma_wait<0>();
    CUTE_UNROLL
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
    if (lane == 0) ptx::mbarrier_arrive(&smem.empty[last_slot]);

    // Epilogue: accumulator (m, n) is out[row_tile * kRows + n][col0 + m].
    const int64_t row0 = int64_t{row_tile} * kRows;
    if constexpr (std::is_same_v<TmaOut, NoTmaStore>) {
      CUTE_UNROLL
      for (int i = 0; i < 64; ++i) {
        const int64_t m = (i / 2 % 2 == 0 ? m_lo : m_hi);
        const int64_t n = row0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        if (m < p.K && n < p.B) {
          p.out[n * p.out_stride_b + m * p.out_stride_k] =
              from_acc<T>(d[i] + (i / 2 % 2 == 0 ? bias_lo : bias_hi));
        }
      }
    } else {
      // The copy engine has read this group's piece of the last tile.
      if (thread == 0) tma_store_wait<0>();
      ptx::named_barrier_sync(epilogue_barrier, 128);
      CUTE_UNROLL
      for (int j = 0; j < 16; j += 2) {
        const uint32_t r[4] = {
            pack_pair<T>(d[4 * j] + bias_lo, d[4 * j + 1] + bias_lo),
            pack_pair<T>(d[4 * j + 2] + bias_hi, d[4 * j + 3] + bias_hi),
            pack_pair<T>(d[4 * j + 4] + bias_lo, d[4 * j + 5] + bias_lo),
            pack_pair<T>(d[4 * j + 6] + bias_hi, d[4 * j + 7] + bias_hi)};
        // Lane 8 q + c: row 8 (j + q / 2) + c of the piece, its 16 bytes of
        // columns 16 warp + 8 (q % 2) on, in the 128-byte swizzle.
        const int q = lane / 8, c = lane % 8;
        const int row = 8 * (j + q / 2) + c;
        const int chunk = 2 * warp + q % 2;
        ptx::stmatrix_x4_trans(
            r, piece + static_cast<uint32_t>(row * 128 + ((chunk ^ c) << 4)));
      }
      ptx::fence_proxy_async_shared();  // visible to the copy engine
      ptx::named_barrier_sync(epilogue_barrier, 128);
      if (thread == 0) {
        Tensor mOut = tma_out.get_tma_tensor(shape(out_tensor(p)));
        Tensor sOut = make_tensor(
            make_smem_ptr(
                reinterpret_cast<typename Types<T>::Out*>(&smem.out[group][0])),
            typename L::SmemOut{});
        Tensor gOut = local_tile(mOut, typename L::TileOut{},
                                 make_coord(row_tile, col0 / kGroupCols));
        auto [tOgOut, tOsOut] =
            tma_partition(tma_out, Int<0>{}, Layout<_1>{},
                          group_modes<0, 2>(sOut), group_modes<0, 2>(gOut));
        copy(tma_out, tOsOut, tOgOut);
        tma_store_arrive();
      }
    }
  }
  if constexpr (!std::is_same_v<TmaOut, NoTmaStore>) {
    // Shared memory stays until the copy engine has read the last piece.
    if (thread == 0) tma_store_wait<0>();
  }
#endif
}

}  // namespace fgl::cuda::wgmma::stationary
