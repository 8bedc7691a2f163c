// A bfloat16 CPU kernel of fgl::gather_linear for CPUs with AVX512-BF16:
// vdpbf16ps multiplies bf16 pairs and accumulates in float32, so x and the
// weight are read as they are (no float32 copy of the weight per call) and
// each output is rounded to bfloat16 once, as in the reference GEMM.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace fgl::cpu {

/// One bfloat16 problem; sizes and strides in elements. x and the weight
/// must be contiguous along h and c (x_stride_h == weight_stride_c == 1).
struct Bf16Problem {
  const c10::BFloat16* x;       // [R, B, H]
  const c10::BFloat16* weight;  // [K, R*H]
  const c10::BFloat16* bias;    // [K], or nullptr
  c10::BFloat16* out;           // [B, K]
  int64_t R, B, H, K;
  int64_t x_stride_r, x_stride_b;
  int64_t weight_stride_k;
  int64_t bias_stride;
  int64_t out_stride_b, out_stride_k;
};

/// Whether this CPU (and OS) runs bf16_dot_gather_linear.
bool has_avx512_bf16();

/// Computes p.out, parallel over blocks of output features. Requires
/// has_avx512_bf16(), B > 0, K > 0.
void bf16_dot_gather_linear(const Bf16Problem& p);

}  // namespace fgl::cpu
