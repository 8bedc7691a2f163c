// The CUDA routing policy (ops/cuda/kernel_choice.h) is plain C++: its table
// and the streaming kernel's plans are checked here on every machine.
#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <utility>
#include <vector>

#include "cuda/kernel_choice.h"
#include "cuda/stream_layout.h"
#include "cuda/warp_dot_layout.h"
#include "cuda/warp_mma_layout.h"

namespace fgl::cuda {
namespace {

using Shape = std::array<int64_t, 4>;  // R, B, H, K

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
  p.x_tma_ok = true;
  p.rows_contiguous = true;
  p.x_gathered_view = B == 1;
  // As the H200 answers for the streaming kernel (bench/NOTES.md "v28").
  p.stream_clusters = {0, 132, 66, 39, 30, 22, 17, 15, 15};
  p.memory_gbps = 4916;  // HBM3e: 3.2 GHz, two transfers a clock, 6144 bits
  return p;
}

TEST(KernelChoice, SmallProblemsTakeTheWarpDotKernel) {
  for (int e : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "element size " << e);
    // The seed problem, its decode, and small layers up to 2 MiB of weight
    // read (one row tile of 4 rows).
    EXPECT_EQ(choose_route(h200(4, 12, 32, 56, e)), Route::kWarpDot);
    EXPECT_EQ(choose_route(h200(4, 1, 32, 56, e)), Route::kWarpDot);
    EXPECT_EQ(choose_route(h200(8, 4, 64, 1024, e)), Route::kWarpDot);
    EXPECT_EQ(choose_route(h200(32, 16, 128, 56, e)), Route::kWarpDot);
  }
  // float32 to 4 MiB read, and decode (one row) at any size; float64 to
  // 8 MiB read.
  EXPECT_EQ(choose_route(h200(16, 16, 64, 256, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(32, 1, 128, 4096, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(128, 1, 128, 4096, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(64, 2, 128, 4096, 4)), Route::kStream);
  // float32's two rows to 16 MiB; four rows stream past 4 MiB read.
  EXPECT_EQ(choose_route(h200(16, 2, 128, 1024, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(16, 2, 128, 2048, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(32, 2, 128, 2048, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(16, 4, 128, 1024, 4)), Route::kStream);
  // ... but a short contraction over many columns streams one row and takes
  // the warp-mma kernel from 2 to 16.
  EXPECT_EQ(choose_route(h200(2, 1, 64, 16384, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(2, 16, 64, 16384, 4)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(2, 24, 64, 16384, 4)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(16, 16, 64, 256, 8)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(4, 12, 32, 56, 8)), Route::kWarpDot);
  // Half precision from 2 to 4 rows up to 2 MiB of weight (the warp-mma
  // kernel's range otherwise).
  EXPECT_EQ(choose_route(h200(16, 2, 64, 1024, 2)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(4, 3, 32, 1024, 2)), Route::kWarpDot);
  // Other architectures keep cuBLAS (the table is the H200's).
  auto ampere = h200(4, 12, 32, 56, 4);
  ampere.arch = 80;
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  EXPECT_TRUE(plan_warp_dot(ampere).has_value());
}

TEST(KernelChoice, DecodeAndSmallBatchesStream) {
  for (int64_t B : {2, 7, 16}) {
    SCOPED_TRACE(::testing::Message() << "B " << B);
    EXPECT_EQ(choose_route(h200(32, B, 128, 4096, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(32, B, 128, 512, 2)), Route::kStream);
  }
  EXPECT_EQ(choose_route(h200(8, 12, 64, 1024, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(8, 16, 64, 1024, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 1, 128, 512, 2)), Route::kStream);
  // float32 keeps streaming to 64 rows where the warp-mma kernel does not
  // take it, half precision to 16, and to 32 past 8 MiB of weight (the
  // warp-mma kernel's up to it).
  EXPECT_EQ(choose_route(h200(16, 64, 128, 2048, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(64, 64, 128, 8192, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 24, 128, 4096, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 32, 128, 4096, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(16, 32, 128, 4096, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 24, 128, 2048, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 33, 128, 4096, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(64, 65, 128, 8192, 4)), Route::kCublasCat);
  // float32 past 64 rows: to 128 from 16 MiB below 128 MiB, to 256 below
  // 32 MiB and up to 2 MiB.
  EXPECT_EQ(choose_route(h200(32, 128, 128, 4096, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(16, 256, 128, 2048, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(8, 256, 64, 1024, 4)), Route::kStream);
  EXPECT_NE(choose_route(h200(32, 129, 128, 4096, 4)), Route::kStream);
  EXPECT_NE(choose_route(h200(64, 128, 128, 8192, 4)), Route::kStream);
  EXPECT_NE(choose_route(h200(4, 128, 64, 4096, 4)), Route::kStream);
  // Under TF32 to 16 rows: past them cuBLAS's one pass reads the weight
  // once where the kernel multiplies three times.
  auto tf32 = h200(32, 16, 128, 4096, 4);
  tf32.tf32_allowed = true;
  EXPECT_EQ(choose_route(tf32), Route::kStream);
  tf32.B = 17;
  EXPECT_EQ(choose_route(tf32), Route::kCublasCat);
  // float64 past the warp-dot kernel's reach: the reference's route.
  EXPECT_EQ(choose_route(h200(32, 1, 128, 4096, 8)), Route::kCublasView);
  EXPECT_EQ(choose_route(h200(32, 4, 128, 1024, 8)), Route::kCublasCat);
  EXPECT_TRUE(plan_stream(h200(32, 1, 128, 4096, 8)).has_value());
}

TEST(KernelChoice, HalfPrecisionDecodeTakesTheWarpMmaKernel) {
  // Up to 16 rows from 1024 output columns, at any weight to 64 MiB and
  // past it up to 8 rows (one n-tile); but from 16 MiB past one n-tile and
  // from 32 MiB past 4 rows the streaming kernel.
  for (int64_t B : {1, 5, 8, 9, 16}) {
    SCOPED_TRACE(::testing::Message() << "B " << B);
    EXPECT_EQ(choose_route(h200(8, B, 64, 1024, 2)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(16, B, 128, 2048, 2)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(32, B, 128, 2048, 2)),
              B <= 8 ? Route::kWarpMma : Route::kStream);
    EXPECT_EQ(choose_route(h200(2, B, 64, 16384, 2)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(32, B, 128, 4096, 2)),
              B <= 4 ? Route::kWarpMma : Route::kStream);
    EXPECT_EQ(choose_route(h200(32, B, 128, 8192, 2)),
              B <= 4 ? Route::kWarpMma : Route::kStream);
    EXPECT_EQ(choose_route(h200(64, B, 128, 8192, 2)),
              B <= 8 ? Route::kWarpMma : Route::kCublasCat);
  }
  EXPECT_EQ(choose_route(h200(32, 4, 128, 4096, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(32, 4, 128, 8192, 2)), Route::kWarpMma);
  // To 32 rows (two row tiles, the weight read twice) up to 8 MiB, and to
  // 128 rows up to 1 MiB.
  EXPECT_EQ(choose_route(h200(8, 32, 64, 4096, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(16, 24, 128, 2048, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(16, 32, 128, 2048, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(8, 32, 128, 4096, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(8, 33, 64, 1024, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(8, 128, 64, 1024, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200(8, 129, 64, 1024, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(8, 64, 64, 4096, 2)), Route::kCublasCat);
  // Fewer columns keep the warp-dot or the streaming kernel; float64 never
  // takes it.
  EXPECT_EQ(choose_route(h200(32, 16, 128, 512, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200(4, 16, 32, 512, 2)), Route::kWarpDot);
  EXPECT_FALSE(plan_warp_mma(h200(8, 16, 64, 1024, 8)).has_value());
  // mma.sync on 16-bit types needs sm_80; the table is the H200's.
  auto ampere = h200(8, 16, 64, 1024, 2);
  ampere.arch = 80;
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  EXPECT_TRUE(plan_warp_mma(ampere).has_value());
  ampere.arch = 75;
  EXPECT_FALSE(plan_warp_mma(ampere).has_value());
}

TEST(KernelChoice, FloatInOneTileTakesTheWarpMmaKernelButWhereBlocksStream) {
  // 5 to 8 rows from 2 MiB of weight, but 64 MiB (#10's shape) streams, and
  // so do grids that cover the GPU with blocks of 128 stages or more
  // (copies of several, "v45"): 64,B,128,4096 (two splits of 128) and
  // 64,B,128,8192 (256); fewer rows and less weight stay with the warp-dot
  // kernel, and under TF32 the table is the streaming kernel's.
  for (int64_t B : {5, 6, 8}) {
    SCOPED_TRACE(::testing::Message() << "B " << B);
    EXPECT_EQ(choose_route(h200(8, B, 64, 1024, 4)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(16, B, 128, 2048, 4)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(32, B, 128, 2048, 4)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(64, B, 128, 4096, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(64, B, 128, 8192, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(32, B, 128, 4096, 4)), Route::kStream);
    // Copies, but a grid of 96 blocks (32 column tiles in clusters of 3).
    EXPECT_EQ(choose_route(h200(128, B, 128, 2048, 4)), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(4, B, 64, 1024, 4)), Route::kWarpDot);
    auto tf32 = h200(64, B, 128, 4096, 4);
    tf32.tf32_allowed = true;
    EXPECT_EQ(choose_route(tf32), Route::kStream);
  }
  EXPECT_EQ(choose_route(h200(8, 4, 64, 1024, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200(8, 9, 64, 1024, 4)), Route::kStream);
}

TEST(KernelChoice, FloatPastSixteenRowsTakesTheWarpMmaKernel) {
  // 17 to 128 rows from 1024 columns, up to 64 MiB of weight, but not
  // where the streaming kernel's table takes it with x in its ring and
  // contractions from 512; nor, without x in the ring, to 64 rows from
  // 32 MiB.
  for (int64_t B : {17, 24, 32, 48, 64, 96, 128}) {
    SCOPED_TRACE(::testing::Message() << "B " << B);
    EXPECT_EQ(choose_route(h200(32, B, 128, 4096, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(16, B, 128, 2048, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(8, B, 64, 1024, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(8, B, 64, 512, 4)), Route::kStream);
    EXPECT_EQ(choose_route(h200(4, B, 64, 4096, 4)), Route::kWarpMma);
    EXPECT_NE(choose_route(h200(64, B, 128, 8192, 4)), Route::kWarpMma);
    EXPECT_NE(choose_route(h200(2, B, 64, 16384, 4)), Route::kWarpMma);
    EXPECT_NE(choose_route(h200(32, B, 128, 512, 4)), Route::kWarpMma);
  }
  // x's tiles outside the ring (H not a multiple of a stage, or no tensor
  // map over x): the table before the split warps.
  for (int64_t B : {17, 24, 32}) {
    SCOPED_TRACE(::testing::Message() << "B " << B);
    EXPECT_EQ(choose_route(h200(16, B, 120, 2048, 4)), Route::kWarpMma);
    auto strided = h200(16, B, 128, 2048, 4);
    strided.x_tma_ok = false;
    EXPECT_EQ(choose_route(strided), Route::kWarpMma);
    EXPECT_EQ(choose_route(h200(32, B, 120, 4096, 4)), Route::kStream);
  }
  // One pass of 16 rows streams; past 128 rows, cuBLAS.
  EXPECT_EQ(choose_route(h200(8, 16, 64, 1024, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200(32, 129, 128, 4096, 4)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(4, 129, 64, 4096, 4)), Route::kCublasCat);
  // Under TF32 cuBLAS multiplies once where this kernel multiplies three
  // times; before sm_90 the TF32 split does not build.
  auto tf32 = h200(32, 32, 128, 4096, 4);
  tf32.tf32_allowed = true;
  EXPECT_NE(choose_route(tf32), Route::kWarpMma);
  auto ampere = h200(32, 32, 128, 4096, 4);
  ampere.arch = 80;
  EXPECT_FALSE(plan_warp_mma(ampere).has_value());
  EXPECT_TRUE(plan_warp_mma(h200(32, 32, 128, 4096, 4)).has_value());
}

TEST(KernelChoice, WarpMmaPlansCoverTheProblem) {
  const int64_t shapes[][4] = {
      {4, 12, 32, 56},    {32, 1, 128, 56},   {2, 64, 8, 33},      {1, 1, 8, 1},
      {16, 37, 64, 1001}, {32, 1, 128, 4096}, {128, 4, 128, 32768}};
  for (const auto& s : shapes) {
    for (const int e : {2, 4}) {
      SCOPED_TRACE(::testing::Message()
                   << s[0] << "," << s[1] << "," << s[2] << "," << s[3]
                   << " element size " << e);
      const auto plan = plan_warp_mma(h200(s[0], s[1], s[2], s[3], e));
      ASSERT_TRUE(plan.has_value());
      const int64_t C = s[0] * s[2];
      EXPECT_EQ(plan->row_tiles_per_warp, warp_mma::row_tiles_per_warp(s[1]));
      // A power of two of warps, the block's warps, per group of columns.
      EXPECT_GE(plan->splits, 1);
      EXPECT_LE(plan->splits, warp_mma::kMaxSplits);
      EXPECT_EQ(plan->splits & (plan->splits - 1), 0);
      EXPECT_EQ(plan->threads % (32 * plan->splits), 0);
      EXPECT_GE(plan->threads, warp_mma::kMinThreads);
      EXPECT_LE(plan->threads, warp_mma::kMaxThreads);
      // Slices of whole chunks cover the contraction.
      EXPECT_EQ(plan->slice % warp_mma::chunk(e), 0);
      EXPECT_GE(plan->splits * plan->slice, C);
      EXPECT_GE(plan->column_tiles * warp_mma::kColumns * plan->threads / 32 /
                    plan->splits,
                s[3]);
      EXPECT_GE(
          plan->row_tiles * plan->row_tiles_per_warp * warp_mma::kRowsPerTile,
          s[1]);
    }
  }
  // Few groups of columns over a long contraction: warps share each group.
  EXPECT_GT(plan_warp_mma(h200(32, 1, 128, 1024, 2))->splits, 1);
  Problem p = h200(8, 16, 64, 1024, 2);
  p.x_vectors = false;
  EXPECT_FALSE(plan_warp_mma(p).has_value());
  p = h200(8, 16, 64, 1024, 2);
  p.weight_tma_ok = false;
  EXPECT_FALSE(plan_warp_mma(p).has_value());
}

// 16-bit plans: blocks of two groups of four warps where a block of one
// would leave more blocks than multiprocessors; the first step prefetched
// from 16 MiB of weight with one n-tile a warp, from 32 MiB with two.
// float32 keeps one group a block and no prefetch.
TEST(KernelChoice, WarpMmaPlansWidenBlocksAndPrefetchLargeWeights) {
  const auto wide = plan_warp_mma(h200(64, 1, 128, 8192, 2));
  EXPECT_EQ(wide->splits, 4);
  EXPECT_EQ(wide->threads, 256);
  const auto float32 = plan_warp_mma(h200(32, 24, 128, 4096, 4));
  EXPECT_EQ(float32->splits, 4);
  EXPECT_EQ(float32->threads, 128);
  const auto few_blocks = plan_warp_mma(h200(8, 1, 64, 1024, 2));
  EXPECT_EQ(few_blocks->splits, 4);
  EXPECT_EQ(few_blocks->threads, 128);
  EXPECT_TRUE(wide->prefetch_first_step);
  // The GPU tests' shape for both (WarpMmaKernel.IsExactAndDeterministic).
  const auto tested = plan_warp_mma(h200(8, 1, 128, 8192, 2));
  EXPECT_EQ(tested->threads, 2 * 32 * tested->splits);
  EXPECT_TRUE(tested->prefetch_first_step);
  EXPECT_TRUE(plan_warp_mma(h200(32, 1, 128, 2048, 2))->prefetch_first_step);
  EXPECT_FALSE(plan_warp_mma(h200(16, 1, 128, 2048, 2))->prefetch_first_step);
  EXPECT_TRUE(plan_warp_mma(h200(32, 16, 128, 4096, 2))->prefetch_first_step);
  EXPECT_FALSE(plan_warp_mma(h200(16, 16, 128, 4096, 2))->prefetch_first_step);
  EXPECT_FALSE(float32->prefetch_first_step);
}

TEST(KernelChoice, FusedRoutesComeWithTheirPlans) {
  const Problem decode = h200(32, 2, 128, 4096, 4);
  const RouteChoice streamed = choose(decode);
  EXPECT_EQ(streamed.route, Route::kStream);
  ASSERT_TRUE(streamed.stream.has_value());
  EXPECT_FALSE(streamed.warp_dot.has_value());
  EXPECT_EQ(streamed.stream->splits, plan_stream(decode)->splits);
  const Problem seed = h200(4, 12, 32, 56, 4);
  const RouteChoice small = choose(seed);
  EXPECT_EQ(small.route, Route::kWarpDot);
  ASSERT_TRUE(small.warp_dot.has_value());
  EXPECT_FALSE(small.stream.has_value());
  EXPECT_EQ(small.warp_dot->row_tiles, plan_warp_dot(seed)->row_tiles);
  const Problem mid = h200(8, 16, 64, 1024, 2);
  const RouteChoice tensor_cores = choose(mid);
  EXPECT_EQ(tensor_cores.route, Route::kWarpMma);
  ASSERT_TRUE(tensor_cores.warp_mma.has_value());
  EXPECT_FALSE(tensor_cores.warp_dot.has_value());
  EXPECT_FALSE(tensor_cores.stream.has_value());
  EXPECT_EQ(tensor_cores.warp_mma->splits, plan_warp_mma(mid)->splits);
  const RouteChoice large = choose(h200(32, 4096, 128, 4096, 2));
  EXPECT_EQ(large.route, Route::kCublasCat);
  EXPECT_FALSE(large.stream.has_value());
  EXPECT_FALSE(large.warp_dot.has_value());
  EXPECT_FALSE(large.warp_mma.has_value());
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
      // float32 asks L2 for its first stages early; the half types only
      // where the grid before lets them start late, and float64 never.
      EXPECT_EQ(plan->prefetch_stages > 0,
                e == 4 || (e == 2 && plan->next_grid_after_last_copy));
      EXPECT_TRUE(e == 2 || !plan->next_grid_after_last_copy);
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
      if (plan->x_in_ring) {
        EXPECT_TRUE(stream::uses_tensor_cores(e, plan->rows_per_block));
        EXPECT_EQ(s[2] % stage_c, 0);  // a stage never crosses a head
        EXPECT_EQ(plan->slab_pitch, 0);
      } else {
        EXPECT_GE(plan->slab_pitch, plan->stages_per_split * stage_c);
      }
    }
  }
}

TEST(KernelChoice, HalfTypeDecodeLetsTheNextGridStartLate) {
  // Blocks of up to 32 stages (#10's 16-token rows) let the next grid start
  // once their last copies are issued and ask L2 for their first stages;
  // blocks of 64 stages streamed slower so (bench/NOTES.md "v54").
  for (const Shape& s : {Shape{32, 16, 128, 4096}, Shape{32, 8, 128, 4096},
                         Shape{32, 32, 128, 4096}}) {
    const auto plan = plan_stream(h200(s[0], s[1], s[2], s[3], 2));
    ASSERT_TRUE(plan.has_value());
    EXPECT_LE(plan->stages_per_split, 32);
    EXPECT_TRUE(plan->next_grid_after_last_copy);
    EXPECT_GT(plan->prefetch_stages, 0);
  }
  const auto longer = plan_stream(h200(64, 16, 128, 4096, 2));
  ASSERT_TRUE(longer.has_value());
  EXPECT_EQ(longer->stages_per_split, 64);
  EXPECT_FALSE(longer->next_grid_after_last_copy);
  EXPECT_EQ(longer->prefetch_stages, 0);
  const auto float32 = plan_stream(h200(32, 16, 128, 4096, 4));
  ASSERT_TRUE(float32.has_value());
  EXPECT_FALSE(float32->next_grid_after_last_copy);
}

TEST(KernelChoice, StreamCarriesXInTheRingWhereTheCopyEngineReadsIt) {
  // float32 decode: x's stage tiles beside the weight's, and with no slab
  // to hold, a deeper ring than the slab's plan leaves room for.
  auto p = h200(32, 16, 128, 4096, 4);
  const auto ring = plan_stream(p);
  ASSERT_TRUE(ring.has_value());
  EXPECT_TRUE(ring->x_in_ring);
  EXPECT_EQ(ring->slab_pitch, 0);
  p.x_tma_ok = false;  // e.g. x broadcast along B
  const auto slab = plan_stream(p);
  ASSERT_TRUE(slab.has_value());
  EXPECT_FALSE(slab->x_in_ring);
  EXPECT_GT(ring->ring_stages, slab->ring_stages);
  // A stage (64 half values) would cross heads of 96.
  const auto short_heads = plan_stream(h200(8, 16, 96, 1024, 2));
  ASSERT_TRUE(short_heads.has_value());
  EXPECT_FALSE(short_heads->x_in_ring);
  // The CUDA-core instances (float64; float32 below 8 rows) keep the slab.
  EXPECT_FALSE(plan_stream(h200(32, 16, 128, 4096, 8))->x_in_ring);
  EXPECT_FALSE(plan_stream(h200(32, 4, 128, 4096, 4))->x_in_ring);
  EXPECT_TRUE(plan_stream(h200(32, 16, 128, 4096, 2))->x_in_ring);
}

TEST(KernelChoice, StreamSlotsHoldXsRemaindersWhereSplitterWarpsSplitX) {
  // float32 by warp group: x's TF32 remainders follow its tile in its x
  // slot, where TMA brings nothing, and start on the swizzle's 1024-byte
  // period as the tiles do (wgmma reads them by descriptor).
  for (int rows : {16, 32}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    EXPECT_TRUE(stream::splits_x(4, rows));
    const int tile = stream::x_tile_bytes(rows, true);
    EXPECT_EQ(tile, rows * stream::kStageBytes);
    EXPECT_EQ(stream::x_slot_bytes(4, rows, true), 2 * tile);
    EXPECT_EQ(stream::landed_bytes(rows, true, 1, 1),
              stream::kStageTileBytes + tile);
    EXPECT_EQ(tile % 1024, 0);
    EXPECT_EQ(stream::slot_bytes(4, rows, true),
              stream::kStageTileBytes + 2 * tile);
    EXPECT_EQ(stream::slot_bytes(4, rows, true) % 1024, 0);
    EXPECT_EQ(stream::slot_barrier_bytes(4, rows, true), 24);
    EXPECT_EQ(stream::block_threads(4, rows),
              (2 * stream::kGroupWarps + 1 + stream::kSplitterWarps) * 32);
  }
  // The others split nothing in the ring: an x slot is what lands there.
  EXPECT_FALSE(stream::splits_x(4, 8));
  EXPECT_FALSE(stream::splits_x(2, 16));
  EXPECT_EQ(stream::x_slot_bytes(2, 16, true), stream::x_tile_bytes(16, true));
  EXPECT_EQ(stream::slot_bytes(4, 16, false), stream::kStageTileBytes);
  EXPECT_EQ(stream::slot_barrier_bytes(4, 16, false), 16);
  EXPECT_EQ(stream::block_threads(2, 16), (2 * stream::kGroupWarps + 1) * 32);
  // The plan leaves room for the deeper slots.
  const auto plan = plan_stream(h200(32, 16, 128, 4096, 4));
  ASSERT_TRUE(plan.has_value());
  ASSERT_TRUE(plan->x_in_ring);
  EXPECT_GE(plan->smem_bytes,
            plan->ring_stages * (stream::slot_bytes(4, 16, true) +
                                 stream::slot_barrier_bytes(4, 16, true)));
}

TEST(KernelChoice, StreamCopiesSeveralStagesWhereBlocksStreamMany) {
  // A copy brings every one of its stages, past the block's last too: the
  // tx count covers them all, and x's tiles only of the stages streamed.
  EXPECT_EQ(stream::landed_bytes(16, true, 4, 3),
            4 * stream::kStageTileBytes + 3 * 16 * stream::kStageBytes);
  EXPECT_EQ(stream::landed_bytes(8, false, 1, 1), stream::kStageTileBytes);
  // float32 blocks of up to 16 rows copy several stages; the other types
  // and 32 rows one.
  const int copy = stream::copy_stages(4, 16);
  EXPECT_GT(copy, 1);
  for (int rows : {4, 8}) EXPECT_EQ(stream::copy_stages(4, rows), copy);
  EXPECT_EQ(stream::copy_stages(4, 32), 1);
  for (int rows : {4, 8, 16, 32}) {
    EXPECT_EQ(stream::copy_stages(2, rows), 1);
    EXPECT_EQ(stream::copy_stages(8, rows), 1);
  }
  const auto expect_copies = [&](const Problem& problem, bool copies) {
    SCOPED_TRACE(::testing::Message()
                 << problem.R << "," << problem.B << "," << problem.H << ","
                 << problem.K << " " << problem.element_size << "-byte");
    const auto plan = plan_stream(problem);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->copy_stages, copies ? copy : 1);
    EXPECT_EQ(plan->ring_stages % plan->copy_stages, 0);
    if (copies) {
      EXPECT_GE(plan->stages_per_split, 128);
      EXPECT_GE(plan->ring_stages, 2 * copy);
    }
    const int e = problem.element_size;
    EXPECT_EQ(plan->smem_bytes,
              stream::smem_bytes(plan->ring_stages, plan->rows_per_block,
                                 plan->slab_pitch, e, e == 8 ? 8 : 4,
                                 plan->x_in_ring, plan->splits));
  };
  // float32 blocks of 4 to 16 rows streaming 128 stages or more (R * H /
  // 32 a block: 64,B,128,8192 one split of 256 stages; 32,16,128,8192 128;
  // eight splits of 129 or 137, the last copies past each split: the
  // streaming kernel's tests).
  for (int64_t B : {1, 3, 8, 16})
    expect_copies(h200(64, B, 128, 8192, 4), true);
  expect_copies(h200(32, 16, 128, 8192, 4), true);
  for (const auto& [R, B, H] : std::vector<std::array<int64_t, 3>>{
           {43, 16, 768}, {1056, 8, 33}, {43, 3, 768}}) {
    expect_copies(h200(R, B, H, 64, 4), true);
    EXPECT_EQ(plan_stream(h200(R, B, H, 64, 4))->splits, 8);
  }
  // Not: the decode problem's 64 stages a block, 32 rows, a contraction of
  // whole stages only in part (H = 33), the half types and float64.
  expect_copies(h200(32, 16, 128, 4096, 4), false);
  expect_copies(h200(16, 16, 128, 2048, 4), false);
  expect_copies(h200(64, 32, 128, 8192, 4), false);
  expect_copies(h200(130, 8, 33, 8192, 4), false);
  for (int e : {2, 8}) expect_copies(h200(64, 16, 128, 8192, e), false);
}

TEST(KernelChoice, StreamRingsShareAMultiprocessorOnlyWhereRegistersDo) {
  // 512 column tiles: more blocks than multiprocessors. float32's warp-group
  // blocks of 16 rows hold two stages' operands in registers, one block a
  // multiprocessor, so each block's ring takes the whole shared memory; the
  // 16-bit blocks of 16 rows run two a multiprocessor on half of it each.
  EXPECT_EQ(stream::blocks_per_multiprocessor(4, 16), 1);
  EXPECT_EQ(stream::blocks_per_multiprocessor(2, 16), 2);
  EXPECT_EQ(stream::blocks_per_multiprocessor(4, 8), 2);
  const Problem p = h200(32, 16, 128, 32768, 4);
  const auto fp32 = plan_stream(p);
  const auto bf16 = plan_stream(h200(32, 16, 128, 32768, 2));
  ASSERT_TRUE(fp32.has_value() && bf16.has_value());
  EXPECT_GT(fp32->smem_bytes, p.max_smem_per_block / 2);
  EXPECT_LT(bf16->smem_bytes, p.max_smem_per_block / 2);
  EXPECT_GT(fp32->ring_stages, bf16->ring_stages);
}

TEST(KernelChoice, HalfTypeGridsThatFillTheGpuLeaveRoomForTheNextOne) {
  // 128 blocks of one a multiprocessor fill 128 of the H200's 132: the
  // 16-bit blocks take half the shared memory, so that the next grid's
  // blocks fit beside them.
  const Problem p = h200(32, 16, 128, 4096, 2);
  const auto full = plan_stream(p);
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->column_tiles * full->row_tiles * full->splits, 128);
  EXPECT_LE(full->smem_bytes + 1024, (p.max_smem_per_block + 1024) / 2);
  // Its split stays the one the whole shared memory would choose: 96 blocks
  // (3 splits) leave a quarter of the GPU free and keep the deep ring.
  const auto partial = plan_stream(h200(32, 16, 128, 2048, 2));
  ASSERT_TRUE(partial.has_value());
  EXPECT_EQ(partial->column_tiles * partial->row_tiles * partial->splits, 96);
  EXPECT_GT(partial->smem_bytes, p.max_smem_per_block / 2);
  EXPECT_GT(partial->ring_stages, full->ring_stages);
  // float32 keeps its whole ring (not measured with half of it).
  EXPECT_GT(plan_stream(h200(32, 8, 128, 4096, 4))->smem_bytes,
            p.max_smem_per_block / 2);
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

TEST(KernelChoice, SplitContractionsKeepTheirClustersResident) {
  // 32 column tiles: 4 splits would make 32 clusters of 4, two more than
  // the H200 holds at once (one block a multiprocessor); 3 fit.
  const auto fp32 = plan_stream(h200(16, 16, 128, 2048, 4));
  ASSERT_TRUE(fp32.has_value());
  EXPECT_EQ(fp32->splits, 3);
  // With the multiprocessors alone counted, 4 (one block each) would do.
  auto unknown = h200(16, 16, 128, 2048, 4);
  unknown.stream_clusters = {};
  EXPECT_EQ(plan_stream(unknown)->splits, 4);
  // Blocks of 32 rows hold a multiprocessor each (registers): 3 row tiles
  // of 16 column tiles in clusters of 8 would take waves; 2 splits fill 96.
  const auto rows = plan_stream(h200(8, 96, 64, 1024, 4));
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->splits, 2);
  // Larger clusters cost more to reduce: 4 splits of 4 stages, not 8 of 2.
  EXPECT_EQ(plan_stream(h200(8, 32, 64, 1024, 4))->splits, 4);
  // Where only a plan in waves of clusters fits, it is still taken.
  const auto slab = plan_stream(h200(128, 2, 128, 32768, 4));
  ASSERT_TRUE(slab.has_value());
  EXPECT_GT(slab->splits, 1);
  // A size of which no cluster fits is never planned.
  auto none = h200(16, 16, 128, 2048, 4);
  none.stream_clusters = {0, 132, 66, 0, 0, 0, 0, 0, 0};
  EXPECT_LE(plan_stream(none)->splits, 2);
}

TEST(KernelChoice, WarpDotPlansCoverTheProblem) {
  const int64_t shapes[][4] = {
      {4, 12, 32, 56},    {32, 1, 128, 56},   {32, 2, 128, 3},     {1, 1, 8, 1},
      {16, 37, 64, 1001}, {32, 1, 128, 4096}, {128, 4, 128, 32768}};
  for (const auto& s : shapes) {
    for (int e : {2, 4, 8}) {
      SCOPED_TRACE(::testing::Message()
                   << s[0] << "," << s[1] << "," << s[2] << "," << s[3]
                   << " element size " << e);
      const auto plan = plan_warp_dot(h200(s[0], s[1], s[2], s[3], e));
      ASSERT_TRUE(plan.has_value());
      const int64_t C = s[0] * s[2];
      const int64_t step = 32 * (16 / e);
      EXPECT_EQ(plan->rows_per_warp, warp_dot::rows_per_warp(s[1]));
      EXPECT_EQ(plan->vector_bytes, warp_dot::kVectorBytes);
      // A power of two of warps, the block's warps, per column.
      EXPECT_GE(plan->splits, 1);
      EXPECT_LE(plan->splits, warp_dot::kMaxSplits);
      EXPECT_EQ(plan->splits & (plan->splits - 1), 0);
      EXPECT_EQ(plan->threads % (32 * plan->splits), 0);
      EXPECT_GE(plan->threads, warp_dot::kMinThreads);
      EXPECT_LE(plan->threads, warp_dot::kMaxThreads);
      // Slices of whole warp steps cover the contraction.
      EXPECT_EQ(plan->slice % step, 0);
      EXPECT_GE(plan->splits * plan->slice, C);
      EXPECT_GE(plan->column_tiles * plan->threads / 32 / plan->splits, s[3]);
      EXPECT_GE(plan->row_tiles * plan->rows_per_warp, s[1]);
    }
  }
  // Few columns over a long contraction: warps share each column.
  EXPECT_GT(plan_warp_dot(h200(32, 1, 128, 56, 2))->splits, 1);
  // Columns enough to fill the device: one warp a column.
  EXPECT_EQ(plan_warp_dot(h200(32, 1, 128, 4096, 2))->splits, 1);
}

// Rows that are not 16-byte vectors are read an element at a time, in
// slices of whole warp steps of one element a lane; rows that are not
// contiguous, not at all.
TEST(KernelChoice, WarpDotLoadsVectorsWhereTheRowsAllow) {
  for (int e : {2, 4, 8}) {
    SCOPED_TRACE(::testing::Message() << "element size " << e);
    EXPECT_EQ(plan_warp_dot(h200(4, 12, 32, 56, e))->vector_bytes,
              warp_dot::kVectorBytes);
    for (const bool x_vectors : {false, true}) {
      Problem p = h200(3, 20, 33, 80, e);
      p.x_vectors = p.x_tma_ok = x_vectors;
      p.weight_tma_ok = !x_vectors;
      const auto plan = plan_warp_dot(p);
      ASSERT_TRUE(plan.has_value());
      EXPECT_EQ(plan->vector_bytes, e);
      EXPECT_EQ(plan->slice % 32, 0);
      EXPECT_GE(plan->splits * plan->slice, 3 * 33);
    }
    Problem strided = h200(4, 12, 32, 56, e);
    strided.rows_contiguous = false;
    EXPECT_FALSE(plan_warp_dot(strided).has_value());
  }
}

// A problem on the H200 whose heads are not 16-byte vectors (x is read in
// place element by element or gathered into a slab), nor, unless
// `weight_vectors`, the weight's rows.
Problem h200_odd_rows(const Shape& s, int element_size, bool weight_vectors) {
  Problem p = h200(s[0], s[1], s[2], s[3], element_size);
  p.x_vectors = p.x_tma_ok = false;
  p.weight_tma_ok = weight_vectors;
  return p;
}

// A problem the Hopper tensor-core kernel can read, in a build that has it.
Problem h200_wgmma(int64_t R, int64_t B, int64_t H, int64_t K,
                   int element_size) {
  Problem p = h200(R, B, H, K, element_size);
  p.x_tma_ok = true;
  p.wgmma_built = true;
  return p;
}

// A half-type problem R,B,128,K and whether the cluster split takes it.
struct SplitCase {
  int64_t R, B, K;
  bool split;
};

// Whether the policy takes `route` for each of `shapes` on an H200 whose
// build has the Hopper kernel.
void expect_route(std::initializer_list<Shape> shapes, int element_size,
                  Route route, bool taken = true) {
  for (const auto& s : shapes) {
    EXPECT_EQ(
        choose_route(h200_wgmma(s[0], s[1], s[2], s[3], element_size)) == route,
        taken)
        << route_name(route) << " at " << s[0] << "," << s[1] << "," << s[2]
        << "," << s[3] << ", " << element_size << "-byte elements";
  }
}

// The Hopper tensor-core kernel's default schedule cuts the last round of
// float32's tiles over the 132 multiprocessors (tile_schedule.h) where
// whole tiles would leave many blocks idle: the three products in 128 x 128
// tiles of 32-float steps where at least 10% of the blocks' rounds would
// be idle, tiles of at least 64 steps. One pass (half types, TF32) and its
// other schedules deal every tile whole.
TEST(KernelChoice, TensorCoreKernelCutsTheLastRoundOfItsTiles) {
  const Problem medium = h200_wgmma(23, 1536, 128, 1536, 4);
  const RouteChoice choice = choose(medium);
  EXPECT_EQ(choice.route, Route::kWgmma);
  ASSERT_TRUE(choice.wgmma_tail.has_value());
  // 144 tiles of 92 steps: a round whole, 12 tiles cut.
  const auto& l = choice.wgmma_tail->layout;
  EXPECT_EQ(l.blocks, 132);
  EXPECT_EQ(l.steps, 92);
  EXPECT_EQ(l.whole_tiles, 132);
  EXPECT_EQ(l.tail_tiles, 12);
  EXPECT_EQ(choice.wgmma_tail->workspace_bytes,
            tile_schedule::workspace_bytes(l, 128 * 128));
  // H not a multiple of the 32-wide step: its steps round up.
  const auto odd = plan_wgmma_tail(h200_wgmma(30, 1500, 96, 1537, 4));
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->layout.steps, 90);
  EXPECT_EQ(odd->layout.tail_tiles, 156 - 132);
  EXPECT_EQ(plan_wgmma_tail(h200_wgmma(30, 1500, 100, 1537, 4))->layout.steps,
            120);
  // The idle share at its bound: 672 tiles leave 120 of 792 blocks' tiles
  // idle (15%), 576 leave 84 of 660 (13%), 1024 leave 32 of 1056 (3%).
  EXPECT_TRUE(plan_wgmma_tail(h200_wgmma(32, 3584, 128, 3072, 4)));
  EXPECT_TRUE(plan_wgmma_tail(h200_wgmma(32, 3072, 128, 3072, 4)));
  const Problem prefill = h200_wgmma(32, 4096, 128, 4096, 4);
  EXPECT_FALSE(plan_wgmma_tail(prefill));
  EXPECT_FALSE(plan_wgmma_tail(h200_wgmma(31, 3000, 96, 1900, 4)));  // 9%
  // Whole rounds (1056 tiles: 8 of 132), fewer tiles than blocks, tiles of
  // 16 steps, or a tail too short to give each block 8 steps (10 tiles of
  // 64): no cut.
  EXPECT_FALSE(plan_wgmma_tail(h200_wgmma(32, 4096, 128, 4224, 4)));
  EXPECT_FALSE(plan_wgmma_tail(h200_wgmma(32, 1280, 128, 1280, 4)));
  EXPECT_FALSE(plan_wgmma_tail(h200_wgmma(4, 1408, 128, 2304, 4)));
  EXPECT_FALSE(plan_wgmma_tail(h200_wgmma(16, 256, 128, 9088, 4)));
  // One pass: none, at any idle share (288 tiles of 128 x 256 at
  // 32,2304,128,4096 leave 27% of three rounds idle).
  const Problem half = h200_wgmma(32, 2304, 128, 4096, 2);
  auto tf32 = h200_wgmma(32, 2304, 128, 4096, 4);
  tf32.tf32_allowed = true;
  EXPECT_FALSE(plan_wgmma_tail(half));
  EXPECT_FALSE(plan_wgmma_tail(tf32));
  // The policy's and the forced kWgmma route carry it; other routes do not.
  force_route(Route::kWgmma);
  EXPECT_TRUE(choose(medium).wgmma_tail.has_value());
  EXPECT_FALSE(choose(tf32).wgmma_tail.has_value());
  EXPECT_FALSE(choose(half).wgmma_tail.has_value());
  force_route(Route::kCublasCat);
  EXPECT_FALSE(choose(medium).wgmma_tail.has_value());
  force_route(std::nullopt);
  EXPECT_FALSE(choose(h200_wgmma(32, 16, 128, 4096, 4)).wgmma_tail);
}

TEST(KernelChoice, TensorCoreKernelNeedsHopperTensorCoreTypesAndTheCopyEngine) {
  const Problem p = h200_wgmma(32, 4096, 128, 4096, 2);
  EXPECT_TRUE(can_run_wgmma(p));
  auto without = p;
  without.wgmma_built = false;
  EXPECT_FALSE(can_run_wgmma(without));
  auto ampere = p;
  ampere.arch = 80;
  EXPECT_FALSE(can_run_wgmma(ampere));
  // float32 in one TF32 pass or three TF32 products; float64 not at all.
  for (int e : {4, 8}) {
    for (bool tf32 : {false, true}) {
      auto wide = p;
      wide.element_size = e;
      wide.tf32_allowed = tf32;
      EXPECT_EQ(can_run_wgmma(wide), e == 4);
    }
  }
  auto strided = p;
  strided.x_tma_ok = false;
  EXPECT_FALSE(can_run_wgmma(strided));
  auto transposed = p;
  transposed.weight_tma_ok = false;
  EXPECT_FALSE(can_run_wgmma(transposed));
  auto huge = p;
  huge.B = int64_t{1} << 31;
  EXPECT_FALSE(can_run_wgmma(huge));
  force_route(Route::kWgmma);
  EXPECT_EQ(choose_route(p), Route::kWgmma);
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  // The ping-pong schedule: half types only.
  EXPECT_TRUE(can_run_wgmma_pingpong(p));
  EXPECT_FALSE(can_run_wgmma_pingpong(ampere));
  auto single = p;
  single.element_size = 4;
  EXPECT_FALSE(can_run_wgmma_pingpong(single));
  force_route(Route::kWgmmaPingpong);
  EXPECT_EQ(choose_route(p), Route::kWgmmaPingpong);
  EXPECT_NE(choose_route(single), Route::kWgmmaPingpong);
  force_route(std::nullopt);
  // The split schedule: the largest clusters of 8, 4, 3 and 2 blocks whose
  // clusters, one a tile, are all resident at once with each block keeping
  // 4 steps; pairs past that.
  const ResidentClusters resident{0, 0, 66, 44, 30, 22, 21, 14, 14};
  EXPECT_EQ(wgmma_cluster_splits(9, 64, resident), 8);
  EXPECT_EQ(wgmma_cluster_splits(17, 64, resident), 4);
  EXPECT_EQ(wgmma_cluster_splits(32, 64, resident), 3);
  EXPECT_EQ(wgmma_cluster_splits(9, 16, resident), 4);
  EXPECT_EQ(wgmma_cluster_splits(9, 12, resident), 3);
  EXPECT_EQ(wgmma_cluster_splits(9, 8, resident), 2);
  EXPECT_EQ(wgmma_cluster_splits(100, 64, resident), 2);
  EXPECT_EQ(wgmma_cluster_splits(4, 7, resident), 1);
  EXPECT_FALSE(can_run_wgmma_split(p));  // 32,4096,128,4096: 512 tiles
  auto few = p;
  few.B = 300;
  few.K = 520;
  EXPECT_TRUE(can_run_wgmma_split(few));
  few.element_size = 4;
  EXPECT_FALSE(can_run_wgmma_split(few));
  // The stationary weight: half types, contractions of up to 8 stages of
  // 64 (one 128-column tile's weight in shared memory), and a 128-column
  // tile for each block at most.
  const Problem many_rows = h200_wgmma(8, 65536, 64, 512, 2);
  const Problem long_contraction = h200_wgmma(9, 65536, 64, 512, 2);
  EXPECT_TRUE(can_run_wgmma_stationary(many_rows));
  // 8 stages, each zero-filled past h = 33.
  EXPECT_TRUE(can_run_wgmma_stationary(h200_wgmma(8, 1000, 33, 1000, 2)));
  EXPECT_FALSE(can_run_wgmma_stationary(long_contraction));
  EXPECT_FALSE(
      can_run_wgmma_stationary(h200_wgmma(8, 65536, 64, 133 * 128, 2)));
  EXPECT_FALSE(can_run_wgmma_stationary(h200_wgmma(8, 65536, 64, 512, 4)));
  force_route(Route::kWgmmaStationary);
  EXPECT_EQ(choose_route(many_rows), Route::kWgmmaStationary);
  EXPECT_NE(choose_route(long_contraction), Route::kWgmmaStationary);
  force_route(std::nullopt);
  // Its first tile asked of L2 ahead: on grids of at most half the 132
  // multiprocessors, or with 15 tiles a block or more.
  EXPECT_TRUE(wgmma_stationary_asks_l2_first(66, 66, 132));
  EXPECT_FALSE(wgmma_stationary_asks_l2_first(67, 67, 132));
  EXPECT_FALSE(wgmma_stationary_asks_l2_first(128, 14 * 128 + 127, 132));
  EXPECT_TRUE(wgmma_stationary_asks_l2_first(128, 15 * 128, 132));
}

// The packed instances: heads of 16, 32 or 64 bytes, which divide the
// Hopper kernel's 128-byte steps (float32 in three products: 4, 8, 16;
// half types: 8, 16, 32); forced elsewhere (heads narrower or a step and
// wider, TF32 allowed, x not the copy engine's, not sm_90), the policy's
// route.
TEST(KernelChoice, PackedHeadsTakeHeadsThatDivideAStep) {
  for (const auto& [H, e] : std::vector<std::pair<int64_t, int>>{
           {4, 4}, {8, 4}, {16, 4}, {8, 2}, {16, 2}, {32, 2}}) {
    SCOPED_TRACE(::testing::Message() << "H = " << H << " e" << e);
    const Problem p = h200_wgmma(13, 300, H, 520, e);
    EXPECT_TRUE(can_run_wgmma_packed(p));
    force_route(Route::kWgmmaPacked);
    EXPECT_EQ(choose_route(p), Route::kWgmmaPacked);
    force_route(std::nullopt);
  }
  std::vector<Problem> others;
  for (const int64_t H : {2, 12, 20, 32, 64}) {
    others.push_back(h200_wgmma(13, 300, H, 520, 4));
  }
  for (const int64_t H : {4, 24, 64}) {
    others.push_back(h200_wgmma(13, 300, H, 520, 2));
  }
  auto tf32 = h200_wgmma(13, 300, 8, 520, 4);
  tf32.tf32_allowed = true;
  others.push_back(tf32);
  auto strided = h200_wgmma(13, 300, 8, 520, 4);
  strided.x_vectors = strided.x_tma_ok = false;
  others.push_back(strided);
  auto ampere = h200_wgmma(13, 300, 8, 520, 2);
  ampere.arch = 80;
  others.push_back(ampere);
  for (const Problem& p : others) {
    SCOPED_TRACE(::testing::Message() << p.R << "," << p.B << "," << p.H << ","
                                      << p.K << " e" << p.element_size);
    EXPECT_FALSE(can_run_wgmma_packed(p));
    force_route(Route::kWgmmaPacked);
    const Route forced = choose_route(p);
    force_route(std::nullopt);
    EXPECT_EQ(forced, choose_route(p));
  }
}

TEST(KernelChoice, NarrowFloatHeadsTakeStepsOfWholeHeads) {
  // float32 heads of 4, 8 or 16 over whole row tiles (padded by at most an
  // eighth): steps of whole heads from 64 tiles of 128 x 128 where the
  // contraction fills two steps, from 128 where it fills one.
  expect_route({{16, 128, 4, 8192},
                {4, 128, 16, 8192},
                {16, 256, 8, 4096},
                {64, 1024, 4, 8192},
                {16, 4096, 16, 4096},
                {4, 512, 8, 4096},
                {64, 4096, 16, 1024},
                {16, 1000, 8, 8192},
                {16, 240, 4, 32768}},
               4, Route::kWgmmaPacked);
  // Fewer tiles, a contraction shorter than a step, rows short of a tile or
  // padded by more than an eighth: heads of a quarter of a step or less
  // take cat + cuBLAS at any row count, not the kernel's steps within a head.
  expect_route({{16, 128, 8, 4096},
                {4, 1024, 8, 1024},
                {4, 1024, 4, 8192},
                {4, 4096, 4, 4096},
                {64, 4096, 2, 4096},
                {16, 100, 8, 32768},
                {16, 160, 8, 32768},
                {16, 300, 4, 32768}},
               4, Route::kCublasCat);
  // Heads of 16 fill half their steps: over padded row tiles the kernel
  // keeps its steps within a head where it took them.
  expect_route({{16, 300, 16, 8192}}, 4, Route::kWgmma);
  // Not under TF32, nor over x in the concatenation's order, nor in the
  // half types, whose cuBLAS runs on the tensor cores too.
  for (const Shape& s : {Shape{16, 1024, 8, 8192}, Shape{64, 4096, 16, 4096}}) {
    SCOPED_TRACE(::testing::Message()
                 << s[0] << "," << s[1] << "," << s[2] << "," << s[3]);
    auto tf32 = h200_wgmma(s[0], s[1], s[2], s[3], 4);
    tf32.tf32_allowed = true;
    EXPECT_NE(choose_route(tf32), Route::kWgmmaPacked);
    auto view = h200_wgmma(s[0], s[1], s[2], s[3], 4);
    view.x_gathered_view = true;
    EXPECT_NE(choose_route(view), Route::kWgmmaPacked);
    EXPECT_NE(choose_route(h200_wgmma(s[0], s[1], s[2], s[3], 2)),
              Route::kWgmmaPacked);
  }
}

TEST(KernelChoice, OnePassTilesFillTheGridsRounds) {
  // Rounds of tiles times width times the width's cost a column (1.2 for
  // 192), over 132 blocks, alike for every one-pass type.
  struct Case {
    int64_t R, B, H, K;
    int cols;
  };
  for (const Case& c : std::vector<Case>{
           {32, 2304, 128, 4096, 192},  // 3 x 192 x 1.2 < 3 x 256
           {32, 4096, 128, 2560, 256},  // 3 x 256 < 4 x 192 x 1.2
           {32, 2816, 128, 3840, 256},
           {32, 4096, 128, 4096, 256},  // 4 x 256 < 6 x 192
           {2, 1408, 64, 3072, 256},    // 132 tiles of 256: one round
           {2, 1408, 64, 2304, 192},    // 132 of 192: one round
           {2, 1408, 64, 1408, 192},    // one round at either width
           {3, 1400, 40, 2300, 192},
           {1, 130, 128, 257, 192},
           {1, 1, 8, 8, 192}}) {
    EXPECT_EQ(wgmma_fitted_tile_cols(h200_wgmma(c.R, c.B, c.H, c.K, 2)), c.cols)
        << c.R << "," << c.B << "," << c.H << "," << c.K;
  }
  // The kWgmma route carries a narrower width for one pass (half types,
  // TF32); 0 where that is the instance's own, and for float32's three
  // products.
  force_route(Route::kWgmma);
  auto tf32 = h200_wgmma(32, 2304, 128, 4096, 4);
  tf32.tf32_allowed = true;
  EXPECT_EQ(choose(h200_wgmma(32, 2304, 128, 4096, 2)).wgmma_tile_cols, 192);
  EXPECT_EQ(choose(tf32).wgmma_tile_cols, 192);
  EXPECT_EQ(choose(h200_wgmma(32, 4096, 128, 4096, 2)).wgmma_tile_cols, 0);
  EXPECT_EQ(choose(h200_wgmma(32, 2304, 128, 4096, 4)).wgmma_tile_cols, 0);
  force_route(Route::kWgmmaPingpong);
  EXPECT_EQ(choose(h200_wgmma(32, 256, 128, 4096, 2)).wgmma_tile_cols, 0);
  force_route(std::nullopt);
}

TEST(KernelChoice, ManyTilesTakeTheTensorCoreKernel) {
  // Prefill, many rows with a small K, and medium problems of 256 tiles
  // and more whose weight stays in L2.
  EXPECT_EQ(choose_route(h200_wgmma(32, 4096, 128, 4096, 2)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(32, 2048, 128, 4096, 2)), Route::kWgmma);
  // Up to a quarter of the rounds idle in 256-wide tiles: 330 (16%), not
  // 288 (27%), whose 192-wide tiles fill three rounds but lost to cuBLAS
  // too.
  EXPECT_EQ(choose_route(h200_wgmma(32, 2816, 128, 3840, 2)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(32, 2304, 128, 4096, 2)),
            Route::kCublasCat);
  // Contractions of up to 8 stages of 64 in heads of 32 or more, from 128
  // rows (past the warp-mma kernel's), K up to 16384: the stationary weight.
  expect_route({{8, 65536, 64, 512},
                {4, 65536, 128, 512},
                {8, 8192, 64, 1024},
                {8, 2048, 64, 1024},
                {8, 512, 64, 512},
                {1, 32768, 128, 1024},
                {2, 16384, 64, 256},
                {8, 16384, 32, 512},
                {8, 16384, 64, 8192},
                {8, 8192, 64, 16384},
                {8, 128, 64, 4096},
                {8, 192, 64, 1024},
                {8, 128, 32, 4096},
                {2, 128, 64, 16384}},
               2, Route::kWgmmaStationary);
  EXPECT_EQ(choose_route(h200_wgmma(8, 65536, 64, 512, 4)), Route::kWgmma);
  expect_route({{8, 200, 64, 512},
                {8, 128, 64, 1024},
                {8, 64, 64, 4096},
                {8, 8192, 16, 512},
                {8, 8192, 64, 16512},
                {16, 8192, 64, 512}},
               2, Route::kWgmmaStationary, false);
  // From 64 of those tiles to one a multiprocessor, up to 8 MiB of weight:
  // the ping-pong schedule.
  EXPECT_EQ(choose_route(h200_wgmma(32, 8192, 128, 256, 2)),
            Route::kWgmmaPingpong);
  EXPECT_EQ(choose_route(h200_wgmma(32, 2048, 128, 1024, 2)),
            Route::kWgmmaPingpong);
  // Contractions of 2048 over four rows a column or more, and of 4096 over
  // 512 rows or more, in 8 to 16 of the split's 128 x 128 tiles or 33 and
  // more, and from 17 to 32 tiles a contraction of 4096 over 640 rows or
  // more; contractions of 4096 and more over 128 to 511 rows in 8 to 16
  // tiles up to K = 1024; contractions of 4096 and 8192 over 128 to 639
  // rows in 8 to 32 tiles, but for two row tiles past 1536 columns: the
  // cluster split; other contractions or fewer rows: another route.
  for (const auto& c :
       {SplitCase{32, 1024, 256, true}, {16, 1024, 256, true},
        {32, 2048, 512, true},          {32, 4096, 256, true},
        {16, 4096, 256, true},          {32, 512, 256, true},
        {32, 512, 2048, true},          {32, 1024, 1024, true},
        {32, 2048, 256, true},          {32, 640, 512, true},
        {32, 768, 640, true},           {32, 512, 1024, true},
        {16, 2048, 256, false},         {32, 256, 1024, true},
        {32, 128, 1024, true},          {64, 128, 1024, true},
        {32, 128, 2048, true},          {32, 256, 2048, false},
        {32, 128, 4096, true},          {32, 128, 3072, true},
        {32, 384, 1024, true},          {32, 512, 768, true},
        {32, 448, 1024, true},          {32, 256, 1536, true},
        {32, 128, 1536, true},          {64, 128, 4096, true},
        {64, 256, 2048, false},         {64, 200, 2048, false},
        {64, 200, 1536, true},          {64, 140, 1024, true},
        {32, 100, 4096, false},         {32, 64, 4096, false},
        {16, 256, 2048, false},         {16, 128, 4096, false},
        {128, 128, 2048, false},        {32, 64, 1024, false},
        {32, 128, 512, false},          {16, 1024, 1024, false},
        {8, 4096, 512, false},          {64, 1024, 256, false}}) {
    EXPECT_EQ(
        choose_route(h200_wgmma(c.R, c.B, 128, c.K, 2)) == Route::kWgmmaSplit,
        c.split)
        << c.R << "," << c.B << ",128," << c.K;
  }
  // float32 has no cluster split.
  EXPECT_EQ(choose_route(h200_wgmma(32, 1024, 128, 256, 4)), Route::kCublasCat);
  // Fewer tiles, tiles between one and two a multiprocessor, or more
  // weight: cuBLAS.
  EXPECT_EQ(choose_route(h200_wgmma(16, 512, 64, 1024, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200_wgmma(8, 4352, 128, 1024, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200_wgmma(32, 512, 128, 4096, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200_wgmma(16, 2048, 128, 16384, 2)),
            Route::kCublasCat);
  // float32 through three TF32 products from 64 of its 128 x 128 tiles,
  // whatever the weight; where TF32 is allowed, one TF32 pass from 128 of
  // the 128 x 256 tiles up to K = 4096, R * H from 512 and 128 MiB of
  // weight; cuBLAS keeps fewer tiles, longer K, shorter contractions or
  // more weight under TF32, and float64; so do builds without the kernel.
  EXPECT_EQ(choose_route(h200_wgmma(32, 4096, 128, 4096, 4)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(8, 1024, 64, 1024, 4)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(32, 256, 128, 4096, 4)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(16, 2048, 128, 16384, 4)), Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(4, 2048, 64, 256, 4)), Route::kCublasCat);
  // ... and from 64 rows over many columns where the streaming and warp-mma
  // kernels' row tiles would each read the weight: contractions up to 512
  // from 64 rows, up to 2048 from 128; longer ones, or fewer rows, stay.
  expect_route({{8, 128, 64, 16384},
                {8, 64, 64, 16384},
                {4, 128, 64, 16384},
                {8, 128, 64, 8192},
                {16, 128, 64, 16384},
                {16, 128, 128, 8192}},
               4, Route::kWgmma);
  EXPECT_EQ(choose_route(h200_wgmma(32, 128, 128, 4096, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200_wgmma(16, 64, 128, 8192, 4)), Route::kStream);
  EXPECT_NE(choose_route(h200_wgmma(8, 32, 64, 16384, 4)), Route::kWgmma);
  struct Tf32Case {
    int64_t R, B, H, K;
    Route route;
  };
  for (const auto& c : {Tf32Case{32, 4096, 128, 4096, Route::kWgmma},
                        {32, 4096, 128, 1024, Route::kWgmma},
                        {8, 65536, 64, 512, Route::kWgmma},
                        {64, 4096, 128, 4096, Route::kWgmma},
                        {32, 512, 128, 4096, Route::kCublasCat},
                        {16, 2048, 128, 16384, Route::kCublasCat},
                        {4, 65536, 64, 512, Route::kCublasCat},
                        {128, 4096, 128, 4096, Route::kCublasCat}}) {
    Problem tf32 = h200_wgmma(c.R, c.B, c.H, c.K, 4);
    tf32.tf32_allowed = true;
    EXPECT_EQ(choose_route(tf32), c.route)
        << c.R << "," << c.B << "," << c.H << "," << c.K << " under TF32";
  }
  EXPECT_EQ(choose_route(h200_wgmma(32, 4096, 128, 4096, 8)),
            Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(32, 4096, 128, 4096, 2)), Route::kCublasCat);
  // Few rows stay on the warp-mma kernel, or past 8 rows and 64 MiB of
  // weight on cuBLAS.
  EXPECT_EQ(choose_route(h200_wgmma(32, 8, 128, 65536, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200_wgmma(32, 16, 128, 65536, 2)), Route::kCublasCat);
}

// An H100 as the torch-facing side describes it: the H200's multiprocessors,
// slower memory (HBM3: 2.619 GHz, two transfers a clock, 5120 bits).
Problem h100_wgmma(int64_t R, int64_t B, int64_t H, int64_t K,
                   int element_size) {
  Problem p = h200_wgmma(R, B, H, K, element_size);
  p.memory_gbps = 3352;
  return p;
}

TEST(KernelChoice, SlowerMemoryLeavesTheSplitsNarrowMarginsToCublas) {
  // Each of these is the cluster split's on the H200. On slower memory it
  // keeps whole or more than half-full last row tiles, up to 32 tiles, and
  // one row tile only up to 1536 columns; the others take cat + cuBLAS, not
  // the next fused route.
  for (const auto& c :
       {SplitCase{32, 128, 1024, true}, {64, 128, 1024, true},
        {32, 128, 1536, true},          {32, 224, 1024, true},
        {32, 256, 1024, true},          {32, 256, 1536, true},
        {32, 384, 1024, true},          {32, 512, 1024, true},
        {64, 256, 1024, true},          {64, 512, 1024, true},
        {32, 144, 1024, false},         {32, 160, 1024, false},
        {32, 192, 1024, false},         {64, 160, 1024, false},
        {32, 160, 1536, false},         {32, 320, 1024, false},
        {32, 640, 1024, false},         {32, 1024, 1024, false},
        {32, 512, 2048, false},         {32, 128, 2048, false},
        {32, 128, 4096, false},         {64, 128, 2048, false}}) {
    SCOPED_TRACE(::testing::Message() << c.R << "," << c.B << ",128," << c.K);
    EXPECT_EQ(choose_route(h200_wgmma(c.R, c.B, 128, c.K, 2)),
              Route::kWgmmaSplit);
    EXPECT_EQ(choose_route(h100_wgmma(c.R, c.B, 128, c.K, 2)),
              c.split ? Route::kWgmmaSplit : Route::kCublasCat);
  }
  // Memory of unknown speed counts as slower; x's gathered view keeps its
  // own cuBLAS route.
  Problem p = h200_wgmma(32, 160, 128, 1024, 2);
  p.memory_gbps = 0;
  EXPECT_EQ(choose_route(p), Route::kCublasCat);
  p.x_gathered_view = true;
  EXPECT_EQ(choose_route(p), Route::kCublasView);
  // The other routes keep the H200's table: decode streams.
  EXPECT_EQ(choose_route(h100_wgmma(32, 16, 128, 4096, 2)), Route::kStream);
}

TEST(KernelChoice, HalfTypesWhoseOutRowsCublasStoresSlowlyTakeTheHopperKernel) {
  // K not a multiple of 8 leaves out's rows unaligned: where cuBLAS took
  // the aligned problem, the cluster split where it runs, else ping-pong
  // where its tiles fit the multiprocessors, else the shared tiles.
  expect_route({{32, 512, 128, 4096}, {16, 256, 64, 4096}}, 2,
               Route::kCublasCat);
  expect_route({{16, 256, 64, 4095},
                {16, 512, 128, 2047},
                {32, 64, 128, 4095},
                {8, 40, 64, 8191}},
               2, Route::kWgmmaSplit);
  expect_route({{32, 512, 128, 4095}, {32, 512, 128, 4094}}, 2,
               Route::kWgmmaPingpong);
  expect_route({{32, 1024, 128, 4095}, {32, 2304, 128, 4095}}, 2,
               Route::kWgmma);
  // The split keeps them on slower memory too, where it leaves aligned
  // ones to cuBLAS.
  EXPECT_EQ(choose_route(h100_wgmma(32, 128, 128, 4095, 2)),
            Route::kWgmmaSplit);
  EXPECT_EQ(choose_route(h100_wgmma(32, 128, 128, 4096, 2)), Route::kCublasCat);
  // The fused decode kernels keep their rows, float32 its own rules.
  EXPECT_EQ(choose_route(h200_wgmma(16, 33, 64, 2047, 2)), Route::kStream);
  EXPECT_EQ(choose_route(h200_wgmma(2, 64, 32, 999, 2)), Route::kWarpMma);
  EXPECT_EQ(choose_route(h200_wgmma(8, 48, 64, 21227, 4)), Route::kCublasCat);
  // Without the Hopper kernel, cuBLAS.
  Problem p = h200(32, 512, 128, 4095, 2);
  EXPECT_EQ(choose_route(p), Route::kCublasCat);
}

TEST(KernelChoice, UnalignedOutTakesHalfTypeDecodeAndTf32FromCublasToo) {
  // Past 64 MiB of weight cuBLAS takes the half types' decode where out's
  // rows are aligned; where they are not, the streaming kernel.
  expect_route({{64, 16, 128, 8192}, {32, 16, 128, 16384}}, 2,
               Route::kCublasCat);
  expect_route({{64, 16, 128, 8191},
                {32, 16, 128, 16383},
                {64, 12, 128, 8190},
                {64, 32, 128, 8191}},
               2, Route::kStream);
  // Under TF32, float32 with unaligned out takes the one-pass Hopper
  // instance where cuBLAS took the aligned problem.
  for (const auto& [K, aligned_route] :
       {std::pair{4096, Route::kCublasCat}, std::pair{4095, Route::kWgmma},
        std::pair{4094, Route::kWgmma}}) {
    SCOPED_TRACE(::testing::Message() << "K " << K);
    Problem p = h200_wgmma(32, 512, 128, K, 4);
    p.tf32_allowed = true;
    EXPECT_EQ(choose_route(p), aligned_route);
    p = h200_wgmma(16, 256, 64, K, 4);
    p.tf32_allowed = true;
    EXPECT_EQ(choose_route(p), aligned_route);
    // float32's three products keep their own rules.
    p.tf32_allowed = false;
    EXPECT_EQ(choose_route(p), choose_route(h200_wgmma(16, 256, 64, 4096, 4)));
  }
  // Not where its 128 x 256 tiles are fewer than 32, nor past the K and
  // the contractions measured.
  for (const Shape& s : {Shape{32, 64, 128, 4095}, Shape{32, 128, 128, 4095},
                         Shape{8, 256, 64, 1023}, Shape{32, 512, 128, 8191},
                         Shape{2, 1024, 64, 4095}}) {
    Problem p = h200_wgmma(s[0], s[1], s[2], s[3], 4);
    p.tf32_allowed = true;
    EXPECT_EQ(choose_route(p), Route::kCublasCat)
        << s[0] << "," << s[1] << "," << s[2] << "," << s[3];
  }
}

TEST(KernelChoice, ShortFloatContractionsNeedAFullLastRowTile) {
  // float32's three products over contractions below 256 keep their last
  // row tile at least three-quarters full; emptier ones take cat + cuBLAS,
  // not the next fused route.
  expect_route({{4, 26, 32, 9768},
                {3, 42, 32, 31832},
                {1, 179, 96, 10600},
                {2, 64, 32, 16384}},
               4, Route::kCublasCat);
  expect_route({{2, 100, 64, 8192},
                {1, 128, 32, 8192},
                {2, 224, 64, 8192},
                {2, 48, 128, 8192},
                {2, 40, 128, 16384}},
               4, Route::kWgmma);
}

TEST(KernelChoice, FloatHeadsThatLeaveMostOfAStepEmptyTakeCublas) {
  // float32's three products step through a head 32 elements at a time;
  // heads that fill less than three-quarters of their steps over two row
  // tiles of up to 192 rows take cat + cuBLAS, not the next fused route,
  // whether out's rows are aligned or not, whatever K.
  expect_route({{16, 157, 40, 5486},
                {16, 129, 40, 5486},
                {16, 192, 44, 5486},
                {16, 140, 36, 4096},
                {16, 157, 40, 5488},
                {8, 157, 40, 11439},
                {32, 140, 40, 5486},
                {64, 150, 40, 5486}},
               4, Route::kCublasCat);
  // Fuller heads, more rows, and the routes that took fewer rows before
  // keep theirs.
  expect_route({{16, 157, 48, 5486},
                {16, 140, 72, 11439},
                {16, 157, 100, 5486},
                {16, 193, 40, 5486},
                {8, 200, 40, 5486}},
               4, Route::kWgmma);
  expect_route({{16, 140, 40, 3001}, {16, 96, 40, 5486}}, 4, Route::kStream);
  // Half types take one product a step: theirs.
  expect_route({{8, 160, 40, 4096}}, 2, Route::kWgmmaStationary);
}

TEST(KernelChoice, FloatHeadsThatLeaveMostOfAStepEmptyOverFewRowsTakeCublas) {
  // The same heads over one row tile of up to 64 rows, where cat + cuBLAS
  // takes smaller tiles than the kernel's 128 rows, whatever K.
  expect_route({{12, 64, 44, 32768},
                {24, 48, 36, 32768},
                {16, 33, 40, 16384},
                {12, 48, 36, 8192},
                {64, 64, 40, 11440},
                {12, 32, 40, 32768}},
               4, Route::kCublasCat);
  // Fuller heads and more rows keep the kernel; fewer rows keep the
  // streaming kernel where it took them.
  expect_route({{12, 64, 48, 11440},
                {12, 64, 56, 32768},
                {12, 100, 40, 16384},
                {16, 65, 44, 11000}},
               4, Route::kWgmma);
  expect_route({{16, 48, 36, 8192}, {12, 16, 40, 32768}}, 4, Route::kStream);
}

TEST(KernelChoice, FloatStreamsOfShortSlabsPastTwoWavesGiveWay) {
  // float32 streams of several row tiles whose blocks each stream at most
  // 27 stages alone after gathering an x slab, in more than two waves of
  // blocks (up to the three the table allows): the Hopper kernel where the
  // heads fill three-quarters of their 32-element steps, else cat + cuBLAS.
  expect_route({{16, 128, 40, 5486},
                {16, 128, 33, 5486},
                {16, 96, 36, 8192},
                {12, 64, 44, 11000},
                {8, 96, 65, 8192},
                {24, 64, 33, 11000}},
               4, Route::kCublasCat);
  expect_route({{12, 128, 56, 5486},
                {12, 100, 48, 5486},
                {8, 128, 72, 5486},
                {16, 72, 48, 8192},
                {12, 33, 48, 11440}},
               4, Route::kWgmma);
  // Two waves, longer stretches, cluster splits and x in the ring stream.
  expect_route({{16, 96, 40, 5486},
                {32, 128, 33, 2743},
                {48, 100, 33, 2743},
                {16, 128, 64, 5486}},
               4, Route::kStream);
  // Past three waves the table never streamed: its route stands.
  expect_route({{16, 100, 40, 16384}, {16, 96, 44, 16384}}, 4, Route::kWgmma);
}

TEST(KernelChoice, ShortFloatContractionsOfAFewRowsTakeTheWarpMmaKernel) {
  // Contractions below 256, 2 to 16 rows, from 1 MiB of weight.
  expect_route({{1, 2, 64, 4096},
                {1, 16, 64, 4096},
                {1, 8, 128, 16384},
                {1, 16, 112, 18224},
                {2, 2, 96, 16384}},
               4, Route::kWarpMma);
  // 17 to 64 rows below 2 MiB of weight.
  expect_route({{1, 36, 80, 1352},
                {1, 24, 80, 1352},
                {1, 64, 80, 1352},
                {1, 36, 80, 4096},
                {4, 36, 32, 1352}},
               4, Route::kWarpMma);
  EXPECT_NE(choose_route(h200_wgmma(1, 42, 32, 31832, 4)), Route::kWarpMma);
  Problem one_head = h200_wgmma(1, 96, 80, 1352, 4);
  one_head.x_gathered_view = true;
  EXPECT_EQ(choose_route(one_head), Route::kCublasView);
  // One row, more rows, less weight, or TF32 allowed: as before.
  EXPECT_EQ(choose_route(h200_wgmma(2, 1, 64, 16384, 4)), Route::kStream);
  EXPECT_EQ(choose_route(h200_wgmma(4, 12, 32, 56, 4)), Route::kWarpDot);
  EXPECT_EQ(choose_route(h200_wgmma(3, 4, 64, 582, 4)), Route::kWarpDot);
  EXPECT_NE(choose_route(h200_wgmma(1, 24, 128, 16384, 4)), Route::kWarpMma);
  Problem tf32 = h200_wgmma(1, 16, 64, 16384, 4);
  tf32.tf32_allowed = true;
  EXPECT_NE(choose_route(tf32), Route::kWarpMma);
}

TEST(KernelChoice, HalfTypesOfSeventeenToThirtyTwoRowsStreamOnFullGrids) {
  // One row tile of 32 streams where x rides in the ring (H a multiple of a
  // stage, 64 half elements) and its blocks take 70% of the multiprocessors
  // or more in one wave; else cat + cuBLAS takes the problem.
  expect_route({{32, 28, 80, 5400},
                {32, 32, 80, 4096},
                {16, 28, 80, 5400},
                {32, 28, 96, 5400},
                {8, 24, 80, 8192},
                {32, 28, 128, 4608},
                {32, 28, 128, 5400},
                {12, 24, 128, 11344}},
               2, Route::kCublasCat);
  expect_route({{32, 28, 128, 2048},
                {32, 28, 128, 4096},
                {32, 32, 128, 8192},
                {16, 24, 128, 8192},
                {24, 24, 128, 4096},
                {32, 20, 128, 6144}},
               2, Route::kStream);
  // Past 32 rows (the short contractions' band) x may sit in a slab.
  expect_route({{32, 64, 80, 256}, {16, 128, 96, 512}}, 2, Route::kStream);
}

TEST(KernelChoice, FloatPastOneRowTileStreamsInThreeWavesAtMost) {
  // Two row tiles of 32 rows stream in up to three waves of blocks; one
  // row tile streams in more.
  expect_route({{8, 48, 64, 12288}, {8, 33, 64, 8192}, {8, 24, 64, 32768}}, 4,
               Route::kStream);
  // Past three waves the three-product Hopper kernel takes them where the
  // copy engine can store out's rows,
  expect_route({{8, 48, 64, 16384},
                {8, 40, 64, 14000},
                {16, 48, 64, 32768},
                {32, 48, 128, 32768}},
               4, Route::kWgmma);
  // and where it cannot (K not a multiple of 4), where its tiles (of 128
  // columns) fill two-thirds to all of one wave over R*H of 512 or more;
  expect_route({{8, 48, 64, 16383},
                {16, 48, 64, 16383},
                {8, 33, 64, 16895},
                {32, 48, 128, 16383}},
               4, Route::kWgmma);
  // fewer tiles stream, as where out's rows are aligned;
  expect_route({{8, 64, 64, 10239}, {8, 64, 64, 8191}}, 4, Route::kStream);
  // more tiles, or shorter contractions, take cat + cuBLAS, up to 64 rows;
  // past them the Hopper kernel still wins.
  expect_route({{8, 48, 64, 16897},
                {8, 48, 32, 16383},
                {8, 61, 64, 21227},
                {12, 50, 64, 21181},
                {8, 48, 64, 21226},
                {16, 48, 64, 21227},
                {8, 36, 64, 21227},
                {8, 64, 64, 21227}},
               4, Route::kCublasCat);
  expect_route({{8, 128, 64, 21227}, {8, 209, 64, 21227}}, 4, Route::kWgmma);
}

TEST(KernelChoice, HalfTypesWithXInASlabKeepTheWarpMmaKernel) {
  // Up to 16 rows and 64 MiB the streaming kernel takes 16-bit problems
  // from the warp-mma kernel only where x's stage tiles ride in its ring
  // (H a multiple of 64 half elements).
  expect_route({{32, 16, 80, 4096},
                {16, 14, 112, 4968},
                {16, 14, 112, 8192},
                {32, 6, 112, 8192},
                {64, 8, 96, 4096},
                {16, 16, 80, 16384}},
               2, Route::kWarpMma);
  expect_route({{32, 16, 128, 4096}, {16, 14, 128, 8192}, {64, 8, 128, 4096}},
               2, Route::kStream);
}

TEST(KernelChoice, HalfTypesPastThirtyTwoRowsStreamOrTakeTheWarpMmaKernel) {
  // Fewer than 1024 columns, up to 1 MiB of weight and 131072 outputs.
  expect_route({{8, 64, 64, 256},
                {8, 512, 64, 256},
                {8, 128, 64, 512},
                {4, 256, 64, 256},
                {16, 128, 128, 256}},
               2, Route::kWarpMma);
  EXPECT_EQ(choose_route(h200_wgmma(8, 1024, 64, 256, 2)),
            Route::kWgmmaStationary);
  EXPECT_NE(choose_route(h200_wgmma(8, 128, 64, 256, 4)), Route::kWarpMma);
  // Contractions past the stationary weight's 8 stages, up to 256 rows,
  // whose 32-row tiles read up to 16 MiB of weight between them.
  for (const auto& s : {Shape{32, 64, 128, 256},
                        {32, 64, 128, 1024},
                        {32, 128, 128, 256},
                        {32, 128, 128, 512},
                        {32, 256, 128, 256},
                        {16, 128, 128, 1024}}) {
    const RouteChoice choice = choose(h200_wgmma(s[0], s[1], s[2], s[3], 2));
    EXPECT_EQ(choice.route, Route::kStream)
        << s[0] << "," << s[1] << "," << s[2] << "," << s[3];
    ASSERT_TRUE(choice.stream.has_value());
    EXPECT_EQ(choice.stream->rows_per_block, 32);
  }
  expect_route({{32, 512, 128, 256}, {16, 128, 128, 2048}, {8, 128, 64, 2048}},
               2, Route::kStream, false);
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

TEST(KernelChoice, SmallProblemsPastTheTablesTakeAFusedKernel) {
  // Few warps over a long contraction past 16 rows, the weight in L2: the
  // warp-dot kernel, ahead of the other tables.
  for (int e : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "element size " << e);
    expect_route({{64, 18, 112, 32},
                  {64, 62, 112, 16},
                  {32, 128, 64, 16},
                  {16, 64, 128, 32}},
                 e, Route::kWarpDot);
    // More warps, a shorter contraction or decode's rows: as before.
    EXPECT_NE(choose_route(h200(24, 77, 96, 29, e)), Route::kWarpDot);
    EXPECT_NE(choose_route(h200(32, 36, 40, 187, e)), Route::kWarpDot);
    EXPECT_EQ(choose_route(h200(32, 2, 128, 512, 2)), Route::kStream);
  }
  // Left to cuBLAS by the tables, up to 4 MiB of weight read a tile of 32
  // rows: float32 streams, or takes the warp-mma kernel's three products
  // over contractions below 512; half types stream up to 128 rows.
  expect_route({{24, 77, 96, 29}, {4, 23, 256, 200}, {8, 128, 64, 256}}, 4,
               Route::kStream);
  expect_route({{3, 142, 80, 184}, {8, 88, 32, 387}, {4, 64, 64, 1000}}, 4,
               Route::kWarpMma);
  expect_route({{4, 23, 256, 200}, {64, 23, 80, 88}, {32, 26, 96, 376}}, 2,
               Route::kStream);
  // Heads not in 16-byte vectors: the warp-dot kernel's element-wide loads
  // up to 2048 warps (half types, over contractions up to 512) or 4096
  // (float32); where the copy engine reads the weight, the streaming
  // kernel's x slab but for float32's contractions below 512.
  for (int e : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "element size " << e);
    for (const auto& s : {Shape{3, 20, 33, 80},
                          {7, 64, 33, 128},
                          {5, 7, 13, 9},
                          {6, 4, 33, 2000},
                          {12, 90, 33, 32}}) {
      EXPECT_EQ(choose_route(h200_odd_rows(s, e, false)), Route::kWarpDot);
    }
    for (const auto& s : {Shape{9, 200, 33, 200}, {2, 100, 33, 700}}) {
      EXPECT_EQ(choose_route(h200_odd_rows(s, e, false)), Route::kCublasCat);
    }
  }
  EXPECT_EQ(choose_route(h200_odd_rows({63, 32, 33, 64}, 4, false)),
            Route::kWarpDot);
  EXPECT_EQ(choose_route(h200_odd_rows({31, 8, 33, 1000}, 2, false)),
            Route::kCublasCat);
  // 3600 warps.
  EXPECT_EQ(choose_route(h200_odd_rows({13, 48, 33, 300}, 2, false)),
            Route::kCublasCat);
  for (const auto& s : {Shape{12, 90, 33, 32}, {4, 12, 33, 1024}}) {
    EXPECT_EQ(choose_route(h200_odd_rows(s, 4, true)), Route::kWarpDot);
  }
  for (const auto& s : {Shape{24, 205, 33, 32}, {32, 100, 33, 64}}) {
    EXPECT_EQ(choose_route(h200_odd_rows(s, 4, true)), Route::kStream);
  }
  // More read (float32 past it only with R*H >= 512), half types past 128
  // rows, TF32, x's own view, or another GPU: cuBLAS.
  EXPECT_EQ(choose_route(h200(4, 129, 64, 4096, 4)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(8, 64, 64, 4096, 2)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(4, 161, 64, 2380, 4)), Route::kCublasCat);
  EXPECT_EQ(choose_route(h200(4, 161, 64, 1024, 2)), Route::kCublasCat);
  Problem tf32 = h200(24, 77, 96, 29, 4);
  tf32.tf32_allowed = true;
  EXPECT_EQ(choose_route(tf32), Route::kCublasCat);
  Problem viewed = h200(1, 200, 128, 512, 4);
  viewed.x_gathered_view = true;
  EXPECT_EQ(choose_route(viewed), Route::kCublasView);
  Problem ampere = h200(24, 77, 96, 29, 4);
  ampere.arch = 80;
  EXPECT_EQ(choose_route(ampere), Route::kCublasCat);
  // Past the longest contraction measured, cuBLAS.
  EXPECT_EQ(choose_route(h200(64, 27, 256, 56, 2)), Route::kCublasCat);
}

TEST(KernelChoice, RowTileKernelsKeepToTheirMeasuredRanges) {
  // float32 from 65 to 256 rows below 32 MiB of weight streams.
  expect_route({{16, 100, 128, 1024}, {16, 65, 64, 2048}, {8, 256, 128, 3000}},
               4, Route::kStream);
  // The warp-mma kernel's few columns past 32 rows up to contractions of
  // 2048.
  EXPECT_NE(choose_route(h200_wgmma(64, 87, 256, 32, 2)), Route::kWarpMma);
  // Half types past 32 rows stream x from a slab up to 1024 columns.
  expect_route({{8, 105, 80, 1416}}, 2, Route::kCublasCat);
  // Unaligned out below 512 rows: ping-pong and the shared tiles leave
  // half types to the other routes (the split keeps its own).
  expect_route({{16, 157, 40, 5486}}, 2, Route::kCublasCat);
  expect_route({{3, 54, 80, 3814}}, 2, Route::kStream);
}

}  // namespace
}  // namespace fgl::cuda
