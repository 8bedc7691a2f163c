// The tensor-core weight-streaming kernel of fgl::gather_linear, for float16
// and bfloat16 with few rows of B. With a handful of rows the CUDA cores
// would be the limit (one FMA per weight element and row); mma.sync does the
// multiply, so the kernel runs at the speed weight streams from memory.
//
// The weight is the M operand: a block owns 16 output columns (the 16 rows of
// one m16n8k16 A tile) and its 8 warps split the contraction c = r*H + h into
// interleaved chunks of 32. Each lane loads 16 bytes of two weight rows and of
// each x row straight from global memory into mma fragments: within a k16
// step the order of c does not matter as long as A and B agree, so each lane
// takes 8 consecutive c (two k16 steps' worth) instead of the canonical pairs.
// Warps' partial sums meet in shared memory at the end.
//
// Requires what streaming::can_run checks (16-byte vectors along c and h).
#pragma once

#include <cstdint>

#include "gather_linear_kernel.h"
#include "numeric.cuh"

namespace fgl::cuda::mma_streaming {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kColumns = 16;  // output columns (weight rows) per block
constexpr int kChunk = 32;    // c values per warp and step: 4 lanes x 8
// Chunks a warp loads before it multiplies: the bytes in flight per lane,
// as many as the registers allow (each chunk holds 2 + kTiles vectors).
constexpr int chunks_in_flight(int tiles) { return tiles <= 2 ? 8 : 4; }

template <typename T>
struct MmaOp;

template <>
struct MmaOp<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t a[4],
                                             const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <>
struct MmaOp<__half> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t a[4],
                                             const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// kTiles: n8 tiles of B rows per block (8 * kTiles rows; grid.y covers more).
template <typename T, int kTiles>
__global__ void __launch_bounds__(kThreads)
    gather_linear_mma_streaming_kernel(const GatherLinearParams<T> p) {
  using V = Vec16<T>;
  static_assert(V::kSize == 8, "16-bit element types only");
  constexpr int kChunksInFlight = chunks_in_flight(kTiles);
  __shared__ float partial[kWarps][kTiles * 4][32];

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int g = lane / 4;  // mma group: A row, B column, C row
  const int t = lane % 4;  // thread in group: which 8 c of the chunk
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * 8 * kTiles;
  const int64_t C = p.R * p.H;
  const int64_t k_lo = k0 + g;
  const int64_t k_hi = k0 + g + 8;

  float acc[kTiles][4] = {};
  for (int64_t c_base = static_cast<int64_t>(warp) * kChunk; c_base < C;
       c_base += static_cast<int64_t>(kWarps) * kChunk * kChunksInFlight) {
    V w_lo[kChunksInFlight], w_hi[kChunksInFlight];
    V xv[kChunksInFlight][kTiles];
#pragma unroll
    for (int q = 0; q < kChunksInFlight; ++q) {
      const int64_t c =
          c_base + static_cast<int64_t>(q) * kWarps * kChunk + t * 8;
      const bool c_in = c < C;
      w_lo[q] = (c_in && k_lo < p.K)
                    ? *reinterpret_cast<const V*>(p.weight +
                                                  k_lo * p.weight_stride_k + c)
                    : V::zero();
      w_hi[q] = (c_in && k_hi < p.K)
                    ? *reinterpret_cast<const V*>(p.weight +
                                                  k_hi * p.weight_stride_k + c)
                    : V::zero();
      // H % 8 == 0: the 8 values lie in one head r.
      const int64_t r = c_in ? c / p.H : 0;
      const int64_t x_offset = r * p.x_stride_r + (c - r * p.H);
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        const int64_t b = b0 + n * 8 + g;
        xv[q][n] =
            (c_in && b < p.B)
                ? *reinterpret_cast<const V*>(p.x + x_offset + b * p.x_stride_b)
                : V::zero();
      }
    }
#pragma unroll
    for (int q = 0; q < kChunksInFlight; ++q) {
      const auto* lo = reinterpret_cast<const uint32_t*>(&w_lo[q]);
      const auto* hi = reinterpret_cast<const uint32_t*>(&w_hi[q]);
#pragma unroll
      for (int s = 0; s < 2; ++s) {  // two k16 steps per chunk
        const uint32_t a[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1],
                               hi[2 * s + 1]};
#pragma unroll
        for (int n = 0; n < kTiles; ++n) {
          const auto* xw = reinterpret_cast<const uint32_t*>(&xv[q][n]);
          const uint32_t b[2] = {xw[2 * s], xw[2 * s + 1]};
          MmaOp<T>::run(acc[n], a, b);
        }
      }
    }
  }

  // acc[n][j]: output column k0 + g (+8 for j >= 2), row b0 + 8n + 2t + j%2.
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) partial[warp][n * 4 + j][lane] = acc[n][j];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTiles * 4 * 32; i += kThreads) {
    const int n = i / 128;
    const int j = (i / 32) % 4;
    const int l = i % 32;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += partial[w][n * 4 + j][l];
    const int64_t k = k0 + l / 4 + (j >= 2 ? 8 : 0);
    const int64_t b = b0 + n * 8 + 2 * (l % 4) + (j % 2);
    if (k < p.K && b < p.B) {
      if (p.bias != nullptr) v += to_acc(p.bias[k * p.bias_stride]);
      p.out[b * p.out_stride_b + k * p.out_stride_k] = from_acc<T>(v);
    }
  }
}

}  // namespace fgl::cuda::mma_streaming
