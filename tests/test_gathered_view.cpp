// detail::gathered_view: x [R, B, H] as the [B, R*H] concatenation without a
// copy, exactly where x's strides allow it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "gathered_view.h"

namespace fgl::detail {
namespace {

at::Tensor concatenated(const at::Tensor& x) {
  return at::cat(x.unbind(0), -1);
}

TEST(GatheredView, BatchMajorBufferIsReadInPlace) {
  // The attention output projection's input: [B, R, H] seen as [R, B, H].
  const auto buffer = at::randn({5, 3, 7});
  const auto x = buffer.permute({1, 0, 2});
  const auto view = gathered_view(x);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->data_ptr(), buffer.data_ptr());
  EXPECT_TRUE(at::equal(*view, concatenated(x)));
}

TEST(GatheredView, OneRowIsReadInPlace) {
  const auto x = at::randn({4, 1, 6});
  const auto view = gathered_view(x);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->data_ptr(), x.data_ptr());
  EXPECT_TRUE(at::equal(*view, concatenated(x)));
}

TEST(GatheredView, OffsetsAndRowPaddingAreKept) {
  // Rows of B padded to 30 values, h strided by 1, starting past the origin.
  const auto storage = at::randn({8 * 30 + 5});
  const auto x = storage.narrow(0, 5, 8 * 30)
                     .view({8, 30})
                     .narrow(1, 0, 3 * 8)
                     .view({8, 3, 8})
                     .permute({1, 0, 2});
  const auto view = gathered_view(x);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->stride(0), 30);
  EXPECT_TRUE(at::equal(*view, concatenated(x)));
}

TEST(GatheredView, HeadMajorLayoutsHaveNone) {
  EXPECT_FALSE(gathered_view(at::randn({4, 3, 6})).has_value());
  // h not following r, and h strided past its neighbours.
  EXPECT_FALSE(gathered_view(at::randn({3, 4, 6}).transpose(0, 2)).has_value());
  EXPECT_FALSE(
      gathered_view(at::randn({3, 4, 12}).narrow(2, 0, 6).permute({1, 0, 2}))
          .has_value());
}

TEST(GatheredView, TheCheapTestAgreesWithTheView) {
  const auto storage = at::randn({8 * 30});
  const at::Tensor layouts[] = {
      at::randn({5, 3, 7}).permute({1, 0, 2}),
      at::randn({4, 1, 6}),
      storage.view({8, 30}).narrow(1, 0, 24).view({8, 3, 8}).permute({1, 0, 2}),
      at::randn({4, 3, 6}),
      at::randn({3, 4, 6}).transpose(0, 2),
      at::randn({3, 4, 12}).narrow(2, 0, 6).permute({1, 0, 2}),
      at::randn({3, 1, 6}).expand({3, 5, 6}),
      at::randn({0, 4, 6}),
  };
  for (const auto& x : layouts) {
    SCOPED_TRACE(::testing::Message() << x.sizes() << " " << x.strides());
    EXPECT_EQ(has_gathered_view(x), gathered_view(x).has_value());
  }
}

}  // namespace
}  // namespace fgl::detail
