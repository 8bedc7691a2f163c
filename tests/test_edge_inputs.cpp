// Inputs at the edges of what the op accepts: empty dims, memory shared
// between or within arguments, NaN and Inf, and element offsets past 2^31.
// Each is compared with the path users write today, cat + linear.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

// linear(cat(x.unbind(0), -1), weight, bias) in the inputs' own dtype.
at::Tensor cat_linear(const at::Tensor& x, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias) {
  // cat of no tensors is an error; R = 0 gathers an empty (B, 0) input.
  const auto gathered = x.size(0) == 0 ? at::zeros({x.size(1), 0}, x.options())
                                       : at::cat(x.unbind(0), -1);
  return at::linear(gathered, weight, bias);
}

TEST(GatherLinearEdges, EmptyDimsGiveTheReferenceResult) {
  for (const auto& dev : available_devices()) {
    SCOPED_TRACE(::testing::Message() << dev);
    const auto opts = at::TensorOptions().device(dev);
    const auto bias = random_tensor({5}, at::kFloat, dev);
    // B = 0: an empty (0, K).
    auto out = gather_linear(at::empty({3, 0, 4}, opts),
                             at::ones({5, 12}, opts), bias);
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 5}));
    // R = 0 or H = 0: nothing to sum, the bias broadcast over B (zeros
    // without a bias), as cat + linear gives.
    for (const auto& x_shape :
         {std::vector<int64_t>{0, 3, 4}, std::vector<int64_t>{3, 3, 0}}) {
      const auto x = at::empty(x_shape, opts);
      const auto w = at::empty({5, 0}, opts);
      out = gather_linear(x, w, bias);
      EXPECT_TRUE(at::equal(out, bias.expand({3, 5})));
      EXPECT_TRUE(at::equal(out, cat_linear(x, w, bias)));
      EXPECT_TRUE(at::equal(gather_linear(x, w), at::zeros({3, 5}, opts)));
    }
  }
}

TEST(GatherLinearEdges, SharedAndStrideZeroMemory) {
  for (const auto& dev : available_devices()) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << dev << " " << dtype);
      const int64_t R = 3, B = 5, H = 8, K = 7;
      const auto buf = random_tensor({R * B * H + K * R * H}, dtype, dev);
      // x and weight are views of one buffer, and x overlaps itself: its
      // rows start one element apart.
      const auto x = buf.as_strided({R, B, H}, {2, 1, 1});
      const auto w = buf.narrow(0, 3, K * R * H).view({K, R * H});
      // Stride-0 weight rows and bias.
      const auto w_rows = random_tensor({1, R * H}, dtype, dev).expand({K, -1});
      const auto b = random_tensor({1}, dtype, dev).expand({K});
      for (const auto& weight : {w, w_rows}) {
        const auto ref = reference_gather_linear(x, weight, b);
        const auto ref_abs =
            reference_gather_linear(x.abs(), weight.abs(), b.abs());
        EXPECT_TRUE(
            matches_reference(gather_linear(x, weight, b), ref, ref_abs));
      }
    }
  }
}

// NaN where either is NaN, +-Inf where both are the same infinity; finite
// elements are left to the accuracy tests.
::testing::AssertionResult same_nonfinite_pattern(const at::Tensor& out,
                                                  const at::Tensor& ref) {
  const auto o = out.cpu().to(at::kDouble), r = ref.cpu().to(at::kDouble);
  const bool same = at::equal(o.isnan(), r.isnan()) &&
                    at::equal(o.isposinf(), r.isposinf()) &&
                    at::equal(o.isneginf(), r.isneginf());
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "fused:\n"
                                       << o << "\ncat + linear:\n"
                                       << r;
}

TEST(GatherLinearEdges, NanAndInfPropagateAsInTheReference) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& dev : available_devices()) {
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message() << dev << " " << dtype);
      const int64_t R = 2, B = 4, H = 3, K = 5;
      // Small values: no finite sum may overflow into an Inf of its own.
      auto x = at::rand({R, B, H}, at::kDouble);
      auto w = at::rand({K, R * H}, at::kDouble);
      auto b = at::rand({K}, at::kDouble);
      x[0][0][1] = NAN;  // row 0: NaN everywhere
      w[1][4] = inf;     // column 1: +Inf (x > 0) ...
      x[1][2][1] = 0.0;  // ... but Inf * 0 = NaN in row 2
      w[2][0] = inf;     // column 2: +Inf and -Inf meet: NaN
      w[2][5] = -inf;
      b[3] = -inf;  // column 3: -Inf from the bias
      x = x.to(dev, dtype);
      w = w.to(dev, dtype);
      b = b.to(dev, dtype);
      const auto ref = cat_linear(x, w, b);
      EXPECT_TRUE(same_nonfinite_pattern(gather_linear(x, w, b), ref));
      EXPECT_TRUE(
          same_nonfinite_pattern(gather_linear(x, w), cat_linear(x, w, {})));
      // The pattern itself, so that a reference that lost it fails too.
      const auto r = ref.cpu().to(at::kDouble);
      EXPECT_TRUE(r[0].isnan().all().item<bool>());
      EXPECT_TRUE(r[1][1].isposinf().item<bool>());
      EXPECT_TRUE(r[2][1].isnan().item<bool>());
      EXPECT_TRUE(r[1][2].isnan().item<bool>());
      EXPECT_TRUE(r[1][3].isneginf().item<bool>());
    }
  }
}

// x and weight whose rows lie more than 2^31 elements apart: any 32-bit
// offset arithmetic reads the wrong elements. The buffers are allocated but
// mostly never touched, so only the pages of the views become resident.
void check_offsets_past_2_31(const at::Device& dev, at::ScalarType dtype) {
  const int64_t R = 2, B = 3, H = 64, K = 2;
  const int64_t far = (int64_t{1} << 31) + 64;
  const auto opts = at::TensorOptions().device(dev).dtype(dtype);
  const auto x_buf = at::empty({far + B * H}, opts);
  const auto x = x_buf.as_strided({R, B, H}, {far, H, 1});
  x.copy_(random_tensor({R, B, H}, dtype, dev));
  const auto w_buf = at::empty({far + R * H}, opts);
  const auto w = w_buf.as_strided({K, R * H}, {far, 1});
  w.copy_(random_tensor({K, R * H}, dtype, dev));
  const auto b = random_tensor({K}, dtype, dev);
  ASSERT_GT(x.size(0) * x.stride(0), std::numeric_limits<int32_t>::max());
  const auto ref = reference_gather_linear(x.clone(), w.clone(), b);
  const auto ref_abs = reference_gather_linear(x.abs(), w.abs(), b.abs());
  EXPECT_TRUE(matches_reference(gather_linear(x, w, b), ref, ref_abs));
}

TEST(GatherLinearLarge, OffsetsPast2To31OnCpu) {
  for (const auto dtype : {at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    check_offsets_past_2_31(at::kCPU, dtype);
  }
}

// NOTE: "Gpu", not "Cuda": gpu_check.sh runs '*Cuda*' under compute-sanitizer,
// where tens of GB of untouched allocations would cost minutes.
// Under the policy and every fused kernel forced in turn (one that cannot
// take a problem leaves it to the policy).
TEST(GatherLinearLarge, OffsetsPast2To31OnGpu) {
  if (!at::hasCUDA()) {
    GTEST_SKIP() << "no CUDA device in this process; the CPU variant runs";
  }
  for (const std::optional<cuda::Route> route :
       {std::optional<cuda::Route>{}, std::optional{cuda::Route::kWarpDot},
        std::optional{cuda::Route::kStream}, std::optional{cuda::Route::kWgmma},
        std::optional{cuda::Route::kWgmmaPingpong},
        std::optional{cuda::Route::kWgmmaStationary},
        std::optional{cuda::Route::kTiled}}) {
    const ScopedRoute forced(route);
    for (const auto dtype : supported_dtypes()) {
      SCOPED_TRACE(::testing::Message()
                   << (route ? cuda::route_name(*route) : "policy") << " "
                   << c10::toString(dtype));
      check_offsets_past_2_31(at::Device(at::kCUDA, 0), dtype);
    }
  }
}

}  // namespace
}  // namespace fgl::testing
