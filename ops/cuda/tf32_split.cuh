// float32 on the TF32 tensor cores at float32 accuracy ("3xTF32"), shared by
// the float32 tensor-core kernels: v = big + small, both rounded to TF32,
// small the remainder v - big; a * b is taken as a.small * b.big + a.big *
// b.small + a.big * b.big, the dropped small * small below float32's
// rounding. An Inf among the inputs makes the remainder Inf - Inf = NaN, so
// every output it reaches comes out NaN; the kernels sum NaN outputs again on
// the CUDA cores in contraction order (dot_in_order), where Inf and NaN
// propagate as in the reference.
#pragma once

#include <cstdint>

#include "gather_linear_params.h"
#include "numeric.cuh"
#include "ptx.cuh"

namespace fgl::cuda {

struct Tf32Split {
  uint32_t big, small;
};

/// The split of a float32 value (as its bits); sm_90 (cvt.rn.tf32).
__device__ __forceinline__ Tf32Split split_tf32(uint32_t bits) {
  const float v = __uint_as_float(bits);
  const uint32_t big = ptx::cvt_rn_tf32(v);
  return {big, ptx::cvt_rn_tf32(v - __uint_as_float(big))};
}

/// One m16n8k8 step of a x b at float32 accuracy: a's fragment and b's
/// (b0, b1) split here, the three products small x big, big x small and
/// big x big summed into d0, d1 and d2 in turn (one sum for all three, or
/// three that the tensor cores fill without waiting on each other).
__device__ __forceinline__ void mma_m16n8k8_3xtf32(float (&d0)[4],
                                                   float (&d1)[4],
                                                   float (&d2)[4],
                                                   const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  uint32_t big[4], small[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const Tf32Split s = split_tf32(a[i]);
    big[i] = s.big, small[i] = s.small;
  }
  const Tf32Split x0 = split_tf32(b0), x1 = split_tf32(b1);
  ptx::mma_m16n8k8_tf32(d0, small, x0.big, x1.big);
  ptx::mma_m16n8k8_tf32(d1, big, x0.small, x1.small);
  ptx::mma_m16n8k8_tf32(d2, big, x0.big, x1.big);
}

/// Splits the four float32 values of `v` (a 16-byte vector's bits) and
/// stores their big parts at shared-memory address `big`, the remainders at
/// `small`: the operand splits of the kernels that split in shared memory.
__device__ __forceinline__ void store_split_tf32(const uint4& v, uint32_t big,
                                                 uint32_t small) {
  const Tf32Split x = split_tf32(v.x), y = split_tf32(v.y), z = split_tf32(v.z),
                  w = split_tf32(v.w);
  ptx::st_shared_v4(big, make_uint4(x.big, y.big, z.big, w.big));
  ptx::st_shared_v4(small, make_uint4(x.small, y.small, z.small, w.small));
}

/// out[b][k] without the bias, summed over c = r * H + h in order.
template <typename T>
__device__ float dot_in_order(const GatherLinearParams<T>& p, int64_t b,
                              int64_t k) {
  float sum = 0.0f;
  for (int64_t r = 0; r < p.R; ++r) {
    const T* x = p.x + r * p.x_stride_r + b * p.x_stride_b;
    const T* w = p.weight + k * p.weight_stride_k + r * p.H * p.weight_stride_c;
    for (int64_t h = 0; h < p.H; ++h) {
      sum = fmaf(to_acc(x[h * p.x_stride_h]), to_acc(w[h * p.weight_stride_c]),
                 sum);
    }
  }
  return sum;
}

/// dot_in_order, not inlined: for an epilogue that takes it from each of many
/// outputs (the wgmma kernel's 64 a thread). The decode kernels, which take
/// it from a few, inline it: a call copies the params into a stack frame.
template <typename T>
__device__ __noinline__ float dot_in_order_call(const GatherLinearParams<T>& p,
                                                int64_t b, int64_t k) {
  return dot_in_order(p, b, k);
}

}  // namespace fgl::cuda
