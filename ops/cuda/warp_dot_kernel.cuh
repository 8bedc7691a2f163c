// The small-problem kernel of fgl::gather_linear: warps own output columns.
// A warp's 32 lanes walk a slice of the contraction c = r*H + h side by side
// in 16-byte vectors (or single elements, where the rows are not 16-byte
// vectors) of the weight row k and of kRows rows of x, each lane summing
// its own products, and a butterfly of shuffles adds the lanes.
// Where there are few columns, `splits` warps of a block share one column,
// each taking a slice of the contraction, and add their sums in slice order
// through shared memory.
//
// It has no cluster, no copy engine and no pipeline to set up: its fixed
// cost is one launch and one round trip to memory, which is what problems
// of a few hundred kilobytes pay (bench/NOTES.md, "v11").
//
// Requires (kernel_choice.h's plan_warp_dot checks it): unit stride along h
// and c, R*H below 2^30, and for the 16-byte instance H, the other strides
// and both bases multiples of 16 bytes; the instance of one element a load
// reads any such rows.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gather_linear_params.h"
#include "numeric.cuh"
#include "ptx.cuh"
#include "warp_dot_layout.h"

namespace fgl::cuda::warp_dot {

// kBytes of consecutive elements, loaded as one word.
template <typename T, int kBytes>
struct alignas(kBytes) Vector {
  static constexpr int kSize = kBytes / static_cast<int>(sizeof(T));
  T v[kSize];
};

template <int kBytes>
using Word = std::conditional_t<
    kBytes == 16, uint4,
    std::conditional_t<kBytes == 8, uint2,
                       std::conditional_t<kBytes == 4, uint32_t, uint16_t>>>;

// The vector at `ptr`, or zeros where it lies past the slice (`in` false).
template <typename T, int kBytes>
__device__ __forceinline__ Vector<T, kBytes> load_vector(const T* ptr,
                                                         bool in) {
  Vector<T, kBytes> v;
  *reinterpret_cast<Word<kBytes>*>(&v) =
      in ? __ldg(reinterpret_cast<const Word<kBytes>*>(ptr)) : Word<kBytes>{};
  return v;
}

// Sums v[0..kRows) of every lane across the warp. Each halving step trades
// half of the values with the lane `o` apart, so kRows values take kRows - 1
// shuffles rather than 5 * kRows; the remaining steps add whole lanes. The
// additions' order depends on the lane only: the same inputs give the same
// bits. Returns the sum that lane holds, of row warp_row<kRows>(lane).
template <int kRows, typename A>
__device__ __forceinline__ A warp_sum(A (&v)[kRows], int lane) {
  constexpr unsigned kAll = 0xffffffffu;
#pragma unroll
  for (int o = 1, n = kRows; n > 1; o *= 2, n /= 2) {
    const bool upper = (lane & o) != 0;
#pragma unroll
    for (int j = 0; j < n / 2; ++j) {
      const A send = upper ? v[j] : v[j + n / 2];
      const A keep = upper ? v[j + n / 2] : v[j];
      v[j] = keep + __shfl_xor_sync(kAll, send, o);
    }
  }
#pragma unroll
  for (int o = kRows; o < 32; o *= 2) v[0] += __shfl_xor_sync(kAll, v[0], o);
  return v[0];
}

// The row of v whose warp sum lane `lane` holds after warp_sum: the upper
// half at each halving step, so the lane's low bits in reverse order.
template <int kRows>
__device__ __forceinline__ int warp_row(int lane) {
  int row = 0;
#pragma unroll
  for (int o = 1, n = kRows; n > 1; o *= 2, n /= 2) {
    if ((lane & o) != 0) row += n / 2;
  }
  return row;
}

// Grid: x = tiles of output columns (blockDim / 32 / splits of them),
// y = tiles of kRows rows of B. Each lane loads kBytes of a row at once
// (kVectorBytes, or one element).
template <typename T, int kRows, int kBytes>
__global__ void __launch_bounds__(kMaxThreads)
    gather_linear_warp_dot_kernel(const GatherLinearParams<T> p,
                                  const Layout l) {
  using acc_t = typename AccType<T>::type;
  using Vec = Vector<T, kBytes>;
  constexpr int kVec = Vec::kSize;
  constexpr int kStep = 32 * kVec;  // contraction elements per warp load
  constexpr int kUnroll = unroll(kRows, kBytes);
  __shared__ acc_t partial[kMaxThreads / 32][kRows];
  ptx::await_previous_grid();

  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int split = warp % l.splits;
  const int64_t columns_per_block = blockDim.x / 32 / l.splits;
  const int64_t k = blockIdx.x * columns_per_block + warp / l.splits;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int32_t C = static_cast<int32_t>(p.R * p.H);
  const int32_t H = static_cast<int32_t>(p.H);
  const int32_t c_end = min(C, (split + 1) * l.slice);
  // Columns past K read column K - 1 and rows past B read row B - 1 (valid
  // addresses); neither is stored.
  const T* w = p.weight + (k < p.K ? k : p.K - 1) * p.weight_stride_k;
  int64_t row_offset[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    row_offset[i] = (b0 + i < p.B ? b0 + i : p.B - 1) * p.x_stride_b;
  }

  acc_t acc[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) acc[i] = acc_t(0);
  for (int32_t c0 = split * l.slice + lane * kVec; c0 < c_end;
       c0 += kStep * kUnroll) {
    Vec wv[kUnroll];
    Vec xv[kRows][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t c = c0 + u * kStep;
      const bool in = c < c_end;
      // A vector never straddles two heads: H is a multiple of kVec.
      const int32_t r = c / H;
      const T* x_c = p.x + r * p.x_stride_r + (c - r * H);
      wv[u] = load_vector<T, kBytes>(w + c, in);
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        xv[i][u] = load_vector<T, kBytes>(x_c + row_offset[i], in);
      }
    }
    // The products in the reverse order of the loads: the first multiply
    // waits for the last load, so the compiler keeps every load ahead of
    // the multiplies and they are all in flight together.
#pragma unroll
    for (int i = kRows - 1; i >= 0; --i) {
#pragma unroll
      for (int u = kUnroll - 1; u >= 0; --u) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          acc[i] = fma(to_acc(xv[i][u].v[e]), to_acc(wv[u].v[e]), acc[i]);
        }
      }
    }
  }

  acc_t sum = warp_sum<kRows>(acc, lane);
  const int row = warp_row<kRows>(lane);
  if (l.splits > 1) {
    if (lane < kRows) partial[warp][row] = sum;
    __syncthreads();
    if (split != 0 || lane >= kRows) return;
    sum = partial[warp][row];
    for (int s = 1; s < l.splits; ++s) sum += partial[warp + s][row];
  }
  const int64_t b = b0 + row;
  if (lane < kRows && b < p.B && k < p.K) {
    const acc_t bias =
        p.bias != nullptr ? to_acc(p.bias[k * p.bias_stride]) : acc_t(0);
    p.out[b * p.out_stride_b + k * p.out_stride_k] = from_acc<T>(sum + bias);
  }
}

}  // namespace fgl::cuda::warp_dot
