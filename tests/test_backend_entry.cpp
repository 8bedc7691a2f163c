// detail::gather_linear_with / gather_linear_out_with and detail::Output: a
// backend's run() gets the op's result allocated where it first asks for it,
// and out= as given.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "backend_entry.h"

namespace fgl::detail {
namespace {

TEST(BackendEntry, OutputIsAllocatedOnceAtFirstUse) {
  const GatherLinearSizes s{2, 3, 4, 5};
  Output out(s, at::TensorOptions().dtype(at::kDouble));
  at::Tensor& first = out.get();
  EXPECT_EQ(first.sizes(), (at::IntArrayRef{3, 5}));
  EXPECT_EQ(first.scalar_type(), at::kDouble);
  EXPECT_EQ(out.get().data_ptr(), first.data_ptr());
}

TEST(BackendEntry, OutputGivenIsUsedAsIs) {
  at::Tensor given = at::empty({3, 5});
  Output out(given);
  EXPECT_EQ(&out.get(), &given);
}

// The result is the tensor run() wrote, made when it asked, after the
// temporary it made first.
TEST(BackendEntry, RunAllocatesTheResultWhereItAsks) {
  const auto x = at::randn({2, 3, 4});
  const auto w = at::randn({5, 8});
  at::Tensor temporary;
  void* written = nullptr;
  const auto result =
      gather_linear_with(x, w, std::nullopt,
                         [&](const at::Tensor& xx, const at::Tensor& ww,
                             const std::optional<at::Tensor>&,
                             const GatherLinearSizes&, Output& out) {
                           temporary = at::cat(xx.unbind(0), -1);
                           at::mm_out(out.get(), temporary, ww.t());
                           written = out.get().data_ptr();
                         });
  EXPECT_EQ(result.data_ptr(), written);
  EXPECT_NE(result.data_ptr(), temporary.data_ptr());
  EXPECT_TRUE(at::allclose(result, at::mm(temporary, w.t())));
}

// Nothing to compute: run() is not called and the result still has its
// shape; an empty contraction gives the bias (zeros without one).
TEST(BackendEntry, TrivialProblemsSkipRun) {
  int runs = 0;
  const auto count = [&](const at::Tensor&, const at::Tensor&,
                         const std::optional<at::Tensor>&,
                         const GatherLinearSizes&, Output&) { ++runs; };
  const auto empty = gather_linear_with(at::randn({2, 0, 4}), at::randn({5, 8}),
                                        std::nullopt, count);
  EXPECT_EQ(empty.sizes(), (at::IntArrayRef{0, 5}));
  const auto bias = at::randn({5});
  const auto biased =
      gather_linear_with(at::randn({0, 3, 4}), at::randn({5, 0}), bias, count);
  EXPECT_TRUE(at::equal(biased, bias.unsqueeze(0).expand({3, 5})));
  at::Tensor out = at::full({3, 5}, NAN);
  gather_linear_out_with(at::randn({2, 3, 0}), at::randn({5, 0}), std::nullopt,
                         out, count);
  EXPECT_TRUE(at::equal(out, at::zeros({3, 5})));
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace fgl::detail
