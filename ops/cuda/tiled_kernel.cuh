// The general kernel of fgl::gather_linear: a shared-memory tiled SIMT GEMM
// that reads x and weight through arbitrary strides. It serves every shape
// and layout, but runs slower than cat + cuBLAS, so the routing policy
// (kernel_choice.h) never picks it: it runs where a test or
// `fgl_bench --route tiled` forces it, a fused kernel for every GPU and
// layout that the streaming kernel does not take.
#pragma once

#include "gather_linear_kernel.h"
#include "numeric.cuh"
#include "ptx.cuh"

namespace fgl::cuda::tiled {

// A block computes a kBM x kBN tile of out (rows of B, columns of K), walking
// the gathered contraction dimension c = r*H + h in steps of kBK. Each of the
// 16 x 16 threads owns a kTM x kTN micro-tile whose rows and columns are 16
// apart, so the shared-memory reads of a warp are broadcasts or consecutive.
constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 32;
constexpr int kThreadsX = 16;
constexpr int kThreadsY = 16;
constexpr int kThreads = kThreadsX * kThreadsY;
constexpr int kTM = kBM / kThreadsY;
constexpr int kTN = kBN / kThreadsX;
// Tile loads: a thread always loads contraction column kk = tid % kBK, so a
// warp reads kBK consecutive c, which are consecutive h for a dense x row.
constexpr int kLoadRowsPerPass = kThreads / kBK;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gather_linear_tiled_kernel(const GatherLinearParams<T> p) {
  using acc_t = typename AccType<T>::type;
  // +1 column: the transposed tile stores of a warp hit 32 different banks.
  __shared__ acc_t x_tile[kBK][kBM + 1];  // [c, b]
  __shared__ acc_t w_tile[kBK][kBN + 1];  // [c, k]
  ptx::await_previous_grid();

  const int tid = threadIdx.x;
  const int tx = tid % kThreadsX;
  const int ty = tid / kThreadsX;
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t C = p.R * p.H;

  const int kk = tid % kBK;
  const int load_row = tid / kBK;
  // (r, h) of this thread's contraction index c0 + kk, advanced without a
  // division per step.
  int64_t r = 0;
  int64_t h = kk;
  if (p.H > 0) {
    r = kk / p.H;
    h = kk % p.H;
  }

  acc_t acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = acc_t(0);
  }

  for (int64_t c0 = 0; c0 < C; c0 += kBK) {
    const int64_t c = c0 + kk;
    const bool c_in = c < C;
    const int64_t x_offset = r * p.x_stride_r + h * p.x_stride_h;
#pragma unroll
    for (int i = 0; i < kBM / kLoadRowsPerPass; ++i) {
      const int m = load_row + i * kLoadRowsPerPass;
      const int64_t b = b0 + m;
      x_tile[kk][m] = (c_in && b < p.B)
                          ? to_acc(p.x[x_offset + b * p.x_stride_b])
                          : acc_t(0);
    }
#pragma unroll
    for (int i = 0; i < kBN / kLoadRowsPerPass; ++i) {
      const int n = load_row + i * kLoadRowsPerPass;
      const int64_t k = k0 + n;
      w_tile[kk][n] =
          (c_in && k < p.K)
              ? to_acc(p.weight[k * p.weight_stride_k + c * p.weight_stride_c])
              : acc_t(0);
    }
    __syncthreads();

#pragma unroll
    for (int q = 0; q < kBK; ++q) {
      acc_t a[kTM];
      acc_t w[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = x_tile[q][ty + i * kThreadsY];
#pragma unroll
      for (int j = 0; j < kTN; ++j) w[j] = w_tile[q][tx + j * kThreadsX];
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * w[j];
      }
    }
    __syncthreads();

    h += kBK;
    if (h >= p.H && p.H > 0) {
      r += h / p.H;
      h %= p.H;
    }
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int64_t b = b0 + ty + i * kThreadsY;
    if (b >= p.B) continue;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int64_t k = k0 + tx + j * kThreadsX;
      if (k >= p.K) continue;
      acc_t v = acc[i][j];
      if (p.bias != nullptr) v += to_acc(p.bias[k * p.bias_stride]);
      p.out[b * p.out_stride_b + k * p.out_stride_k] = from_acc<T>(v);
    }
  }
}

}  // namespace fgl::cuda::tiled
