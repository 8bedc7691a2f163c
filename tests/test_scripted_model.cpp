// models::ScriptedModel on TorchScript files built and saved here from C++:
// a GatherLinear-like module (proj.weight / proj.bias, R and H attributes, a
// cat + linear forward) runs and exposes its weights; a forward of two
// arguments, a module without proj and a file that is not TorchScript are
// told apart.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <unistd.h>

#include <string>

#include "fgl/io/tensor_file.h"
#include "fgl/models/aoti_model.h"
#include "fgl/models/scripted_model.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

constexpr int64_t R = 3, H = 5, K = 4;

// A file in /tmp, removed afterwards.
class ScriptedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = "/tmp/fgl_scripted_XXXXXX";
    const int fd = ::mkstemp(name.data());
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = name;
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

torch::jit::Module gather_proj(bool with_proj) {
  torch::jit::Module proj("__torch__.Proj");
  proj.register_parameter("weight", at::randn({K, R * H}), false);
  proj.register_parameter("bias", at::randn({K}), false);
  torch::jit::Module m("__torch__.GatherLinear");
  m.register_attribute("R", c10::IntType::get(), R);
  m.register_attribute("H", c10::IntType::get(), H);
  m.register_module(with_proj ? "proj" : "other", proj);
  // The cat + linear path: Module::define's resolver knows no torch.ops.
  const std::string name = with_proj ? "proj" : "other";
  m.define(
      "def forward(self, x):\n  return torch.linear(torch.cat("
      "x.unbind(0), -1), self." +
      name + ".weight, self." + name + ".bias)\n");
  return m;
}

TEST_F(ScriptedModelTest, RunsAndExposesProjWeights) {
  gather_proj(true).save(path_);
  ASSERT_TRUE(models::is_torchscript_archive(path_));
  EXPECT_FALSE(models::is_aoti_package(path_));
  models::ScriptedModel model(path_);
  EXPECT_EQ(model.int_attribute("R"), R);
  EXPECT_EQ(model.int_attribute("H"), H);
  EXPECT_FALSE(model.int_attribute("K").has_value());
  const auto weights = model.weights();
  ASSERT_TRUE(weights.has_value());
  ASSERT_TRUE(weights->bias.has_value());
  const auto x = at::randn({7, R, H}).transpose(0, 1);
  EXPECT_TRUE(matches_reference(
      model.forward(x),
      reference_gather_linear(x, weights->weight, weights->bias)));
}

TEST_F(ScriptedModelTest, WithoutProjHasNoWeights) {
  gather_proj(false).save(path_);
  EXPECT_FALSE(models::ScriptedModel(path_).weights().has_value());
}

TEST_F(ScriptedModelTest, ForwardMustTakeOneTensor) {
  torch::jit::Module m("__torch__.TwoArgs");
  m.define("def forward(self, x, y):\n  return x + y\n");
  m.save(path_);
  EXPECT_TRUE(throws_with([&] { models::ScriptedModel model(path_); },
                          {"forward must take one Tensor", "Tensor y"}));
}

TEST_F(ScriptedModelTest, TensorFileIsNotAModel) {
  io::write_tensor_file(path_, io::Layout::kTensor, {"x"}, {at::randn({2})});
  EXPECT_FALSE(models::is_torchscript_archive(path_));
  EXPECT_TRUE(throws_with([&] { models::ScriptedModel model(path_); },
                          {"not a TorchScript archive"}));
}

}  // namespace
}  // namespace fgl::testing
