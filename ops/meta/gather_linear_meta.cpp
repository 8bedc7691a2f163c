// Meta kernel of fgl::gather_linear: validates and describes the result
// (shape, dtype, device) without touching data, for fake tensors,
// torch.compile and torch.export. Sizes stay symbolic (SymInt), so a dynamic
// batch is not specialised.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "gather_linear_checks.h"

namespace fgl {
namespace {

at::Tensor gather_linear_meta(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  const auto s = detail::check_gather_linear_inputs_symint(x, weight, bias);
  return at::empty_symint({s.B, s.K}, x.options());
}

at::Tensor& gather_linear_out_meta(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   at::Tensor& out) {
  const auto s = detail::check_gather_linear_inputs_symint(x, weight, bias);
  detail::check_gather_linear_out_symint(out, x, weight, bias, s);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, Meta, m) {
  m.impl("gather_linear", &gather_linear_meta);
  m.impl("gather_linear.out", &gather_linear_out_meta);
}

}  // namespace fgl
