// The CPU routing policy of fgl::gather_linear: which computation takes a
// problem on the CPU at hand. Plain C++ with no torch type, so it is
// unit-tested on every machine; its thresholds come from the measurements in
// bench/NOTES.md ("CPU routing"), one table per kind of CPU.
#pragma once

#include <cstdint>
#include <optional>

namespace fgl::cpu {

/// What the CPU offers the routes, read once at run time.
struct CpuFeatures {
  bool avx512_bf16 = false;  // AVX-512 F/BW/VL with BF16, and the dot kernel
                             // built: it runs
  bool avx512_fp16 = false;  // float16 arithmetic: oneDNN's GEMMs use it
  bool amx = false;          // tile matrix units: oneDNN's GEMMs use them
};

/// This machine's features (cached after the first call).
CpuFeatures detect_features();

enum class Dtype { kFloat16, kBFloat16, kFloat32, kFloat64 };

/// Everything the policy looks at.
struct Problem {
  CpuFeatures cpu;
  Dtype dtype = Dtype::kFloat32;
  int64_t R = 0, B = 0, H = 0, K = 0;
  // x contiguous along h and the weight along its columns: the dot kernel's
  // layout.
  bool dot_layout = false;
  // x's strides already hold the concatenation (gathered_view.h).
  bool x_gathered_view = false;
  // Threads the op's parallel loops use (at::get_num_threads()).
  int threads = 1;
};

enum class Route {
  kDotKernel,   // avx512_dot_kernel.h: x read in place, one pass
  kGemmView,    // one BLAS GEMM over x's gathered view
  kGemmCat,     // cat + one BLAS GEMM: the reference's own route
  kGemmSlices,  // one GEMM per slice of x, accumulated (float32 for halves)
};

/// Every route, in the order above.
inline constexpr Route kRoutes[] = {Route::kDotKernel, Route::kGemmView,
                                    Route::kGemmCat, Route::kGemmSlices};

const char* route_name(Route route);

/// Whether `route` can compute `p` at all (the dot kernel needs its CPU
/// features and layout, the view route a gathered view).
bool can_run(Route route, const Problem& p);

/// The route for `p`, by the measured tables.
Route choose_route(const Problem& p);

/// Tests and benchmarks force a route with this (nullopt: the policy's). A
/// forced route that cannot run falls back to the policy.
void force_route(std::optional<Route> route);
std::optional<Route> forced_route();

}  // namespace fgl::cpu
