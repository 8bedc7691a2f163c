#include "fgl/models/gather_linear_module.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>

#include "fgl/gather_linear.h"

namespace fgl::models {
namespace {

// Checked before Linear is built, whose own error for a zero size is
// obscure.
torch::nn::LinearOptions linear_options(const GatherLinearOptions& o) {
  TORCH_CHECK(o.R() > 0 && o.H() > 0 && o.K() > 0,
              "GatherLinear needs R, H, K >= 1, got R=", o.R(), " H=", o.H(),
              " K=", o.K());
  return torch::nn::LinearOptions(o.R() * o.H(), o.K()).bias(o.bias());
}

}  // namespace

GatherLinearImpl::GatherLinearImpl(const GatherLinearOptions& options_)
    : options(options_),
      proj(register_module("proj",
                           torch::nn::Linear(linear_options(options_)))) {}

void GatherLinearImpl::check_input(const torch::Tensor& x) const {
  TORCH_CHECK(
      x.dim() == 3 && x.size(0) == options.R() && x.size(2) == options.H(),
      "GatherLinear expects x of shape (R, B, H) = (", options.R(), ", B, ",
      options.H(), "), got shape ", x.sizes());
}

std::optional<at::Tensor> GatherLinearImpl::bias() const {
  if (!options.bias()) return std::nullopt;
  return proj->bias;
}

torch::Tensor GatherLinearImpl::forward(const torch::Tensor& x) {
  check_input(x);
  return fgl::gather_linear(x, proj->weight, bias());
}

std::string GatherLinearImpl::route(const torch::Tensor& x) {
  check_input(x);
  return fgl::gather_linear_route(x, proj->weight, bias());
}

torch::Tensor GatherLinearImpl::forward_reference(const torch::Tensor& x) {
  check_input(x);
  return proj(at::cat(x.unbind(0), -1));
}

}  // namespace fgl::models
