// Correctness of fgl::gather_linear against the float64 cat+linear reference
// on every available device and supported dtype, over odd sizes and strided
// layouts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <tuple>

#include "cuda/kernel_choice.h"
#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

// How x [R, B, H] is laid out in memory.
enum class XLayout { kContiguous, kBatchMajor, kStridedH, kExpandedB };
// How weight [K, R*H] is laid out in memory.
enum class WLayout { kContiguous, kTransposed, kColumnSlice };

at::Tensor make_x(const Shape& s, XLayout layout, at::ScalarType dtype,
                  const at::Device& dev) {
  switch (layout) {
    case XLayout::kContiguous:
      return random_tensor({s.R, s.B, s.H}, dtype, dev);
    case XLayout::kBatchMajor:  // a [B, R, H] buffer viewed head-major
      return random_tensor({s.B, s.R, s.H}, dtype, dev).permute({1, 0, 2});
    case XLayout::kStridedH:  // every other element of the last dim
      return random_tensor({s.R, s.B, 2 * s.H}, dtype, dev)
          .slice(2, 0, 2 * s.H, 2);
    case XLayout::kExpandedB:  // stride 0 along B
      return random_tensor({s.R, 1, s.H}, dtype, dev).expand({s.R, s.B, s.H});
  }
  return {};
}

at::Tensor make_weight(const Shape& s, WLayout layout, at::ScalarType dtype,
                       const at::Device& dev) {
  const int64_t C = s.R * s.H;
  switch (layout) {
    case WLayout::kContiguous:
      return random_tensor({s.K, C}, dtype, dev);
    case WLayout::kTransposed:
      return random_tensor({C, s.K}, dtype, dev).t();
    case WLayout::kColumnSlice:
      return random_tensor({s.K, C + 3}, dtype, dev).narrow(1, 2, C);
  }
  return {};
}

// A route a problem runs under: the policy's, or one forced on the device's
// backend.
struct ForcedRoute {
  std::string name;
  std::optional<cuda::Route> cuda;
  std::optional<cpu::Route> cpu;
};

// The routes each problem runs under: the policy's, and every other route
// of the device's backend forced (where one cannot run, the policy takes
// over, so the test still checks a result).
std::vector<ForcedRoute> routes(const at::Device& dev) {
  std::vector<ForcedRoute> all{{"policy", std::nullopt, std::nullopt}};
  if (dev.is_cuda()) {
    for (const auto r :
         {cuda::Route::kWarpDot, cuda::Route::kWarpMma, cuda::Route::kStream,
          cuda::Route::kWgmma, cuda::Route::kWgmmaPingpong,
          cuda::Route::kWgmmaSplit, cuda::Route::kWgmmaStationary,
          cuda::Route::kWgmmaPacked, cuda::Route::kTiled}) {
      all.push_back({cuda::route_name(r), r, std::nullopt});
    }
  } else {
    for (const auto r : cpu::kRoutes) {
      if (r == cpu::Route::kDotKernel && !cpu::detect_features().avx512_bf16) {
        continue;  // the policy's route again
      }
      all.push_back({cpu::route_name(r), std::nullopt, r});
    }
  }
  return all;
}

class GatherLinearSweep
    : public ::testing::TestWithParam<std::tuple<Shape, at::ScalarType>> {};

void check_case(const Shape& shape, at::ScalarType dtype, const at::Device& dev,
                bool with_bias, XLayout xl, WLayout wl) {
  const auto x = make_x(shape, xl, dtype, dev);
  const auto w = make_weight(shape, wl, dtype, dev);
  std::optional<at::Tensor> b;
  if (with_bias) b = random_tensor({shape.K}, dtype, dev);
  const auto ref = reference_gather_linear(x, w, b);
  std::optional<at::Tensor> b_abs;
  if (b) b_abs = b->abs();
  const auto ref_abs = reference_gather_linear(x.abs(), w.abs(), b_abs);

  const auto out = gather_linear(x, w, b);
  EXPECT_EQ(out.device(), dev);
  EXPECT_EQ(out.scalar_type(), dtype);
  EXPECT_TRUE(matches_reference(out, ref, ref_abs));

  // The out= variant into a NaN-poisoned buffer: every element must be
  // written.
  auto poisoned = at::full({shape.B, shape.K}, NAN,
                           at::TensorOptions().dtype(dtype).device(dev));
  gather_linear_out(poisoned, x, w, b);
  EXPECT_TRUE(matches_reference(poisoned, ref, ref_abs));
}

TEST_P(GatherLinearSweep, MatchesFloat64CatLinear) {
  const auto [shape, dtype] = GetParam();
  for (const auto& dev : available_devices()) {
    for (const auto& route : routes(dev)) {
      const ScopedRoute forced_cuda(route.cuda);
      const ScopedRoute forced_cpu(route.cpu);
      for (bool with_bias : {true, false}) {
        for (auto xl : {XLayout::kContiguous, XLayout::kBatchMajor,
                        XLayout::kStridedH, XLayout::kExpandedB}) {
          for (auto wl : {WLayout::kContiguous, WLayout::kTransposed,
                          WLayout::kColumnSlice}) {
            SCOPED_TRACE(::testing::Message()
                         << dev << " route=" << route.name << " bias="
                         << with_bias << " x_layout=" << static_cast<int>(xl)
                         << " w_layout=" << static_cast<int>(wl));
            check_case(shape, dtype, dev, with_bias, xl, wl);
          }
        }
      }
    }
  }
}

const Shape kShapes[] = {
    {4, 12, 32, 56},     // the demo problem
    {1, 1, 1, 1},        // smallest
    {1, 7, 33, 1000},    // R = 1, H and K not multiples of 8
    {3, 1, 17, 9},       // B = 1 (decode)
    {2, 0, 8, 5},        // B = 0
    {64, 5, 3, 7},       // large R, tiny heads
    {5, 70, 33, 130},    // several tiles in B and K, with tails
    {32, 20, 128, 72},   // long contraction (4096)
    {8, 1, 64, 300},     // B = 1, vector-friendly: the weight-streaming path
    {3, 4, 16, 77},      // B = 4, weight streaming
    {2, 64, 8, 33},      // B = 64: several row blocks of the streaming path
    {5, 3, 40, 130},     // a contraction shorter than one streaming stage
    {9, 16, 72, 50},     // streaming stages with a partial last one
    {4, 5, 6, 70},       // rows of 16 bytes, heads of 6: x read by elements
    {8, 300, 64, 1024},  // many rows and FLOPs: tensor-core tiles
    {3, 200, 64, 300},   // tensor-core tiles with tails in B and K
    {1, 130, 128, 257},  // R = 1, K odd: out rows not 4-byte aligned
    {2, 129, 40, 72},    // H = 40: a contraction tile zero-filled past H
    {13, 150, 4, 200},   // heads of 4 over many rows: steps of whole heads
    {0, 3, 4, 5},        // R = 0: the bias alone
    {3, 4, 0, 5},        // H = 0: the bias alone
    {2, 3, 4, 0},        // K = 0
};

std::string sweep_name(
    const ::testing::TestParamInfo<GatherLinearSweep::ParamType>& info) {
  std::ostringstream os;
  os << std::get<0>(info.param) << "_"
     << c10::toString(std::get<1>(info.param));
  return os.str();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatherLinearSweep,
    ::testing::Combine(::testing::ValuesIn(kShapes),
                       ::testing::ValuesIn(supported_dtypes())),
    sweep_name);

TEST(GatherLinear, MetaGivesShapeDtypeDeviceOnly) {
  const auto opts = at::TensorOptions().device(at::kMeta).dtype(at::kBFloat16);
  const auto out =
      gather_linear(at::empty({8, 3, 16}, opts), at::empty({40, 128}, opts),
                    at::empty({40}, opts));
  EXPECT_EQ(out.device().type(), at::kMeta);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{3, 40}));
}

}  // namespace
}  // namespace fgl::testing
