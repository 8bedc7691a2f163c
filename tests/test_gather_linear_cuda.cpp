// CUDA-only properties of fgl::gather_linear: stream and device handling.
// Skips where the process sees no GPU.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <gtest/gtest.h>

#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

TEST(GatherLinearCuda, CapturesOnTheCurrentStream) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  // Capture fails if the kernel is enqueued on any stream but the current
  // (capturing) one, e.g. the legacy default stream.
  const at::Device dev(at::kCUDA, 0);
  const auto x = random_tensor({6, 9, 40}, at::kFloat, dev);
  const auto w = random_tensor({70, 240}, at::kFloat, dev);
  const auto b = random_tensor({70}, at::kFloat, dev);
  auto out = at::full({9, 70}, NAN, x.options());

  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool());
    graph.capture_begin();
    gather_linear_out(out, x, w, b);
    graph.capture_end();
  }
  graph.replay();
  at::cuda::device_synchronize();
  EXPECT_TRUE(matches_reference(out, reference_gather_linear(x, w, b)));
}

// The streaming kernel where the sweep's small shapes do not reach: a
// contraction split over a cluster of blocks (decode at 32,16,128,4096), a
// weight ring that wraps around many times (many columns, no split), and
// several row tiles. Each runs twice: the same inputs must give the same
// bits (the cluster reduces in a fixed order, no atomics).
TEST(StreamKernel, IsExactAndDeterministic) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const at::Device dev(at::kCUDA, 0);
  const ScopedRoute forced(cuda::Route::kStream);
  const int64_t shapes[][4] = {{32, 16, 128, 4096},
                               {32, 1, 128, 4096},
                               {16, 3, 128, 9000},
                               {7, 40, 64, 200}};
  for (const auto& s : shapes) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << s[0] << "," << s[1] << "," << s[2]
                                        << "," << s[3] << " " << dtype);
      const auto x = random_tensor({s[0], s[1], s[2]}, dtype, dev);
      const auto w = random_tensor({s[3], s[0] * s[2]}, dtype, dev);
      const auto b = random_tensor({s[3]}, dtype, dev);
      const auto first = gather_linear(x, w, b);
      auto second = at::full_like(first, NAN);
      gather_linear_out(second, x, w, b);
      EXPECT_TRUE(at::equal(first, second));
      EXPECT_TRUE(matches_reference(
          first, reference_gather_linear(x, w, b),
          reference_gather_linear(x.abs(), w.abs(), b.abs())));
    }
  }
}

TEST(GatherLinearCuda, FollowsInputsOffTheCurrentDevice) {
  if (at::getNumGPUs() < 2) GTEST_SKIP() << "needs two CUDA devices";
  // The current device stays cuda:0; the op must run where its inputs are.
  const at::Device dev(at::kCUDA, 1);
  const auto x = random_tensor({3, 10, 24}, at::kHalf, dev);
  const auto w = random_tensor({50, 72}, at::kHalf, dev);
  const auto out = gather_linear(x, w);
  EXPECT_EQ(out.device(), dev);
  EXPECT_TRUE(matches_reference(out, reference_gather_linear(x, w, {})));
}

TEST(GatherLinearCuda, RejectsInputsOnMixedDevices) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this process";
  const auto x = random_tensor({2, 3, 4}, at::kFloat, at::Device(at::kCUDA, 0));
  const auto w = random_tensor({5, 8}, at::kFloat, at::kCPU);
  EXPECT_TRUE(throws_with([&] { gather_linear(x, w); },
                          {"weight must be on x's device cuda:0", "got cpu"}));
  const auto w_cuda = w.to(x.device());
  EXPECT_TRUE(throws_with(
      [&] {
        gather_linear(x, w_cuda, random_tensor({5}, at::kFloat, at::kCPU));
      },
      {"bias must be on x's device cuda:0", "got cpu"}));
}

}  // namespace
}  // namespace fgl::testing
