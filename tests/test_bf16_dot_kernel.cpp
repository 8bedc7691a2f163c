// The AVX512-BF16 CPU kernel on its own, so that every tile shape (1-4
// output features x 1-4 rows) and every h tail runs whatever routing the op
// applies; skipped on CPUs without AVX512-BF16.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "cpu/bf16_dot_kernel.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

at::Tensor run_kernel(const at::Tensor& x, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias) {
  const int64_t R = x.size(0), B = x.size(1), H = x.size(2);
  const int64_t K = weight.size(0);
  auto out = at::full({B, K}, NAN, x.options());
  cpu::bf16_dot_gather_linear(
      {x.const_data_ptr<at::BFloat16>(), weight.const_data_ptr<at::BFloat16>(),
       bias ? bias->const_data_ptr<at::BFloat16>() : nullptr,
       out.mutable_data_ptr<at::BFloat16>(), R, B, H, K, x.stride(0),
       x.stride(1), weight.stride(0), bias ? bias->stride(0) : 0, out.stride(0),
       out.stride(1)});
  return out;
}

TEST(Bf16DotKernel, EveryTileAndTailMatchesFloat64) {
  if (!cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const at::Device cpu(at::kCPU);
  for (const int64_t H : {1, 7, 31, 32, 33, 64, 70}) {
    for (const int64_t B : {1, 2, 3, 4, 5, 9}) {
      for (const int64_t K : {1, 2, 3, 4, 7, 13}) {
        const int64_t R = 3;
        const auto x = random_tensor({R, B, H}, at::kBFloat16, cpu);
        const auto w = random_tensor({K, R * H}, at::kBFloat16, cpu);
        const auto b = random_tensor({K}, at::kBFloat16, cpu);
        for (const bool with_bias : {true, false}) {
          const std::optional<at::Tensor> bias =
              with_bias ? std::optional<at::Tensor>(b) : std::nullopt;
          EXPECT_TRUE(matches_reference(run_kernel(x, w, bias),
                                        reference_gather_linear(x, w, bias)))
              << "H=" << H << " B=" << B << " K=" << K << " bias=" << with_bias;
        }
      }
    }
  }
}

TEST(Bf16DotKernel, ReadsStridedRowsAndHeads) {
  if (!cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const at::Device cpu(at::kCPU);
  // Padded rows of x and of the weight, a batch-major x, a strided out and
  // bias: only h and c must be unit-stride.
  const auto x = random_tensor({6, 4, 40}, at::kBFloat16, cpu)
                     .narrow(2, 0, 35)
                     .permute({1, 0, 2});  // [R=4, B=6, H=35]
  const auto w =
      random_tensor({9, 150}, at::kBFloat16, cpu).narrow(1, 0, 4 * 35);
  const auto b = random_tensor({18}, at::kBFloat16, cpu).slice(0, 0, 18, 2);
  EXPECT_TRUE(
      matches_reference(run_kernel(x, w, b), reference_gather_linear(x, w, b)));
}

TEST(Bf16DotKernel, NanAndInfPropagate) {
  if (!cpu::has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const at::Device cpu(at::kCPU);
  auto x = random_tensor({2, 5, 40}, at::kBFloat16, cpu);
  const auto w = random_tensor({6, 80}, at::kBFloat16, cpu);
  x[0][1][3] = NAN;
  x[1][2][39] = INFINITY;  // in the masked tail
  const auto out = run_kernel(x, w, std::nullopt);
  const auto ref = reference_gather_linear(x, w, std::nullopt);
  EXPECT_TRUE(at::equal(out.isnan(), ref.isnan()));
  EXPECT_TRUE(at::equal(out.isinf(), ref.isinf()));
  EXPECT_TRUE(out[1].isnan().all().item<bool>());
}

}  // namespace
}  // namespace fgl::testing
