// An AVX-512 CPU kernel of fgl::gather_linear for every supported dtype:
// each output is a dot product of one weight row with one gathered row of
// x, read in place through x's strides and accumulated in vector lanes
// (vfmadd in float64 for float64, in float32 for float32 and for float16,
// widened exactly as it loads; vdpbf16ps, which multiplies bf16 pairs into
// float32, for bfloat16). One call does the whole problem: no per-slice GEMM
// passes over the output, no float32 copy of a half-precision weight, and
// each output rounded once, as in the reference GEMM.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

#include "gather_linear_params.h"

namespace fgl::cpu {

/// Computes p.out, parallel over blocks of output features. T is double,
/// float, c10::Half or c10::BFloat16. Requires an AVX-512 CPU with BF16
/// (cpu_route.h's detect_features().avx512_bf16), B > 0, K > 0, and x and the
/// weight contiguous along h and c (x_stride_h == weight_stride_c == 1); every
/// other stride is free.
template <typename T>
void avx512_dot_gather_linear(const GatherLinearParams<T>& p);

}  // namespace fgl::cpu
