// Gradients of fgl::gather_linear (its Autograd kernel) computed from C++,
// against the gradients of the float64 cat + linear reference, on every
// device and dtype, for odd and empty sizes and a batch-major x.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <vector>

#include "fgl/gather_linear.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

const Shape kShapes[] = {
    {3, 4, 5, 6},   // general
    {1, 7, 33, 9},  // R = 1, odd H and K
    {4, 1, 3, 1},   // B = 1, K = 1
    {2, 0, 8, 5},   // B = 0: zero weight gradient
    {0, 3, 4, 5},   // R = 0
    {3, 4, 0, 5},   // H = 0
    {2, 3, 4, 0},   // K = 0: zero x gradient
};

// Inputs that require grad; x is a (B, R, H) buffer viewed as (R, B, H) when
// batch_major, so its gradient comes back for a non-contiguous leaf.
std::vector<at::Tensor> make_leaves(const Shape& s, bool batch_major,
                                    bool with_bias, at::ScalarType dtype,
                                    const at::Device& dev) {
  at::Tensor x =
      batch_major ? random_tensor({s.B, s.R, s.H}, dtype, dev).transpose(0, 1)
                  : random_tensor({s.R, s.B, s.H}, dtype, dev);
  std::vector<at::Tensor> leaves{
      x.requires_grad_(),
      random_tensor({s.K, s.R * s.H}, dtype, dev).requires_grad_()};
  if (with_bias) {
    leaves.push_back(random_tensor({s.K}, dtype, dev).requires_grad_());
  }
  return leaves;
}

std::optional<at::Tensor> bias_of(const std::vector<at::Tensor>& leaves) {
  if (leaves.size() < 3) return std::nullopt;
  return leaves[2];
}

// d(sum(out * grad_out))/d(leaves) through linear(cat(x.unbind(0), -1)) in
// float64; leaves the reference does not use (R = 0) get zero gradients.
std::vector<at::Tensor> reference_grads(const std::vector<at::Tensor>& leaves,
                                        const at::Tensor& grad_out) {
  std::vector<at::Tensor> leaves64;
  for (const auto& t : leaves) {
    leaves64.push_back(t.detach().cpu().to(at::kDouble).requires_grad_());
  }
  const auto out =
      reference_gather_linear(leaves64[0], leaves64[1], bias_of(leaves64));
  auto grads =
      torch::autograd::grad({out}, leaves64, {grad_out.cpu().to(at::kDouble)},
                            /*retain_graph=*/std::nullopt,
                            /*create_graph=*/false,
                            /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) grads[i] = at::zeros_like(leaves64[i]);
  }
  return grads;
}

TEST(GatherLinearAutograd, GradientsMatchCatLinear) {
  for (const auto& dev : available_devices()) {
    for (const auto dtype : supported_dtypes()) {
      for (const auto& s : kShapes) {
        for (bool batch_major : {false, true}) {
          for (bool with_bias : {true, false}) {
            SCOPED_TRACE(::testing::Message()
                         << dev << " " << dtype << " R" << s.R << "_B" << s.B
                         << "_H" << s.H << "_K" << s.K << " batch_major="
                         << batch_major << " bias=" << with_bias);
            const auto leaves =
                make_leaves(s, batch_major, with_bias, dtype, dev);
            const auto grad_out = random_tensor({s.B, s.K}, dtype, dev);
            const auto out =
                gather_linear(leaves[0], leaves[1], bias_of(leaves));
            ASSERT_TRUE(out.requires_grad());
            out.backward(grad_out);
            const auto ref = reference_grads(leaves, grad_out);
            for (size_t i = 0; i < leaves.size(); ++i) {
              const auto& grad = leaves[i].grad();
              ASSERT_TRUE(grad.defined()) << "input " << i;
              EXPECT_EQ(grad.device(), dev) << "input " << i;
              EXPECT_EQ(grad.scalar_type(), dtype) << "input " << i;
              EXPECT_TRUE(matches_reference(grad, ref[i])) << "input " << i;
            }
          }
        }
      }
    }
  }
}

TEST(GatherLinearAutograd, OnlyInputsThatRequireGradGetGradients) {
  const Shape s{3, 4, 5, 6};
  for (const auto& dev : available_devices()) {
    auto leaves = make_leaves(s, false, true, at::kFloat, dev);
    // A frozen weight and bias: only x's gradient.
    const auto out =
        gather_linear(leaves[0], leaves[1].detach(), leaves[2].detach());
    const auto grad_out = random_tensor({s.B, s.K}, at::kFloat, dev);
    out.backward(grad_out);
    EXPECT_TRUE(leaves[0].grad().defined());
    EXPECT_FALSE(leaves[1].grad().defined());
    const auto ref = reference_grads(leaves, grad_out);
    EXPECT_TRUE(matches_reference(leaves[0].grad(), ref[0]));
  }
}

TEST(GatherLinearAutograd, NoGraphWithoutInputsThatRequireGrad) {
  const auto out = gather_linear(random_tensor({2, 3, 4}, at::kFloat, at::kCPU),
                                 random_tensor({5, 8}, at::kFloat, at::kCPU));
  EXPECT_FALSE(out.requires_grad());
}

TEST(GatherLinearAutograd, DoubleBackwardRaises) {
  const auto leaves =
      make_leaves({2, 3, 4, 5}, false, true, at::kDouble, at::kCPU);
  const auto out = gather_linear(leaves[0], leaves[1], leaves[2]);
  EXPECT_TRUE(throws_with(
      [&] {
        torch::autograd::grad({out.sum()}, {leaves[0]}, {},
                              /*retain_graph=*/true, /*create_graph=*/true);
      },
      {"double backward (create_graph=True) is not supported"}));
}

}  // namespace
}  // namespace fgl::testing
