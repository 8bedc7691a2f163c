#include "cpu/avx512_dot_kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <type_traits>

// Only this file's kernels use AVX-512; they run after a runtime check, so the
// library itself still loads on any x86-64 CPU.
#define FGL_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace fgl::cpu {
namespace {

// The AVX-512 operations on one element type: Vec, a vector of kValues
// inputs, and madd, which adds the products of two of them to Acc, a vector
// of accumulators (float32 lanes; float64 lanes for float64).
template <typename T>
struct Lanes;

// Float32 accumulators, shared by float32, float16 and bfloat16.
struct Float32Acc {
  using Acc = __m512;
  using Scalar = float;
  FGL_AVX512 static Acc zero() { return _mm512_setzero_ps(); }
  // A tree of vector adds: the sums of a tile are independent, so they
  // overlap, where a scalar loop over the lanes cost more than the dot
  // products themselves whenever R*H is under ~2K. Vector-extension
  // shuffles rather than _mm512_reduce_add_ps and friends, whose GCC 12
  // versions warn (-Wuninitialized) wherever they are inlined.
  FGL_AVX512 static float sum(Acc v) {
    v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3,
                                 4, 5, 6, 7);
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15,
                                 8, 9, 10, 11);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14,
                                 15, 12, 13);
    v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13,
                                 12, 15, 14);
    return v[0];
  }
};

template <>
struct Lanes<double> {
  using Acc = __m512d;
  using Scalar = double;
  using Vec = __m512d;
  using Mask = __mmask8;
  static constexpr int kValues = 8;
  FGL_AVX512 static Acc zero() { return _mm512_setzero_pd(); }
  FGL_AVX512 static double sum(Acc v) {
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
    return v[0];
  }
  FGL_AVX512 static Vec load(const double* p) { return _mm512_loadu_pd(p); }
  FGL_AVX512 static Vec load(const double* p, Mask m) {
    return _mm512_maskz_loadu_pd(m, p);
  }
  FGL_AVX512 static Acc madd(Acc acc, Vec a, Vec b) {
    return _mm512_fmadd_pd(a, b, acc);
  }
};

template <>
struct Lanes<float> : Float32Acc {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kValues = 16;
  FGL_AVX512 static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  FGL_AVX512 static Vec load(const float* p, Mask m) {
    return _mm512_maskz_loadu_ps(m, p);
  }
  FGL_AVX512 static __m512 madd(__m512 acc, Vec a, Vec b) {
    return _mm512_fmadd_ps(a, b, acc);
  }
};

// float16 is float32 once widened as it loads (exactly): float32's vectors,
// masks and madd, with loads of its own.
template <>
struct Lanes<c10::Half> : Lanes<float> {
  // The zero-masking form: GCC 12's _mm512_cvtph_ps warns
  // (-Wmaybe-uninitialized) wherever it is inlined.
  FGL_AVX512 static Vec widen(__m256i halves) {
    return _mm512_maskz_cvtph_ps(~__mmask16{0}, halves);
  }
  FGL_AVX512 static Vec load(const c10::Half* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  FGL_AVX512 static Vec load(const c10::Half* p, Mask m) {
    return widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

template <>
struct Lanes<c10::BFloat16> : Float32Acc {
  using Vec = __m512bh;  // 16 pairs
  using Mask = __mmask32;
  static constexpr int kValues = 32;
  FGL_AVX512 static Vec load(const c10::BFloat16* p) {
    return (__m512bh)_mm512_loadu_si512(p);  // same bits, bf16 lanes
  }
  FGL_AVX512 static Vec load(const c10::BFloat16* p, Mask m) {
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
  }
  FGL_AVX512 static __m512 madd(__m512 acc, Vec a, Vec b) {
    return _mm512_dpbf16_ps(acc, a, b);
  }
};

constexpr int kTile = 4;  // output features and rows of B per tile

// Keeps a loaded vector in a register: in tiles of fewer than 4 rows of x
// GCC folds the weight's loads into the multiply-adds as memory operands,
// loading each weight vector once per row, and the loads then set the pace
// (bench/NOTES.md, c13).
template <typename V>
FGL_AVX512 inline void in_register(V& v) {
  asm("" : "+v"(v));
}
// Where that folding costs: float32 and float64 (bfloat16's folded loads ran
// faster; float16 widens every load in a register anyway).
template <typename T>
constexpr bool kFoldsWeightLoads =
    std::is_same_v<T, float> || std::is_same_v<T, double>;

// out[b0 .. b0+kB, k0 .. k0+kK]: kK x kB vector accumulators, each
// the dot product of one weight row and one gathered x row, kept in 16
// lanes until the end. Whole vectors first, then the h tails of all slices
// in a loop of their own with masked loads (zeros add nothing): masked loads
// in the main loop, or any branch there, made GCC keep the accumulators in
// memory (bench/NOTES.md, c3).
template <typename T, int kK, int kB>
FGL_AVX512 void tile(const GatherLinearParams<T>& p, int64_t k0, int64_t b0) {
  using L = Lanes<T>;
  typename L::Acc acc[kK][kB];
  for (int i = 0; i < kK; ++i) {
    for (int j = 0; j < kB; ++j) acc[i][j] = L::zero();
  }
  const T* weight = p.weight + k0 * p.weight_stride_k;
  const T* x = p.x + b0 * p.x_stride_b;
  const int64_t whole = p.H - p.H % L::kValues;
  for (int64_t r = 0; r < p.R; ++r) {
    const T* w_r = weight + r * p.H;
    const T* x_r = x + r * p.x_stride_r;
    for (int64_t h = 0; h < whole; h += L::kValues) {
      typename L::Vec wv[kK], xv[kB];
      for (int i = 0; i < kK; ++i) {
        wv[i] = L::load(w_r + i * p.weight_stride_k + h);
        if constexpr (kB < kTile && kFoldsWeightLoads<T>) in_register(wv[i]);
      }
      for (int j = 0; j < kB; ++j) xv[j] = L::load(x_r + j * p.x_stride_b + h);
      for (int i = 0; i < kK; ++i) {
        for (int j = 0; j < kB; ++j)
          acc[i][j] = L::madd(acc[i][j], wv[i], xv[j]);
      }
    }
  }
  if (whole < p.H) {
    const auto m =
        static_cast<typename L::Mask>((uint64_t{1} << (p.H - whole)) - 1);
    for (int64_t r = 0; r < p.R; ++r) {
      const T* w_r = weight + r * p.H + whole;
      const T* x_r = x + r * p.x_stride_r + whole;
      typename L::Vec wv[kK], xv[kB];
      for (int i = 0; i < kK; ++i)
        wv[i] = L::load(w_r + i * p.weight_stride_k, m);
      for (int j = 0; j < kB; ++j) xv[j] = L::load(x_r + j * p.x_stride_b, m);
      for (int i = 0; i < kK; ++i) {
        for (int j = 0; j < kB; ++j)
          acc[i][j] = L::madd(acc[i][j], wv[i], xv[j]);
      }
    }
  }
  for (int i = 0; i < kK; ++i) {
    using Scalar = typename L::Scalar;
    const Scalar bias =
        p.bias != nullptr
            ? static_cast<Scalar>(p.bias[(k0 + i) * p.bias_stride])
            : Scalar{0};
    for (int j = 0; j < kB; ++j) {
      p.out[(b0 + j) * p.out_stride_b + (k0 + i) * p.out_stride_k] =
          static_cast<T>(L::sum(acc[i][j]) + bias);
    }
  }
}

template <typename T>
using TileFn = void (*)(const GatherLinearParams<T>&, int64_t, int64_t);

template <typename T, int kK>
constexpr std::array<TileFn<T>, kTile> tiles_of() {
  return {&tile<T, kK, 1>, &tile<T, kK, 2>, &tile<T, kK, 3>, &tile<T, kK, 4>};
}
// kTiles<T>[kK - 1][kB - 1]: the full tile and every tail shape.
template <typename T>
constexpr std::array<std::array<TileFn<T>, kTile>, kTile> kTiles = {
    tiles_of<T, 1>(), tiles_of<T, 2>(), tiles_of<T, 3>(), tiles_of<T, 4>()};

}  // namespace

DotTiles avx512_dot_tiles(int64_t B, int64_t R, int64_t H, int64_t K) {
  const int64_t macs_per_tile = std::max<int64_t>(1, kTile * B * R * H);
  return {(K + kTile - 1) / kTile,
          std::max<int64_t>(1, (int64_t{1} << 16) / macs_per_tile)};
}

// A weight tile (4 rows of R*H) stays in L1 while every row tile of x
// streams past it.
template <typename T>
void avx512_dot_gather_linear(const GatherLinearParams<T>& p,
                              int64_t tile_begin, int64_t tile_end) {
  for (int64_t kt = tile_begin; kt < tile_end; ++kt) {
    const int64_t k0 = kt * kTile;
    const int kK = static_cast<int>(std::min<int64_t>(kTile, p.K - k0));
    for (int64_t b0 = 0; b0 < p.B; b0 += kTile) {
      const int kB = static_cast<int>(std::min<int64_t>(kTile, p.B - b0));
      kTiles<T>[kK - 1][kB - 1](p, k0, b0);
    }
  }
}

template void avx512_dot_gather_linear<double>(
    const GatherLinearParams<double>&, int64_t, int64_t);
template void avx512_dot_gather_linear<float>(const GatherLinearParams<float>&,
                                              int64_t, int64_t);
template void avx512_dot_gather_linear<c10::Half>(
    const GatherLinearParams<c10::Half>&, int64_t, int64_t);
template void avx512_dot_gather_linear<c10::BFloat16>(
    const GatherLinearParams<c10::BFloat16>&, int64_t, int64_t);

}  // namespace fgl::cpu
