// The CUDA routing policy (ops/cuda/kernel_choice.h): plain C++, so it is
// checked on every machine, GPU or not. The shapes are bench/NOTES.md's.
#include <gtest/gtest.h>

#include "kernel_choice.h"

namespace fgl::cuda {
namespace {

RouteQuery query(int64_t R, int64_t B, int64_t H, int64_t K,
                 int element_bytes) {
  return {R,
          B,
          H,
          K,
          element_bytes,
          /*streamable=*/true,
          /*fused_only=*/false,
          kMeasuredComputeCapability};
}

TEST(KernelChoice, Float32StreamsLargeWeightsForFewRows) {
  // Measured faster than cat + cuBLAS: 1.69x at B = 16, 1.16x at B = 1.
  EXPECT_EQ(choose_route(query(32, 16, 128, 4096, 4)), Route::kStreaming);
  EXPECT_EQ(choose_route(query(32, 1, 128, 4096, 4)), Route::kStreaming);
  // The threshold itself: 16 MiB of float32 weight.
  EXPECT_EQ(choose_route(query(1, 1, 1024, 4096, 4)), Route::kStreaming);
  EXPECT_EQ(choose_route(query(1, 1, 1024, 4095, 4)), Route::kGatheredCublas);
}

TEST(KernelChoice, EverythingMeasuredSlowerTakesCatAndCublas) {
  // Tiny weight (0.57x fused), half precision (0.54x, 0.92x), many rows.
  EXPECT_EQ(choose_route(query(4, 12, 32, 56, 4)), Route::kGatheredCublas);
  EXPECT_EQ(choose_route(query(32, 16, 128, 4096, 2)), Route::kGatheredCublas);
  EXPECT_EQ(choose_route(query(32, 1, 128, 4096, 2)), Route::kGatheredCublas);
  EXPECT_EQ(choose_route(query(32, 17, 128, 4096, 4)), Route::kGatheredCublas);
  EXPECT_EQ(choose_route(query(32, 4096, 128, 4096, 4)),
            Route::kGatheredCublas);
  // float64 was never measured on the fused kernels.
  EXPECT_EQ(choose_route(query(32, 16, 128, 4096, 8)), Route::kGatheredCublas);
  // A layout the streaming kernels cannot read.
  RouteQuery strided = query(32, 16, 128, 4096, 4);
  strided.streamable = false;
  EXPECT_EQ(choose_route(strided), Route::kGatheredCublas);
}

TEST(KernelChoice, OtherArchitecturesTakeCublasUntilMeasured) {
  for (const int cc : {75, 80, 86, 89, 100, 120}) {
    RouteQuery q = query(32, 16, 128, 4096, 4);
    q.compute_capability = cc;
    EXPECT_EQ(choose_route(q), Route::kGatheredCublas) << cc;
    q.fused_only = true;
    EXPECT_EQ(choose_route(q), Route::kStreaming) << cc;
  }
}

TEST(KernelChoice, FusedOnlyNeverLeavesTheFusedKernels) {
  for (const int bytes : {2, 4, 8}) {
    RouteQuery q = query(4, 12, 32, 56, bytes);
    q.fused_only = true;
    EXPECT_EQ(choose_route(q), Route::kStreaming) << bytes;
    q.B = kMaxStreamingRows + 1;
    EXPECT_EQ(choose_route(q), Route::kTiled) << bytes;
    q.B = 1;
    q.streamable = false;
    EXPECT_EQ(choose_route(q), Route::kTiled) << bytes;
  }
}

}  // namespace
}  // namespace fgl::cuda
