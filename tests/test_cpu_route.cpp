// The CPU routing policy (ops/cpu/cpu_route.h) is plain C++: its tables are
// checked here for every kind of CPU, on any machine.
#include <gtest/gtest.h>

#include "cpu/cpu_route.h"

namespace fgl::cpu {
namespace {

// The CPU kinds the tables were measured on.
CpuFeatures amd_avx2() { return {}; }
CpuFeatures amd_avx512() { return {true, false, false}; }
CpuFeatures intel_avx512_fp16() { return {true, true, true}; }

Problem problem(CpuFeatures cpu, Dtype dtype, int64_t R, int64_t B, int64_t H,
                int64_t K) {
  Problem p;
  p.cpu = cpu;
  p.dtype = dtype;
  p.R = R;
  p.B = B;
  p.H = H;
  p.K = K;
  p.dot_layout = true;
  p.x_gathered_view = B == 1;  // a contiguous x [R, 1, H] is the concatenation
  return p;
}

constexpr Dtype kAll[] = {Dtype::kFloat16, Dtype::kBFloat16, Dtype::kFloat32,
                          Dtype::kFloat64};

TEST(CpuRoute, AvxBf16WithoutFp16TakesTheDotKernel) {
  for (const auto d : kAll) {
    EXPECT_EQ(choose_route(problem(amd_avx512(), d, 4, 12, 32, 56)),
              Route::kDotKernel);
    EXPECT_EQ(choose_route(problem(amd_avx512(), d, 32, 128, 128, 4096)),
              Route::kDotKernel);
  }
  // Not the dot kernel's layout: a GEMM.
  auto transposed = problem(amd_avx512(), Dtype::kFloat32, 4, 12, 32, 56);
  transposed.dot_layout = false;
  EXPECT_EQ(choose_route(transposed), Route::kGemmCat);
}

TEST(CpuRoute, Fp16CpusKeepTheKernelForSmallProblemsOnly) {
  for (const auto d : kAll) {
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 4, 12, 32, 56)),
              Route::kDotKernel);
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 7, 33, 33, 1000)),
              Route::kGemmCat);
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 32, 1, 128, 4096)),
              Route::kGemmView);
  }
}

TEST(CpuRoute, WithoutTheKernelHalfTypesTakeFloat32SlicesWhereTheyWon) {
  for (const auto d : {Dtype::kFloat16, Dtype::kBFloat16}) {
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 4, 128, 16, 56)),
              Route::kGemmSlices);
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 32, 16, 128, 4096)),
              Route::kGemmSlices);
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 32, 16, 128, 56)),
              Route::kGemmCat);
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 4, 12, 32, 56)),
              Route::kGemmCat);
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 32, 1, 128, 4096)),
              Route::kGemmView);
  }
  // float32 and float64: the library's GEMM, without `cat` where x allows.
  for (const auto d : {Dtype::kFloat32, Dtype::kFloat64}) {
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 4, 128, 16, 56)),
              Route::kGemmCat);
    EXPECT_EQ(choose_route(problem(amd_avx2(), d, 32, 1, 128, 4096)),
              Route::kGemmView);
  }
}

TEST(CpuRoute, ForcedRoutesWinWhereTheyCanRun) {
  const Problem p = problem(amd_avx2(), Dtype::kFloat32, 4, 12, 32, 56);
  EXPECT_TRUE(can_run(Route::kGemmSlices, p));
  EXPECT_FALSE(can_run(Route::kDotKernel, p));  // no AVX-512 BF16
  EXPECT_FALSE(can_run(Route::kGemmView, p));   // no gathered view
  force_route(Route::kGemmSlices);
  EXPECT_EQ(choose_route(p), Route::kGemmSlices);
  force_route(Route::kDotKernel);  // cannot run here: the policy's route
  EXPECT_EQ(choose_route(p), Route::kGemmCat);
  force_route(Route::kGemmView);
  EXPECT_EQ(choose_route(p), Route::kGemmCat);
  force_route(std::nullopt);
  EXPECT_EQ(choose_route(p), Route::kGemmCat);
}

TEST(CpuRoute, EveryRouteHasAName) {
  for (const auto r : kRoutes) EXPECT_STRNE(route_name(r), "?");
}

}  // namespace
}  // namespace fgl::cpu
