// The weight-streaming kernel of fgl::gather_linear, for few rows of B
// (decode, small batches). There the problem is reading weight once at full
// memory bandwidth: each warp owns kCols output columns and streams their
// weight rows with 16-byte loads, issued a whole stage ahead; the x rows of
// the stage sit in shared memory, shared by the block's warps, and every
// weight element is used for all kRows rows of B from registers. Partial sums
// are per lane and reduced across the warp once, at the end.
//
// Requires (checked by the launcher, see streaming::can_run): h and c
// contiguous (x.stride(2) == weight.stride(1) == 1), H and all other strides
// multiples of the 16-byte vector, 16-byte aligned x and weight.
#pragma once

#include <cstdint>

#include "gather_linear_kernel.h"
#include "numeric.cuh"

namespace fgl::cuda::streaming {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
// Vectors of 16 bytes each lane loads per column and stage.
constexpr int kVectorsPerLane = 4;

template <typename T>
bool can_run(const GatherLinearParams<T>& p) {
  constexpr int64_t kVec = Vec16<T>::kSize;
  const auto aligned = [](const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  };
  return p.x_stride_h == 1 && p.weight_stride_c == 1 && p.H % kVec == 0 &&
         p.x_stride_r % kVec == 0 && p.x_stride_b % kVec == 0 &&
         p.weight_stride_k % kVec == 0 && aligned(p.x) && aligned(p.weight);
}

// kRows: rows of B per block (grid.y covers the rest); kCols: output columns
// per warp.
template <typename T, int kRows, int kCols>
__global__ void __launch_bounds__(kThreads)
    gather_linear_streaming_kernel(const GatherLinearParams<T> p) {
  using acc_t = typename AccType<T>::type;
  using V = Vec16<T>;
  constexpr int kVec = V::kSize;
  constexpr int kStage = kVectorsPerLane * 32 * kVec;  // c values per stage
  constexpr int kVectorsPerRow = kStage / kVec;
  constexpr int kStageLoadsPerThread =
      (kRows * kVectorsPerRow + kThreads - 1) / kThreads;
  __shared__ V x_stage[kRows][kVectorsPerRow];  // [b, c / kVec]

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int64_t k0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kCols;
  const int64_t C = p.R * p.H;

  acc_t acc[kCols][kRows];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
#pragma unroll
    for (int b = 0; b < kRows; ++b) acc[j][b] = acc_t(0);
  }

  for (int64_t c0 = 0; c0 < C; c0 += kStage) {
    // 1. Issue this stage's weight loads first: they stream from memory
    //    while x is staged.
    V w[kCols][kVectorsPerLane];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t k = k0 + j;
#pragma unroll
      for (int i = 0; i < kVectorsPerLane; ++i) {
        const int64_t c = c0 + (i * 32 + lane) * kVec;
        if (k < p.K && c < C) {
          w[j][i] =
              *reinterpret_cast<const V*>(p.weight + k * p.weight_stride_k + c);
        } else {
          w[j][i] = V::zero();
        }
      }
    }
    // 2. Stage x[b0:b0+kRows, c0:c0+kStage] of the gathered matrix: all of a
    //    thread's loads are issued before any is stored, so their latencies
    //    overlap. A vector never straddles two heads because H % kVec == 0.
    V xv[kStageLoadsPerThread];
#pragma unroll
    for (int i = 0; i < kStageLoadsPerThread; ++i) {
      const int t = threadIdx.x + i * kThreads;
      const int b = t / kVectorsPerRow;
      const int64_t c = c0 + static_cast<int64_t>(t % kVectorsPerRow) * kVec;
      xv[i] = V::zero();
      if (t < kRows * kVectorsPerRow && b0 + b < p.B && c < C) {
        const int64_t r = c / p.H;
        xv[i] = *reinterpret_cast<const V*>(
            p.x + r * p.x_stride_r + (b0 + b) * p.x_stride_b + (c - r * p.H));
      }
    }
    __syncthreads();  // the previous stage's reads of x_stage are done
#pragma unroll
    for (int i = 0; i < kStageLoadsPerThread; ++i) {
      const int t = threadIdx.x + i * kThreads;
      if (t < kRows * kVectorsPerRow) {
        x_stage[t / kVectorsPerRow][t % kVectorsPerRow] = xv[i];
      }
    }
    __syncthreads();
    // 3. Multiply: each weight element meets all kRows rows of x.
#pragma unroll
    for (int i = 0; i < kVectorsPerLane; ++i) {
      acc_t wf[kCols][kVec];
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) wf[j][e] = to_acc(w[j][i].v[e]);
      }
#pragma unroll
      for (int b = 0; b < kRows; ++b) {
        const V xv = x_stage[b][i * 32 + lane];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const acc_t xe = to_acc(xv.v[e]);
#pragma unroll
          for (int j = 0; j < kCols; ++j) acc[j][b] += xe * wf[j][e];
        }
      }
    }
  }

  // Reduce each lane's partial sums across the warp; lane 0 writes.
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int64_t k = k0 + j;
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      acc_t v = acc[j][b];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
      }
      if (lane == 0 && k < p.K && b0 + b < p.B) {
        if (p.bias != nullptr) v += to_acc(p.bias[k * p.bias_stride]);
        p.out[(b0 + b) * p.out_stride_b + k * p.out_stride_k] = from_acc<T>(v);
      }
    }
  }
}

}  // namespace fgl::cuda::streaming
