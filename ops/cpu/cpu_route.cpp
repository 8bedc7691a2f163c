#include "cpu_route.h"

#include "forced_route.h"

namespace fgl::cpu {
namespace {

// On CPUs with AVX-512 FP16 (Intel's, whose oneDNN GEMMs use it and AMX),
// the dot kernel beat the library only on small problems: the 4,12,32,56
// problem (86K multiply-adds) 3x, 7,33,33,1000 (7.6M) already 0.53x in
// bfloat16 (bench/NOTES.md, "CPU routing").
constexpr int64_t kDotMaxMacsBesideFp16Gemm = int64_t{1} << 20;
// Without the dot kernel, half types go through float32 GEMMs a slice at a
// time where that beat the library's half-precision GEMM (AMD EPYC without
// AVX-512): from 128 rows of B, or from 16 rows with 512 or more columns.
constexpr int64_t kSlicesMinRows = 128;
constexpr int64_t kSlicesMinRowsWideK = 16;
constexpr int64_t kSlicesWideK = 512;

detail::ForcedRoute<Route> g_forced_route;

bool is_half(Dtype d) { return d == Dtype::kFloat16 || d == Dtype::kBFloat16; }

}  // namespace

CpuFeatures detect_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
#ifdef FGL_WITH_AVX512_DOT  // the dot kernel is built (x86-64 only)
    f.avx512_bf16 = __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bf16");
#endif
    f.avx512_fp16 = __builtin_cpu_supports("avx512fp16");
    f.amx = __builtin_cpu_supports("amx-tile");
#endif
    return f;
  }();
  return features;
}

const char* route_name(Route route) {
  switch (route) {
    case Route::kDotKernel:
      return "dot";
    case Route::kGemmView:
      return "gemm-view";
    case Route::kGemmCat:
      return "gemm-cat";
    case Route::kGemmSlices:
      return "gemm-slices";
  }
  return "?";
}

bool can_run(Route route, const Problem& p) {
  switch (route) {
    case Route::kDotKernel:
      return p.cpu.avx512_bf16 && p.dot_layout;
    case Route::kGemmView:
      return p.x_gathered_view;
    case Route::kGemmCat:
    case Route::kGemmSlices:
      return true;
  }
  return false;
}

Route choose_route(const Problem& p) {
  if (const auto forced = forced_route(); forced && can_run(*forced, p)) {
    return *forced;
  }
  const int64_t macs = p.B * p.K * p.R * p.H;
  if (can_run(Route::kDotKernel, p) &&
      (!p.cpu.avx512_fp16 || macs <= kDotMaxMacsBesideFp16Gemm)) {
    return Route::kDotKernel;
  }
  // Library half GEMMs without float16 arithmetic or AMX are slow.
  const bool slow_half_gemm = !p.cpu.avx512_fp16 && !p.cpu.amx;
  if (is_half(p.dtype) && slow_half_gemm &&
      (p.B >= kSlicesMinRows ||
       (p.B >= kSlicesMinRowsWideK && p.K >= kSlicesWideK))) {
    return Route::kGemmSlices;
  }
  return p.x_gathered_view ? Route::kGemmView : Route::kGemmCat;
}

void force_route(std::optional<Route> route) { g_forced_route.set(route); }

std::optional<Route> forced_route() { return g_forced_route.get(); }

}  // namespace fgl::cpu
