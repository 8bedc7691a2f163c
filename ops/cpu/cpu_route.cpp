#include "cpu_route.h"

#include <cstddef>
#include <cstdint>

#include "forced_route.h"

namespace fgl::cpu {
namespace {

// On CPUs with AVX-512 BF16 but not FP16 (AMD EPYC, Zen 4; bench/NOTES.md
// "c9"), the library's blocked GEMMs (bfloat16 on vdpbf16ps, float32 and
// float64 on AVX-512) overtake the dot kernel once there are enough rows to
// block over: the kernel streams the rows of x past each weight tile of 4
// features again, and pays a horizontal sum per output, which short
// contractions do not amortise. Each table gives, for contractions (R*H)
// up to a length, the most rows (B) and outputs (B*K) the kernel takes;
// float16, which that library widens to float32 first, keeps the kernel at
// every size (4-7x).
struct KernelLimit {
  int64_t contraction;
  int64_t rows;
  int64_t outputs;
};
constexpr int64_t kAny = INT64_MAX;
// bfloat16's outputs are those where the kernel also won on one thread
// ("c10"): past them the library's small GEMMs, which barely use a second
// core, beat it whenever two virtual cores share one physical core.
constexpr KernelLimit kBFloat16Limits[] = {
    {128, 256, 8 << 10}, {1024, 32, 16 << 10}, {kAny, 8, kAny}};
constexpr KernelLimit kFloat32Limits[] = {{64, kAny, 8 << 10},
                                          {128, 256, kAny},
                                          {512, kAny, 2 << 20},
                                          {1024, 1024, kAny},
                                          {kAny, 256, kAny}};
constexpr KernelLimit kFloat64Limits[] = {
    {256, kAny, 2 << 20}, {1024, 1024, kAny}, {kAny, 128, kAny}};
// On CPUs with AVX-512 FP16 (Intel Xeon, whose oneDNN GEMMs use it and AMX;
// bench/NOTES.md "c11") the library's GEMMs overtake the kernel at far fewer
// rows: past 4 in the half types and 16 in float32 and float64 (64 for the
// shortest contractions with few outputs). Below them the kernel, which
// reads each weight once, keeps winning even at 16M multiply-adds. With 16
// threads or more the kernel's share grew faster than the library's: the
// half types keep it to 8 rows.
constexpr KernelLimit kHalfLimitsBesideAmx[] = {{128, 64, 4 << 10},
                                                {kAny, 4, kAny}};
constexpr KernelLimit kHalfLimitsBesideAmxManyThreads[] = {{128, 64, 4 << 10},
                                                           {kAny, 8, kAny}};
constexpr int kManyThreads = 16;
constexpr KernelLimit kFloat32LimitsBesideAmx[] = {{64, 64, 4 << 10},
                                                   {kAny, 16, kAny}};
constexpr KernelLimit kFloat64LimitsBesideAmx[] = {{kAny, 16, kAny}};
// float64 of one or two rows over a weight this large is a memory stream for
// the kernel and the library alike, and the library's read it a little
// faster ("c12": 32,1-2,128,4096, 128 MiB, 0.96-0.995x; 64 MiB still
// 1.02x for the kernel, and from 4 rows the kernel 1.9x).
constexpr int64_t kFloat64StreamRowsBesideAmx = 2;
constexpr int64_t kFloat64StreamWeightBesideAmx = int64_t{128} << 20;
// The kernel loads whole vectors of each slice's h, the tail masked: with
// H = 33, two bfloat16 vectors (64 lanes) or three float32 ones (48) carry
// 33 values (7,33,33,1000 0.47x in bfloat16 at 33 rows, 0.83x in float32 at
// 64). Below this share of the lanes used it keeps few rows.
constexpr double kMinLaneUse = 0.9;
constexpr int64_t kRowsAtLowLaneUse = 8;
// Without the dot kernel, half types go through float32 GEMMs a slice at a
// time where that beat the library's half-precision GEMM (AMD EPYC without
// AVX-512): from 128 rows of B, or from 16 rows with 512 or more columns.
constexpr int64_t kSlicesMinRows = 128;
constexpr int64_t kSlicesMinRowsWideK = 16;
constexpr int64_t kSlicesWideK = 512;

detail::ForcedRoute<Route> g_forced_route;

bool is_half(Dtype d) { return d == Dtype::kFloat16 || d == Dtype::kBFloat16; }

int64_t element_size(Dtype d) {
  return d == Dtype::kFloat64 ? 8 : d == Dtype::kFloat32 ? 4 : 2;
}

template <size_t N>
bool within(const KernelLimit (&table)[N], const Problem& p) {
  const int64_t C = p.R * p.H;
  for (const KernelLimit& limit : table) {
    if (C <= limit.contraction) {
      return p.B <= limit.rows && (p.K <= 0 || p.B <= limit.outputs / p.K);
    }
  }
  return false;
}

// The measured tables' verdict for the dot kernel against the library's
// GEMM, by the library's kind of CPU.
bool dot_kernel_wins(const Problem& p) {
  const bool fp16_cpu = p.cpu.avx512_fp16;
  if (p.dtype == Dtype::kFloat16 && !fp16_cpu) return true;
  const int64_t lanes = 64 / element_size(p.dtype);
  const int64_t loaded = (p.H + lanes - 1) / lanes * lanes;
  if (p.H < kMinLaneUse * static_cast<double>(loaded) &&
      p.B > kRowsAtLowLaneUse) {
    return false;
  }
  if (fp16_cpu) {
    if (is_half(p.dtype)) {
      return p.threads >= kManyThreads
                 ? within(kHalfLimitsBesideAmxManyThreads, p)
                 : within(kHalfLimitsBesideAmx, p);
    }
    if (p.dtype == Dtype::kFloat32) return within(kFloat32LimitsBesideAmx, p);
    const int64_t weight_bytes = p.R * p.H * p.K * element_size(p.dtype);
    return within(kFloat64LimitsBesideAmx, p) &&
           !(p.B <= kFloat64StreamRowsBesideAmx &&
             weight_bytes >= kFloat64StreamWeightBesideAmx);
  }
  return p.dtype == Dtype::kBFloat16  ? within(kBFloat16Limits, p)
         : p.dtype == Dtype::kFloat32 ? within(kFloat32Limits, p)
                                      : within(kFloat64Limits, p);
}

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
  if (can_run(Route::kDotKernel, p) && dot_kernel_wins(p)) {
    return Route::kDotKernel;
  }
  // Library half GEMMs without bfloat16 or float16 arithmetic or AMX are
  // slow (with AVX-512 BF16, float16 never gets here).
  const bool slow_half_gemm =
      !p.cpu.avx512_bf16 && !p.cpu.avx512_fp16 && !p.cpu.amx;
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
