// TorchScript calls the op without Python: a function compiled from source in
// C++ reaches fgl::gather_linear through the dispatcher, with and without
// bias and with a batch-major x, on every device.
// NOTE: the only test file that includes the TorchScript frontend headers
// (slow to compile).
#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/jit.h>
#include <torch/script.h>

#include "test_support.h"

namespace fgl::testing {
namespace {

using torch::jit::GraphFunction;
using torch::jit::SourceRange;
using torch::jit::SugaredValue;

constexpr const char* kSource = R"JIT(
def f(x: Tensor, w: Tensor, b: Optional[Tensor]):
    return torch.ops.fgl.gather_linear(x, w, b)

def gathered_plus_one(x: Tensor, w: Tensor):
    return torch.ops.fgl.gather_linear(x, w) + 1.0
)JIT";

// `torch.ops.<namespace>`: the operators of one namespace, e.g. fgl::*.
struct OpsNamespaces : SugaredValue {
  std::string kind() const override { return "torch.ops"; }
  std::shared_ptr<SugaredValue> attr(const SourceRange&, GraphFunction&,
                                     const std::string& ns) override {
    return std::make_shared<torch::jit::BuiltinModule>(ns);
  }
};

// `torch`: aten builtins, as in torch::jit::compile's native resolver, plus
// `torch.ops`, which that resolver lacks (Python's resolver provides it).
struct TorchModule : SugaredValue {
  std::string kind() const override { return "module torch"; }
  std::shared_ptr<SugaredValue> attr(const SourceRange& loc, GraphFunction& m,
                                     const std::string& field) override {
    if (field == "ops") return std::make_shared<OpsNamespaces>();
    return torch::jit::BuiltinModule("aten").attr(loc, m, field);
  }
};

struct TorchOpsResolver : torch::jit::Resolver {
  std::shared_ptr<SugaredValue> resolveValue(const std::string& name,
                                             GraphFunction&,
                                             const SourceRange&) override {
    return name == "torch" ? std::make_shared<TorchModule>() : nullptr;
  }
  c10::TypePtr resolveType(const std::string&, const SourceRange&) override {
    return nullptr;
  }
};

// torch::jit::compile, with the resolver above.
std::shared_ptr<torch::jit::CompilationUnit> compile(const std::string& src) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  cu->define(std::nullopt, src, std::make_shared<TorchOpsResolver>(), nullptr);
  return cu;
}

TEST(TorchScript, CompiledFunctionCallsTheOp) {
  const auto cu = compile(kSource);
  for (const auto& dev : available_devices()) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << dev << " bias=" << with_bias);
      const int64_t R = 3, B = 5, H = 17, K = 9;
      // A (B, R, H) buffer viewed head-major.
      const auto x =
          random_tensor({B, R, H}, at::kFloat, dev).permute({1, 0, 2});
      const auto w = random_tensor({K, R * H}, at::kFloat, dev);
      std::optional<at::Tensor> b;
      if (with_bias) b = random_tensor({K}, at::kFloat, dev);
      const auto out =
          cu->run_method("f", x, w, b ? c10::IValue(*b) : c10::IValue())
              .toTensor();
      EXPECT_EQ(out.device(), dev);
      EXPECT_TRUE(matches_reference(out, reference_gather_linear(x, w, b)));
    }
  }
}

TEST(TorchScript, DefaultBiasThroughGetFunction) {
  const auto cu = compile(kSource);
  auto& fn = cu->get_function("gathered_plus_one");
  const auto x = random_tensor({2, 4, 8}, at::kDouble, at::kCPU);
  const auto w = random_tensor({6, 16}, at::kDouble, at::kCPU);
  const auto out = fn({x, w}).toTensor();
  EXPECT_TRUE(matches_reference(
      out, reference_gather_linear(x, w, std::nullopt) + 1.0));
}

TEST(TorchScript, GraphCallsTheOp) {
  const auto cu = compile(kSource);
  const auto graph =
      torch::jit::toGraphFunction(cu->get_function("f")).graph()->toString();
  EXPECT_NE(graph.find("fgl::gather_linear"), std::string::npos) << graph;
}

}  // namespace
}  // namespace fgl::testing
