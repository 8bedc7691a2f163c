#include "gathered_view.h"

#include <ATen/TensorUtils.h>

#include <array>

namespace fgl::detail {
namespace {

// The strides `view` would give the batch-major [B, R, H] permutation of x
// as [B, R*H], if it can merge (r, h) into one dim.
std::optional<std::vector<int64_t>> gathered_strides(const at::Tensor& x) {
  const std::array<int64_t, 3> sizes{x.size(1), x.size(0), x.size(2)};
  const std::array<int64_t, 3> strides{x.stride(1), x.stride(0), x.stride(2)};
  const std::array<int64_t, 2> gathered{sizes[0], sizes[1] * sizes[2]};
  return at::detail::computeStride(sizes, strides, gathered);
}

}  // namespace

bool has_gathered_view(const at::Tensor& x) {
  return gathered_strides(x).has_value();
}

std::optional<at::Tensor> gathered_view(const at::Tensor& x) {
  const auto strides = gathered_strides(x);
  if (!strides.has_value()) {
    return std::nullopt;
  }
  return x.as_strided({x.size(1), x.size(0) * x.size(2)}, *strides);
}

}  // namespace fgl::detail
