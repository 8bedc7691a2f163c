// The CUDA routing policy (ops/cuda/kernel_choice.h) is plain C++: its table
// and the streaming kernel's plans are checked here on every machine.
#include <gtest/gtest.h>

#include "cuda/kernel_choice.h"
#include "cuda/stream_layout.h"

namespace fgl::cuda {
namespace {

// An H200 as the torch-facing side describes it, with a problem that every
// fused kernel can read.
Problem h200(int64_t R, int64_t B, int64_t H, int64_t K, int element_size) {
  Problem p;
  p.arch = 90;
  p.sm_count = 132;
  p.max_smem_per_block = 232448;
  p.element_size = element_size;
  p.R = R;
  p.B = B;
  p.H = H;
  p.K = K;
  p.weight_tma_ok = true;
  p.x_vectors = true;
  p.x_gathered_view = B == 1;
  return p;
}

TEST(KernelChoice, DecodeAndSmallBatchesStream) {
  for (int e : {2, 4}) {
    for (int64_t B : {1, 2, 7, 16}) {
      SCOPED_TRACE(::testing::Message() << "element size " << e << " B " << B);
      EXPECT_EQ(choose_route(h200(32, B, 128, 4096, e)), Route::kStream);
      EXPECT_EQ(choose_route(h200(8, B, 64, 1024, e)), Route::kStream);
    }
  }
  // float32 keeps streaming to 64 rows, half precision to 16.
  EXPECT_EQ(choose_route(h200(32, 64, 128, 4096, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(8, 64, 64, 1024, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 32, 128, 4096, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(32, 65, 128, 4096, 4)), Route::kCublasCat);
  // The seed problem: streaming wins in half precision; in float32 the tiny
  // weight leaves cat + cuBLAS ahead.
  EXPECT_EQ(choose_route(h200(4, 12, 32, 56, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(4, 12, 32, 56, 4)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(4, 1, 32, 56, 4)), Route::kCublasView);
  // float64 was never measured against cuBLAS: the reference's route.
  EXPECT_EQ(choose_route(h200(32, 1, 128, 4096, 8)), Route::kCublasView);
  EXPECT_TRUE(plan_stream(h200(32, 1, 128, 4096, 8)).has_value());
}

TEST(KernelChoice, TheStreamingRouteComesWithItsPlan) {
  const Problem decode = h200(32, 1, 128, 4096, 2);
  const RouteChoice streamed = choose(decode);
  EXPECT_EQ(streamed.route, Route::kStream);
  ASSERT_TRUE(streamed.stream.has_value());
  EXPECT_EQ(streamed.stream->splits, plan_stream(decode)->splits);
  const RouteChoice large = choose(h200(32, 4096, 128, 4096, 2));
  EXPECT_EQ(large.route, Route::kCublasCat);
  EXPECT_FALSE(large.stream.has_value());
}

TEST(KernelChoice, LargeProblemsTakeCublas) {
  EXPECT_EQ(choose_route(h200(32, 4096, 128, 4096, 2)), Route::kCublasCat);
  auto view = h200(32, 4096, 128, 4096, 2);
  view.x_gathered_view = true;
  EXPECT_EQ(choose_route(view), Route::kCublasView);
}

TEST(KernelChoice, OtherArchitecturesAndLayoutsTakeCublas) {
  auto ampere = h200(32, 16, 128, 4096, 2);
  ampere.arch = 80;
  EXPECT_FALSE(plan_stream(ampere).has_value());
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  auto transposed = h200(32, 16, 128, 4096, 4);
  transposed.weight_tma_ok = false;
  EXPECT_FALSE(plan_stream(transposed).has_value());
  EXPECT_EQ(choose_route(transposed), Route::kCublasCat);
}

TEST(KernelChoice, PlansFitTheDeviceAndCoverTheProblem) {
  const int64_t shapes[][4] = {{4, 12, 32, 56},    {32, 16, 128, 4096},
                               {32, 1, 128, 4096}, {8, 16, 64, 1024},
                               {1, 3, 8, 8},       {128, 16, 128, 32768},
                               {7, 250, 33, 9},    {64, 2, 256, 16384}};
  for (const auto& s : shapes) {
    for (int e : {2, 4, 8}) {
      const Problem p = h200(s[0], s[1], s[2], s[3], e);
      SCOPED_TRACE(::testing::Message()
                   << s[0] << "," << s[1] << "," << s[2] << "," << s[3]
                   << " element size " << e);
      const auto plan = plan_stream(p);
      ASSERT_TRUE(plan.has_value());
      EXPECT_LE(plan->smem_bytes, p.max_smem_per_block);
      EXPECT_GE(plan->splits, 1);
      EXPECT_LE(plan->splits, stream::kMaxClusterSplits);
      EXPECT_GE(plan->ring_stages, 1);
      EXPECT_LE(plan->ring_stages, plan->stages_per_split);
      // A ring that cycles serves each consumer group from its own slots.
      if (plan->ring_stages < plan->stages_per_split) {
        EXPECT_EQ(plan->ring_stages %
                      stream::consumer_groups(e, plan->rows_per_block),
                  0);
      }
      const int64_t stage_c = stream::kStageBytes / e;
      // Every stage of the contraction belongs to one split, none is empty.
      EXPECT_GE(plan->splits * plan->stages_per_split * stage_c, s[0] * s[2]);
      EXPECT_LT((plan->splits - 1) * plan->stages_per_split * stage_c,
                s[0] * s[2]);
      EXPECT_GE(plan->column_tiles * stream::kCols, s[3]);
      EXPECT_GE(plan->row_tiles * plan->rows_per_block, s[1]);
      EXPECT_GE(plan->slab_pitch, plan->stages_per_split * stage_c);
    }
  }
}

TEST(KernelChoice, SplitsTheContractionWhenColumnsAreFew) {
  // 64 column tiles fill half the H200: the contraction is split to fill it.
  const auto plan = plan_stream(h200(32, 16, 128, 4096, 2));
  ASSERT_TRUE(plan.has_value());
  EXPECT_GT(plan->splits, 1);
  // Enough column tiles: no split, no cluster reduction.
  const auto wide = plan_stream(h200(32, 16, 128, 32768, 2));
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->splits, 1);
}

TEST(KernelChoice, ForcedRoutesWinWhereTheyCanRun) {
  const Problem p = h200(32, 4096, 128, 4096, 2);
  force_route(Route::kTiled);
  EXPECT_EQ(choose_route(p), Route::kTiled);
  force_route(Route::kStream);
  EXPECT_EQ(choose_route(p), Route::kStream);
  force_route(Route::kCublasView);  // no gathered view: the policy's route
  EXPECT_EQ(choose_route(p), Route::kCublasCat);
  auto ampere = p;
  ampere.arch = 80;
  force_route(Route::kStream);  // cannot run there: the policy's route
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  force_route(std::nullopt);
  EXPECT_EQ(choose_route(p), Route::kCublasCat);
}

}  // namespace
}  // namespace fgl::cuda
