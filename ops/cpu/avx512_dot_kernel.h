// An AVX-512 CPU kernel of fgl::gather_linear for every supported dtype:
// each output is a dot product of one weight row with one gathered row of
// x, read in place through x's strides and accumulated in vector lanes
// (vfmadd in float64 for float64, in float32 for float32 and for float16,
// widened exactly as it loads; vdpbf16ps, which multiplies bf16 pairs into
// float32, for bfloat16). One call does the whole problem: no per-slice GEMM
// passes over the output, no float32 copy of a half-precision weight, and
// each output rounded once, as in the reference GEMM.
//
// Torch-free: it depends on c10's header-only 16-bit float types (the
// storage of at::Half and at::BFloat16) and nothing else of torch; the
// caller parallelises over its tiles of output features.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

#include "gather_linear_params.h"

namespace fgl::cpu {

/// How the kernel's work divides: `count` tiles of output features, each
/// task taking at least `grain` of them (about 64K multiply-adds, so small
/// problems run inline rather than paying for a thread fork).
struct DotTiles {
  int64_t count = 0;
  int64_t grain = 1;
};
DotTiles avx512_dot_tiles(int64_t B, int64_t R, int64_t H, int64_t K);

/// Computes the output features of tiles [tile_begin, tile_end) of p.out
/// (see avx512_dot_tiles); tasks over disjoint ranges may run in parallel. T
/// is double, float, c10::Half or c10::BFloat16. Requires an AVX-512 CPU
/// with BF16 (cpu_route.h's detect_features().avx512_bf16), B > 0, K > 0,
/// and x and the weight contiguous along h and c (x_stride_h ==
/// weight_stride_c == 1); every other stride is free.
template <typename T>
void avx512_dot_gather_linear(const GatherLinearParams<T>& p,
                              int64_t tile_begin, int64_t tile_end);

}  // namespace fgl::cpu
