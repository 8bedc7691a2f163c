// The decode kernel of fgl::gather_linear for 16-bit types and float32:
// warps own 16 output columns and multiply on the tensor cores (mma.sync
// m16n8k16; for float32 three m16n8k8 TF32 products, see mma() below)
// straight from registers, with no shared-memory staging, copy engine or
// pipeline to set up.
//
// A dot product does not care in which order its terms come, as long as x
// and the weight agree on it. So each lane loads 16 contiguous bytes (8
// values) of a weight row and of an x row, and the chunk of 32 contraction
// values that 4 lanes cover is handed to two mma instructions in the order
// the registers hold it: lane (g, t) = (lane / 4, lane % 4) loads weight
// rows k0 + g and k0 + g + 8 and x row g at c + 8t; the first mma takes the
// first two 32-bit words of each vector as its k = 2t, 2t+1 and 2t+8, 2t+9,
// the second mma the last two. float32 is alike with 4 values a vector: a
// chunk of 16, each mma's k = t and t + 4. Every load is a coalesced
// 16-byte vector, and the fragment layouts need no shuffle.
//
// Warps of a block split a group's contraction and add their partial tiles
// in split order through shared memory: the same inputs give the same bits.
//
// Requires (kernel_choice.h's plan_warp_mma checks it): sm_80 or later
// (sm_90 for float32),
// x and the weight load as 16-byte vectors and R*H below 2^30.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gather_linear_params.h"
#include "numeric.cuh"
#include "ptx.cuh"
#include "tf32_split.cuh"
#include "warp_mma_layout.h"

namespace fgl::cuda::warp_mma {

// x: read by every group of columns, so kept in L1.
template <typename T>
__device__ __forceinline__ uint4 load_x(const T* ptr) {
  return __ldg(reinterpret_cast<const uint4*>(ptr));
}

// The weight: read once, so not kept in L1, and each miss fetches 256 bytes
// of the row into L2, where the warp's next chunks find them (its load
// covers only 64 bytes of each of its rows).
template <typename T>
__device__ __forceinline__ uint4 load_weight(const T* ptr) {
  uint4 v;
  asm volatile(
      "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

// A + B of one half-chunk (two 32-bit words of each lane's vectors) on the
// tensor cores: m16n8k16 for 16-bit types; for float32 three m16n8k8 TF32
// products of each value split into a TF32 part and its TF32 remainder
// (small x big + big x small + big x big keep float32 accuracy).
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, float>) {
#if __CUDA_ARCH__ >= 900  // cvt.rn.tf32; plan_warp_mma asks sm_90 for float32
    mma_m16n8k8_3xtf32(d, d, d, a, b0, b1);
#endif
  } else {
    ptx::mma_m16n8k16<T>(d, a, b0, b1);
  }
}

// Grid: x = groups of output columns (kColumns each, blockDim / 32 / splits
// of them per block), y = tiles of kRowTiles * kRowsPerTile rows of B.
template <typename T, int kRowTiles>
__global__ void __launch_bounds__(kMaxThreads)
    gather_linear_warp_mma_kernel(const GatherLinearParams<T> p,
                                  const Layout l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunk = 4 * kVec;  // contraction values a chunk covers
  __shared__ float partial[kMaxThreads / 32][kRowTiles][4][32];

  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int split = warp % l.splits;
  const int64_t groups_per_block = blockDim.x / 32 / l.splits;
  const int64_t k0 =
      (blockIdx.x * groups_per_block + warp / l.splits) * kColumns;
  const int64_t b0 =
      static_cast<int64_t>(blockIdx.y) * kRowTiles * kRowsPerTile;
  const int32_t C = static_cast<int32_t>(p.R * p.H);
  const int32_t H = static_cast<int32_t>(p.H);
  const int32_t c_end = min(C, (split + 1) * l.slice);
  // Columns past K read column K - 1 and rows past B read row B - 1 (valid
  // addresses); neither is stored.
  const auto column = [&](int64_t k) { return k < p.K ? k : p.K - 1; };
  const T* w_lo = p.weight + column(k0 + g) * p.weight_stride_k;
  const T* w_hi = p.weight + column(k0 + g + 8) * p.weight_stride_k;
  int64_t row_offset[kRowTiles];
#pragma unroll
  for (int j = 0; j < kRowTiles; ++j) {
    const int64_t b = b0 + j * kRowsPerTile + g;
    row_offset[j] = (b < p.B ? b : p.B - 1) * p.x_stride_b;
  }
  // The first step covers 256 bytes of each of the group's 16 weight rows:
  // a 128-byte line a lane. Safe before the wait: a prefetch only warms L2,
  // which the grid before writes through, so no load can see stale bytes.
  static_assert(kChunk * kUnroll * sizeof(T) == 256, "two lines a row");
  if (l.prefetch_first_step) {
    const int32_t c =
        split * l.slice + (lane % 2) * static_cast<int32_t>(128 / sizeof(T));
    if (c < c_end) {
      ptx::prefetch_l2(p.weight + column(k0 + lane / 2) * p.weight_stride_k +
                       c);
    }
  }
  ptx::await_previous_grid();
  // The bias is read now, while the weight streams, not after it.
  float bias[2] = {0.0f, 0.0f};
  if (p.bias != nullptr && split == 0) {
    bias[0] = to_acc(p.bias[column(k0 + g) * p.bias_stride]);
    bias[1] = to_acc(p.bias[column(k0 + g + 8) * p.bias_stride]);
  }

  float acc[kRowTiles][4] = {};
  // The loop runs alike in every lane: mma.sync needs the whole warp.
  for (int32_t c0 = split * l.slice; c0 < c_end; c0 += kChunk * kUnroll) {
    // float32: each step sums into fresh registers, added to the total with
    // rounded adds (the tensor cores truncate their sums).
    float step[kRowTiles][4] = {};
    auto& sum = std::is_same_v<T, float> ? step : acc;
    uint4 lo[kUnroll], hi[kUnroll], xv[kRowTiles][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t c = c0 + u * kChunk + t * kVec;
      const bool in = c < c_end;
      // A vector never straddles two heads: H is a multiple of kVec.
      const int32_t r = c / H;
      const T* x_c = p.x + r * p.x_stride_r + (c - r * H);
      const uint4 zero = make_uint4(0, 0, 0, 0);
      lo[u] = in ? load_weight(w_lo + c) : zero;
      hi[u] = in ? load_weight(w_hi + c) : zero;
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
        xv[j][u] = in ? load_x(x_c + row_offset[j]) : zero;
      }
    }
    // The products in the reverse order of the loads: the first multiply
    // waits for the last load, so the compiler keeps every load ahead of
    // the multiplies and they are all in flight together.
#pragma unroll
    for (int u = kUnroll - 1; u >= 0; --u) {
#pragma unroll
      for (int j = kRowTiles - 1; j >= 0; --j) {
        const uint32_t a0[4] = {lo[u].x, hi[u].x, lo[u].y, hi[u].y};
        mma<T>(sum[j], a0, xv[j][u].x, xv[j][u].y);
        const uint32_t a1[4] = {lo[u].z, hi[u].z, lo[u].w, hi[u].w};
        mma<T>(sum[j], a1, xv[j][u].z, xv[j][u].w);
      }
    }
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[j][i] = __fadd_rn(acc[j][i], step[j][i]);
      }
    }
  }

  if (l.splits > 1) {
#pragma unroll
    for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][j][i][lane] = acc[j][i];
    }
    __syncthreads();
    if (split != 0) return;
#pragma unroll
    for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        for (int s = 1; s < l.splits; ++s) {
          acc[j][i] += partial[warp + s][j][i][lane];
        }
      }
    }
  }
  // Accumulator i of n-tile j: column k0 + g (+ 8 for i >= 2), row
  // j * 8 + 2t (+ 1 for odd i) of the tile.
#pragma unroll
  for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t k = k0 + g + (i >= 2 ? 8 : 0);
      const int64_t b = b0 + j * kRowsPerTile + 2 * t + (i & 1);
      if (k < p.K && b < p.B) {
        float sum = acc[j][i];
        if (std::is_same_v<T, float> && isnan(sum)) sum = dot_in_order(p, b, k);
        p.out[b * p.out_stride_b + k * p.out_stride_k] =
            from_acc<T>(sum + bias[i / 2]);
      }
    }
  }
#endif
}

}  // namespace fgl::cuda::warp_mma
