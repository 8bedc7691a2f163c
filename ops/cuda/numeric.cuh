// Element types of the fgl CUDA kernels: the accumulator of each storage type
// and the conversions between them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fgl::cuda {

// Half types accumulate in float32, double in double.
template <typename T>
struct AccType {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_acc(typename AccType<T>::type v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// 16 bytes of T: the unit of one vectorised load or store.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];

  __device__ __forceinline__ static Vec16 zero() {
    Vec16 z;
    *reinterpret_cast<uint4*>(&z) = make_uint4(0, 0, 0, 0);
    return z;
  }
};

}  // namespace fgl::cuda
