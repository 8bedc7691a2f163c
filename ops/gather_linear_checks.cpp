#include "gather_linear_checks.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

namespace fgl::detail {
namespace {

bool is_supported_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf ||
         t == at::kBFloat16;
}

void check_same_dtype_and_device(const at::Tensor& t, const char* name,
                                 const at::Tensor& x) {
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), "gather_linear: ", name,
              " must have x's dtype ", x.scalar_type(), ", got ",
              t.scalar_type());
  TORCH_CHECK(t.device() == x.device(), "gather_linear: ", name,
              " must be on x's device ", x.device(), ", got ", t.device());
}

}  // namespace

GatherLinearSizes check_gather_linear_inputs(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.defined(), "gather_linear: x is an undefined tensor");
  TORCH_CHECK(weight.defined(), "gather_linear: weight is an undefined tensor");
  const bool has_bias = bias.has_value() && bias->defined();

  TORCH_CHECK(x.dim() == 3, "gather_linear: x must be 3-D (R, B, H), got a ",
              x.dim(), "-D tensor of shape ", x.sizes());
  TORCH_CHECK(weight.dim() == 2,
              "gather_linear: weight must be 2-D (K, R*H), got a ",
              weight.dim(), "-D tensor of shape ", weight.sizes());
  TORCH_CHECK(is_supported_dtype(x.scalar_type()),
              "gather_linear: x has unsupported dtype ", x.scalar_type(),
              "; expected one of float32, float64, float16, bfloat16");
  check_same_dtype_and_device(weight, "weight", x);

  const GatherLinearSizes s{x.size(0), x.size(1), x.size(2), weight.size(0)};
  TORCH_CHECK(weight.size(1) == s.R * s.H,
              "gather_linear: weight must have R*H = ", s.R * s.H,
              " columns (R=", s.R, ", H=", s.H, " from x of shape ", x.sizes(),
              "), got weight of shape ", weight.sizes());
  if (has_bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == s.K,
                "gather_linear: bias must be 1-D of length K = ", s.K,
                " (weight.size(0)), got shape ", bias->sizes());
    check_same_dtype_and_device(*bias, "bias", x);
  }
  return s;
}

void check_gather_linear_out(const at::Tensor& out, const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias,
                             const GatherLinearSizes& s) {
  TORCH_CHECK(out.defined(), "gather_linear: out is an undefined tensor");
  TORCH_CHECK(out.dim() == 2 && out.size(0) == s.B && out.size(1) == s.K,
              "gather_linear: out must have shape (B, K) = (", s.B, ", ", s.K,
              "), got ", out.sizes());
  check_same_dtype_and_device(out, "out", x);
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, x);
  at::assert_no_overlap(out, weight);
  if (bias.has_value() && bias->defined()) {
    at::assert_no_overlap(out, *bias);
  }
}

}  // namespace fgl::detail
