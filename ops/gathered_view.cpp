#include "gathered_view.h"

#include <ATen/TensorUtils.h>

namespace fgl::detail {

std::optional<at::Tensor> gathered_view(const at::Tensor& x) {
  const at::Tensor batch_major = x.permute({1, 0, 2});  // [B, R, H]
  const int64_t B = batch_major.size(0);
  const int64_t RH = batch_major.size(1) * batch_major.size(2);
  // The strides `view` would give, if it can merge (r, h) into one dim.
  const auto strides = at::detail::computeStride(
      batch_major.sizes(), batch_major.strides(), at::IntArrayRef{B, RH});
  if (!strides.has_value()) {
    return std::nullopt;
  }
  return batch_major.as_strided({B, RH}, *strides);
}

}  // namespace fgl::detail
