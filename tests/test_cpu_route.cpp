// The CPU routing policy (ops/cpu/cpu_route.h) is plain C++: its tables are
// checked here for every kind of CPU, on any machine.
#include <gtest/gtest.h>

#include <vector>

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

// The most rows of B the dot kernel takes for one R, H, K and dtype.
struct RowsCase {
  Dtype dtype;
  int64_t R, H, K, last_kernel_rows;
};
constexpr int64_t kNever = 1 << 20;  // the kernel at every size

// The kernel up to the case's rows, the library's GEMM over `cat` past them.
void expect_kernel_rows(CpuFeatures cpu, const RowsCase& c) {
  SCOPED_TRACE(::testing::Message() << static_cast<int>(c.dtype) << " R " << c.R
                                    << " H " << c.H << " K " << c.K);
  const int64_t B = c.last_kernel_rows;
  EXPECT_EQ(choose_route(problem(cpu, c.dtype, c.R, B, c.H, c.K)),
            Route::kDotKernel);
  EXPECT_EQ(choose_route(problem(cpu, c.dtype, c.R, B + 1, c.H, c.K)),
            B == kNever ? Route::kDotKernel : Route::kGemmCat);
}

TEST(CpuRoute, AvxBf16WithoutFp16TakesTheDotKernel) {
  for (const auto d : kAll) {
    EXPECT_EQ(choose_route(problem(amd_avx512(), d, 4, 12, 32, 56)),
              Route::kDotKernel);
    EXPECT_EQ(choose_route(problem(amd_avx512(), d, 32, 8, 128, 4096)),
              Route::kDotKernel);
  }
  // Not the dot kernel's layout: a GEMM.
  auto transposed = problem(amd_avx512(), Dtype::kFloat32, 4, 12, 32, 56);
  transposed.dot_layout = false;
  EXPECT_EQ(choose_route(transposed), Route::kGemmCat);
}

// Past a number of rows, and for short contractions of outputs, that falls
// as the contraction grows, or past 8 rows where the kernel's vectors are
// under 90% full (H not a multiple of their width), the library's GEMM
// (bench/NOTES.md, c9 and c10); float16 keeps the kernel, and never takes the
// float32 slices.
TEST(CpuRoute, AvxBf16WithoutFp16GivesManyRowsToTheLibrary) {
  for (const RowsCase& c : std::vector<RowsCase>{
           {Dtype::kBFloat16, 2, 32, 32, 256},  // rows
           {Dtype::kBFloat16, 2, 32, 56, 146},  // outputs
           {Dtype::kBFloat16, 2, 32, 1024, 8},
           {Dtype::kBFloat16, 1, 128, 4096, 2},
           {Dtype::kBFloat16, 4, 64, 256, 32},
           {Dtype::kBFloat16, 2, 128, 4096, 4},
           {Dtype::kBFloat16, 16, 64, 1024, 16},
           {Dtype::kBFloat16, 32, 128, 4096, 8},
           {Dtype::kBFloat16, 64, 128, 1024, 8},
           {Dtype::kBFloat16, 12, 40, 300, 8},  // 40 of 64 lanes used
           {Dtype::kFloat32, 7, 33, 1000, 8},   // 33 of 48
           {Dtype::kFloat64, 7, 33, 1000, 8},   // 33 of 40
           {Dtype::kFloat32, 2, 32, 1024, 8},
           {Dtype::kFloat32, 4, 32, 4096, 256},
           {Dtype::kFloat32, 8, 64, 512, 4096},
           {Dtype::kFloat32, 4, 64, 4096, 512},
           {Dtype::kFloat32, 16, 64, 1024, 1024},
           {Dtype::kFloat32, 32, 128, 4096, 256},
           {Dtype::kFloat64, 1, 64, 4096, 512},
           {Dtype::kFloat64, 16, 64, 1024, 1024},
           {Dtype::kFloat64, 64, 128, 1024, 128},
           {Dtype::kFloat16, 64, 128, 4096, kNever}}) {
    expect_kernel_rows(amd_avx512(), c);
  }
}

// Where the library has AVX-512 FP16 and AMX, the kernel keeps the few-row
// problems only: 4 rows in the half types (64 for short contractions with few
// outputs; 8 with 16 threads or more), 16 in float32 and float64, 8 where
// its vectors are under 90% full (bench/NOTES.md, c11).
TEST(CpuRoute, Fp16CpusKeepTheKernelForFewRows) {
  for (const auto d : kAll) {
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 4, 12, 32, 56)),
              Route::kDotKernel);
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 16, 1, 128, 4096)),
              Route::kDotKernel);
  }
  // float64 of one or two rows over 128 MiB of weight: the library's stream.
  for (const auto d : {Dtype::kFloat16, Dtype::kBFloat16, Dtype::kFloat32}) {
    EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), d, 32, 1, 128, 4096)),
              Route::kDotKernel);
  }
  EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), Dtype::kFloat64, 32, 1,
                                 128, 4096)),
            Route::kGemmView);
  EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), Dtype::kFloat64, 32, 2,
                                 128, 4096)),
            Route::kGemmCat);
  EXPECT_EQ(choose_route(problem(intel_avx512_fp16(), Dtype::kFloat64, 32, 4,
                                 128, 4096)),
            Route::kDotKernel);
  for (const RowsCase& c : std::vector<RowsCase>{
           {Dtype::kBFloat16, 1, 64, 56, 64},   // rows
           {Dtype::kBFloat16, 2, 32, 1024, 4},  // outputs
           {Dtype::kFloat16, 4, 32, 56, 64},
           {Dtype::kBFloat16, 32, 128, 4096, 4},
           {Dtype::kFloat16, 12, 40, 300, 4},
           {Dtype::kFloat32, 1, 64, 56, 64},
           {Dtype::kFloat32, 2, 32, 1024, 4},
           {Dtype::kFloat32, 32, 128, 4096, 16},
           {Dtype::kFloat32, 7, 33, 1000, 8},  // 33 of 48 lanes used
           {Dtype::kFloat64, 7, 33, 1000, 8},  // 33 of 40
           {Dtype::kFloat64, 1, 64, 56, 16},
           {Dtype::kFloat64, 32, 128, 4096, 16}}) {
    expect_kernel_rows(intel_avx512_fp16(), c);
  }
  // With 16 threads or more the half types keep it to 8 rows.
  for (const auto d : {Dtype::kFloat16, Dtype::kBFloat16}) {
    for (const int threads : {2, 15, 16, 64}) {
      auto p = problem(intel_avx512_fp16(), d, 32, 8, 128, 4096);
      p.threads = threads;
      EXPECT_EQ(choose_route(p),
                threads >= 16 ? Route::kDotKernel : Route::kGemmCat);
      p.B = 9;
      EXPECT_EQ(choose_route(p), Route::kGemmCat);
    }
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
