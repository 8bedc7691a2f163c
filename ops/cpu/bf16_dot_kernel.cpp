#include "cpu/bf16_dot_kernel.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <array>

// Only this file's kernels use AVX-512; they run after a runtime check, so the
// library itself still loads on any x86-64 CPU.
#define FGL_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace fgl::cpu {
namespace {

constexpr int kTile = 4;            // output features and rows of B per tile
constexpr int kPairs = 16;          // bf16 pairs per 512-bit vector
constexpr int kChunk = 2 * kPairs;  // h values per vector

FGL_AVX512_BF16 inline __m512bh load(const c10::BFloat16* p) {
  return (__m512bh)_mm512_loadu_si512(p);  // same bits, bf16 lanes
}
FGL_AVX512_BF16 inline __m512bh load(const c10::BFloat16* p, __mmask32 m) {
  return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

// Not _mm512_reduce_add_ps: GCC 12's version of it warns (-Wuninitialized)
// wherever it is inlined.
FGL_AVX512_BF16 inline float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (const float lane : lanes) sum += lane;
  return sum;
}

// out[b0 .. b0+kB, k0 .. k0+kK]: kK x kB float32 vector accumulators, each
// the dot product of one weight row and one gathered x row, kept in 16
// lanes until the end. Whole 32-value chunks first, then the h tails of all
// slices in a loop of their own with masked loads (zeros add nothing):
// masked loads in the main loop, or any branch there, made GCC keep the
// accumulators in memory and the kernel 2x slower.
template <int kK, int kB>
FGL_AVX512_BF16 void tile(const Bf16Problem& p, int64_t k0, int64_t b0) {
  __m512 acc[kK][kB];
  for (int i = 0; i < kK; ++i) {
    for (int j = 0; j < kB; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  const c10::BFloat16* weight = p.weight + k0 * p.weight_stride_k;
  const c10::BFloat16* x = p.x + b0 * p.x_stride_b;
  const int64_t whole = p.H - p.H % kChunk;
  for (int64_t r = 0; r < p.R; ++r) {
    const c10::BFloat16* w_r = weight + r * p.H;
    const c10::BFloat16* x_r = x + r * p.x_stride_r;
    for (int64_t h = 0; h < whole; h += kChunk) {
      __m512bh wv[kK], xv[kB];
      for (int i = 0; i < kK; ++i)
        wv[i] = load(w_r + i * p.weight_stride_k + h);
      for (int j = 0; j < kB; ++j) xv[j] = load(x_r + j * p.x_stride_b + h);
      for (int i = 0; i < kK; ++i) {
        for (int j = 0; j < kB; ++j) {
          acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv[i], xv[j]);
        }
      }
    }
  }
  if (whole < p.H) {
    const auto m = static_cast<__mmask32>((uint64_t{1} << (p.H - whole)) - 1);
    for (int64_t r = 0; r < p.R; ++r) {
      const c10::BFloat16* w_r = weight + r * p.H + whole;
      const c10::BFloat16* x_r = x + r * p.x_stride_r + whole;
      __m512bh wv[kK], xv[kB];
      for (int i = 0; i < kK; ++i) wv[i] = load(w_r + i * p.weight_stride_k, m);
      for (int j = 0; j < kB; ++j) xv[j] = load(x_r + j * p.x_stride_b, m);
      for (int i = 0; i < kK; ++i) {
        for (int j = 0; j < kB; ++j) {
          acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv[i], xv[j]);
        }
      }
    }
  }
  for (int i = 0; i < kK; ++i) {
    const float bias =
        p.bias != nullptr ? static_cast<float>(p.bias[(k0 + i) * p.bias_stride])
                          : 0.0f;
    for (int j = 0; j < kB; ++j) {
      p.out[(b0 + j) * p.out_stride_b + (k0 + i) * p.out_stride_k] =
          c10::BFloat16(sum_lanes(acc[i][j]) + bias);
    }
  }
}

using TileFn = void (*)(const Bf16Problem&, int64_t, int64_t);

template <int kK>
constexpr std::array<TileFn, kTile> tiles_of() {
  return {&tile<kK, 1>, &tile<kK, 2>, &tile<kK, 3>, &tile<kK, 4>};
}
// kTiles[kK - 1][kB - 1]: the full tile and every tail shape.
constexpr std::array<std::array<TileFn, kTile>, kTile> kTiles = {
    tiles_of<1>(), tiles_of<2>(), tiles_of<3>(), tiles_of<4>()};

}  // namespace

bool has_avx512_bf16() {
  static const bool value = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return value;
}

void bf16_dot_gather_linear(const Bf16Problem& p) {
  static_assert(kTiles.size() == kTile);
  const int64_t k_tiles = (p.K + kTile - 1) / kTile;
  // Tasks of at least ~64K multiply-adds, so small problems run inline
  // rather than paying for a thread fork.
  const int64_t macs_per_k_tile = std::max<int64_t>(1, kTile * p.B * p.R * p.H);
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 16) / macs_per_k_tile);
  // A weight tile (4 rows of R*H) stays in L1 while every row tile of x
  // streams past it; threads own disjoint output features.
  at::parallel_for(0, k_tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t kt = begin; kt < end; ++kt) {
      const int64_t k0 = kt * kTile;
      const int kK = static_cast<int>(std::min<int64_t>(kTile, p.K - k0));
      for (int64_t b0 = 0; b0 < p.B; b0 += kTile) {
        const int kB = static_cast<int>(std::min<int64_t>(kTile, p.B - b0));
        kTiles[kK - 1][kB - 1](p, k0, b0);
      }
    }
  });
}

}  // namespace fgl::cpu
