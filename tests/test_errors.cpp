// Every input check of fgl::gather_linear, asserted by message content: each
// names the argument, what was expected and what came.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

at::Tensor rand_cpu(at::IntArrayRef sizes, at::ScalarType dtype = at::kFloat) {
  return random_tensor(sizes, dtype, at::kCPU);
}

TEST(GatherLinearErrors, UndefinedTensors) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(at::Tensor(), rand_cpu({5, 8}));
      },
      {"x is an undefined tensor"}));
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), at::Tensor());
      },
      {"weight is an undefined tensor"}));
}

TEST(GatherLinearErrors, XRank) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({3, 8}), rand_cpu({5, 8}));
      },
      {"x must be 3-D (R, B, H)", "got a 2-D tensor of shape [3, 8]"}));
}

TEST(GatherLinearErrors, WeightRank) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8, 1}));
      },
      {"weight must be 2-D (K, R*H)", "got a 3-D tensor of shape [5, 8, 1]"}));
}

TEST(GatherLinearErrors, WeightColumnsMustBeRTimesH) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 9}));
      },
      {"weight must have R*H = 8 columns (R=2, H=4",
       "got weight of shape [5, 9]"}));
}

TEST(GatherLinearErrors, BiasLength) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8}), rand_cpu({6}));
      },
      {"bias must be 1-D of length K = 5", "got shape [6]"}));
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8}), rand_cpu({1, 5}));
      },
      {"bias must be 1-D of length K = 5", "got shape [1, 5]"}));
}

TEST(GatherLinearErrors, UnsupportedDtype) {
  const auto x = at::ones({2, 3, 4}, at::kInt);
  const auto w = at::ones({5, 8}, at::kInt);
  EXPECT_TRUE(throws_with([&] { gather_linear(x, w); },
                          {"x has unsupported dtype Int",
                           "expected one of float32, float64, float16, "
                           "bfloat16"}));
}

TEST(GatherLinearErrors, ComplexAndFloat8AreUnsupported) {
  for (const auto dtype : {at::kComplexFloat, at::kFloat8_e4m3fn,
                           at::kFloat8_e5m2, at::kBool, at::kLong}) {
    SCOPED_TRACE(c10::toString(dtype));
    const auto x = at::zeros({2, 3, 4}, dtype);
    const auto w = at::zeros({5, 8}, dtype);
    EXPECT_TRUE(throws_with([&] { gather_linear(x, w); },
                            {"x has unsupported dtype",
                             "expected one of float32, float64, float16, "
                             "bfloat16"}));
  }
}

TEST(GatherLinearErrors, MixedDevicesWithoutAGpu) {
  // CPU and Meta tensors mixed: the same device check as cpu/cuda, which
  // test_gather_linear_cuda.cpp covers where a GPU exists.
  const auto meta = at::TensorOptions().device(at::kMeta);
  EXPECT_TRUE(throws_with(
      [&] {
        gather_linear(rand_cpu({2, 3, 4}), at::empty({5, 8}, meta));
      },
      {"weight must be on x's device cpu", "got meta"}));
  EXPECT_TRUE(throws_with(
      [&] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8}),
                      at::empty({5}, meta));
      },
      {"bias must be on x's device cpu", "got meta"}));
}

TEST(GatherLinearErrors, MixedDtypes) {
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8}, at::kDouble));
      },
      {"weight must have x's dtype Float", "got Double"}));
  EXPECT_TRUE(throws_with(
      [] {
        gather_linear(rand_cpu({2, 3, 4}), rand_cpu({5, 8}),
                      rand_cpu({5}, at::kBFloat16));
      },
      {"bias must have x's dtype Float", "got BFloat16"}));
}

TEST(GatherLinearErrors, OutShapeDtypeAndOverlap) {
  const auto x = rand_cpu({2, 3, 4});
  const auto w = rand_cpu({5, 8});
  auto wrong_shape = at::empty({5, 3});
  EXPECT_TRUE(
      throws_with([&] { gather_linear_out(wrong_shape, x, w); },
                  {"out must have shape (B, K) = (3, 5)", "got [5, 3]"}));
  auto wrong_dtype = at::empty({3, 5}, at::kDouble);
  EXPECT_TRUE(throws_with([&] { gather_linear_out(wrong_dtype, x, w); },
                          {"out must have x's dtype Float", "got Double"}));
  auto expanded = at::empty({1, 5}).expand({3, 5});
  EXPECT_TRUE(throws_with([&] { gather_linear_out(expanded, x, w); },
                          {"more than one element of the written-to tensor"}));
  auto overlaps_weight = w.view({-1}).narrow(0, 0, 15).view({3, 5});
  EXPECT_TRUE(throws_with([&] { gather_linear_out(overlaps_weight, x, w); },
                          {"unsupported operation"}));
}

// out= sharing memory with x through non-dense views, where ATen's overlap
// test cannot decide: the result is the one computed from x as it was.
TEST(GatherLinearErrors, OutOverlappingXThroughStridedViewsReadsXFirst) {
  for (const auto& dev : available_devices()) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << dev << " " << dtype);
      auto buffer = random_tensor({200}, dtype, dev);
      // x [2, 3, 4] with rows 8 apart; out [3, 5] with rows 8 apart,
      // starting inside x's first head.
      const auto x = buffer.as_strided({2, 3, 4}, {24, 8, 1});
      auto out = buffer.as_strided({3, 5}, {8, 1}, 4);
      const auto w = random_tensor({5, 8}, dtype, dev);
      const auto b = random_tensor({5}, dtype, dev);
      const auto x_before = x.clone();
      const auto ref = reference_gather_linear(x_before, w, b);
      gather_linear_out(out, x, w, b);
      EXPECT_TRUE(matches_reference(
          out, ref, reference_gather_linear(x_before.abs(), w.abs(), b.abs())));
    }
  }
}

TEST(GatherLinearErrors, MetaChecksLikeTheRealKernels) {
  const auto opts = at::TensorOptions().device(at::kMeta);
  EXPECT_TRUE(throws_with(
      [&] {
        gather_linear(at::empty({2, 3, 4}, opts), at::empty({5, 9}, opts));
      },
      {"weight must have R*H = 8 columns"}));
}

}  // namespace
}  // namespace fgl::testing
