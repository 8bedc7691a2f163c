// The AVX-512 CPU kernel on its own, so that every tile shape (1-4 output
// features x 1-4 rows) and every h tail runs in each of its types whatever
// routing the op applies; skipped on CPUs without AVX-512 BF16.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "cpu/avx512_dot_kernel.h"
#include "cpu/cpu_route.h"
#include "make_params.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

template <typename T>
at::Tensor run_kernel(const at::Tensor& x, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias) {
  const detail::GatherLinearSizes sizes{x.size(0), x.size(1), x.size(2),
                                        weight.size(0)};
  auto out = at::full({sizes.B, sizes.K}, NAN, x.options());
  // Every tile in one call, in order: the kernel itself, without threads.
  cpu::avx512_dot_gather_linear(
      detail::make_params<T, T>(x, weight, bias, out, sizes), 0,
      cpu::avx512_dot_tiles(sizes.B, sizes.R, sizes.H, sizes.K).count);
  return out;
}

at::Tensor run_kernel(const at::Tensor& x, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias) {
  switch (x.scalar_type()) {
    case at::kDouble:
      return run_kernel<double>(x, weight, bias);
    case at::kFloat:
      return run_kernel<float>(x, weight, bias);
    case at::kHalf:
      return run_kernel<at::Half>(x, weight, bias);
    default:
      return run_kernel<at::BFloat16>(x, weight, bias);
  }
}

// The kernel against the float64 reference, with the rounding bound of
// sums whose terms cancel (a single output of a few hundred terms can).
::testing::AssertionResult kernel_matches_reference(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  const auto bias_abs =
      bias ? std::optional<at::Tensor>(bias->abs()) : std::nullopt;
  return matches_reference(
      run_kernel(x, weight, bias), reference_gather_linear(x, weight, bias),
      reference_gather_linear(x.abs(), weight.abs(), bias_abs));
}

class Avx512DotKernel : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override {
    if (!cpu::detect_features().avx512_bf16) {
      GTEST_SKIP() << "this CPU lacks AVX-512 BF16";
    }
  }
  at::Tensor random(at::IntArrayRef sizes) {
    return random_tensor(sizes, GetParam(), at::Device(at::kCPU));
  }
};

TEST_P(Avx512DotKernel, EveryTileAndTailMatchesFloat64) {
  for (const int64_t H : {1, 7, 15, 16, 17, 31, 32, 33, 64, 70}) {
    for (const int64_t B : {1, 2, 3, 4, 5, 9}) {
      for (const int64_t K : {1, 2, 3, 4, 7, 13}) {
        const int64_t R = 3;
        const auto x = random({R, B, H});
        const auto w = random({K, R * H});
        const auto b = random({K});
        for (const bool with_bias : {true, false}) {
          const std::optional<at::Tensor> bias =
              with_bias ? std::optional<at::Tensor>(b) : std::nullopt;
          EXPECT_TRUE(kernel_matches_reference(x, w, bias))
              << "H=" << H << " B=" << B << " K=" << K << " bias=" << with_bias;
        }
      }
    }
  }
}

TEST_P(Avx512DotKernel, ReadsStridedRowsAndHeads) {
  // Padded rows of x and of the weight, a batch-major x, a strided out and
  // bias: only h and c must be unit-stride.
  const auto x = random({6, 4, 40}).narrow(2, 0, 35).permute({1, 0, 2});
  const auto w = random({9, 150}).narrow(1, 0, 4 * 35);
  const auto b = random({18}).slice(0, 0, 18, 2);
  EXPECT_TRUE(kernel_matches_reference(x, w, b));
}

TEST_P(Avx512DotKernel, NanAndInfPropagate) {
  auto x = random({2, 5, 40});
  const auto w = random({6, 80});
  x[0][1][3] = NAN;
  x[1][2][39] = INFINITY;  // in the masked tail
  const auto out = run_kernel(x, w, std::nullopt);
  const auto ref = reference_gather_linear(x, w, std::nullopt);
  EXPECT_TRUE(at::equal(out.isnan(), ref.isnan()));
  EXPECT_TRUE(at::equal(out.isinf(), ref.isinf()));
  EXPECT_TRUE(out[1].isnan().all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Avx512DotKernel,
                         ::testing::Values(at::kDouble, at::kFloat, at::kHalf,
                                           at::kBFloat16),
                         [](const auto& info) {
                           return std::string(c10::toString(info.param));
                         });

}  // namespace
}  // namespace fgl::testing
