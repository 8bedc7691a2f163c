// The GatherLinear module: the fused and the reference forward both match
// the float64 reference, for every dtype, odd sizes, strided x, bias or not.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <string>
#include <tuple>

#include "fgl/models/gather_linear_module.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

using models::GatherLinear;
using models::GatherLinearOptions;

// (R, B, H, K, bias)
class ModelSweep : public ::testing::TestWithParam<
                       std::tuple<int64_t, int64_t, int64_t, int64_t, bool>> {};

std::string sweep_name(
    const ::testing::TestParamInfo<ModelSweep::ParamType>& p) {
  const auto& [R, B, H, K, bias] = p.param;
  return "R" + std::to_string(R) + "_B" + std::to_string(B) + "_H" +
         std::to_string(H) + "_K" + std::to_string(K) +
         (bias ? "_bias" : "_nobias");
}

TEST_P(ModelSweep, BothForwardsMatchTheFloat64Reference) {
  const auto [R, B, H, K, bias] = GetParam();
  for (const auto dtype : supported_dtypes()) {
    for (const auto& device : available_devices()) {
      SCOPED_TRACE(::testing::Message() << dtype << " on " << device);
      GatherLinear model(GatherLinearOptions(R, H, K).bias(bias));
      model->to(device, dtype);
      // Fresh values: the default init is uniform, draw normals instead.
      torch::NoGradGuard no_grad;
      model->proj->weight.copy_(random_tensor({K, R * H}, dtype, device));
      if (bias) {
        model->proj->bias.copy_(random_tensor({K}, dtype, device));
      }
      // x viewed as (R, B, H) from a (B, R, H) buffer: strided.
      const auto x = random_tensor({B, R, H}, dtype, device).transpose(0, 1);
      const auto ref = reference_gather_linear(
          x, model->proj->weight,
          bias ? std::optional<at::Tensor>(model->proj->bias) : std::nullopt);
      const auto fused = model->forward(x);
      EXPECT_EQ(fused.dtype(), dtype);
      EXPECT_EQ(fused.device(), device);
      EXPECT_TRUE(matches_reference(fused, ref));
      EXPECT_TRUE(matches_reference(model->forward_reference(x), ref));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ModelSweep,
                         ::testing::Values(std::make_tuple(4, 12, 32, 56, true),
                                           std::make_tuple(1, 1, 33, 1000,
                                                           true),
                                           std::make_tuple(7, 5, 17, 9, false),
                                           std::make_tuple(3, 0, 8, 4, true)),
                         sweep_name);

TEST(GatherLinearModule, RegistersProjParameters) {
  GatherLinear model(GatherLinearOptions(2, 3, 5));
  const auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("proj.weight"));
  ASSERT_TRUE(params.contains("proj.bias"));
  EXPECT_EQ(params["proj.weight"].sizes(), (at::IntArrayRef{5, 6}));
  GatherLinear no_bias(GatherLinearOptions(2, 3, 5).bias(false));
  EXPECT_FALSE(no_bias->named_parameters().contains("proj.bias"));
}

TEST(GatherLinearModule, RejectsXOfTheWrongShape) {
  GatherLinear model(GatherLinearOptions(4, 8, 5));
  // Same R*H = 32, but R and H swapped: the op alone would accept it.
  const auto swapped = random_tensor({8, 3, 4}, at::kFloat, at::kCPU);
  EXPECT_TRUE(throws_with([&] { model->forward(swapped); },
                          {"(R, B, H) = (4, B, 8)", "got shape [8, 3, 4]"}));
  EXPECT_TRUE(throws_with([&] { model->forward_reference(swapped); },
                          {"(R, B, H) = (4, B, 8)"}));
  const auto flat = random_tensor({3, 32}, at::kFloat, at::kCPU);
  EXPECT_TRUE(
      throws_with([&] { model->forward(flat); }, {"got shape [3, 32]"}));
}

TEST(GatherLinearModule, RejectsEmptyDims) {
  EXPECT_TRUE(throws_with([] { GatherLinear(GatherLinearOptions(0, 8, 5)); },
                          {"R, H, K >= 1", "R=0"}));
}

}  // namespace
}  // namespace fgl::testing
