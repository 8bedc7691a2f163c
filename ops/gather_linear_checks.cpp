#include "gather_linear_checks.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <type_traits>

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

// Sizes and shapes as int64_t (real tensors) or SymInt (fake tensors).
template <typename Int>
Int size_of(const at::Tensor& t, int64_t dim);
template <>
int64_t size_of<int64_t>(const at::Tensor& t, int64_t dim) {
  return t.size(dim);
}
template <>
c10::SymInt size_of<c10::SymInt>(const at::Tensor& t, int64_t dim) {
  return t.sym_size(dim);
}
template <typename Int>
auto shape_of(const at::Tensor& t) {
  if constexpr (std::is_same_v<Int, int64_t>) {
    return t.sizes();
  } else {
    return t.sym_sizes();
  }
}

template <typename Int>
BasicGatherLinearSizes<Int> check_inputs(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.defined(), "gather_linear: x is an undefined tensor");
  TORCH_CHECK(weight.defined(), "gather_linear: weight is an undefined tensor");
  const bool with_bias = has_bias(bias);

  TORCH_CHECK(x.dim() == 3, "gather_linear: x must be 3-D (R, B, H), got a ",
              x.dim(), "-D tensor of shape ", shape_of<Int>(x));
  TORCH_CHECK(weight.dim() == 2,
              "gather_linear: weight must be 2-D (K, R*H), got a ",
              weight.dim(), "-D tensor of shape ", shape_of<Int>(weight));
  TORCH_CHECK(is_supported_dtype(x.scalar_type()),
              "gather_linear: x has unsupported dtype ", x.scalar_type(),
              "; expected one of float32, float64, float16, bfloat16");
  check_same_dtype_and_device(weight, "weight", x);

  const BasicGatherLinearSizes<Int> s{size_of<Int>(x, 0), size_of<Int>(x, 1),
                                      size_of<Int>(x, 2),
                                      size_of<Int>(weight, 0)};
  TORCH_CHECK(size_of<Int>(weight, 1) == s.R * s.H,
              "gather_linear: weight must have R*H = ", s.R * s.H,
              " columns (R=", s.R, ", H=", s.H, " from x of shape ",
              shape_of<Int>(x), "), got weight of shape ",
              shape_of<Int>(weight));
  if (with_bias) {
    TORCH_CHECK(bias->dim() == 1 && size_of<Int>(*bias, 0) == s.K,
                "gather_linear: bias must be 1-D of length K = ", s.K,
                " (weight.size(0)), got shape ", shape_of<Int>(*bias));
    check_same_dtype_and_device(*bias, "bias", x);
  }
  return s;
}

template <typename Int>
void check_out(const at::Tensor& out, const at::Tensor& x,
               const at::Tensor& weight, const std::optional<at::Tensor>& bias,
               const BasicGatherLinearSizes<Int>& s) {
  TORCH_CHECK(out.defined(), "gather_linear: out is an undefined tensor");
  TORCH_CHECK(out.dim() == 2 && size_of<Int>(out, 0) == s.B &&
                  size_of<Int>(out, 1) == s.K,
              "gather_linear: out must have shape (B, K) = (", s.B, ", ", s.K,
              "), got ", shape_of<Int>(out));
  check_same_dtype_and_device(out, "out", x);
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, x);
  at::assert_no_overlap(out, weight);
  if (has_bias(bias)) {
    at::assert_no_overlap(out, *bias);
  }
}

}  // namespace

GatherLinearSizes check_gather_linear_inputs(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  return check_inputs<int64_t>(x, weight, bias);
}

SymGatherLinearSizes check_gather_linear_inputs_symint(
    const at::Tensor& x, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  return check_inputs<c10::SymInt>(x, weight, bias);
}

void check_gather_linear_out(const at::Tensor& out, const at::Tensor& x,
                             const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias,
                             const GatherLinearSizes& s) {
  check_out(out, x, weight, bias, s);
}

bool out_may_overlap_inputs(const at::Tensor& out, const at::Tensor& x,
                            const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
  const auto undecided = [&](const at::Tensor& input) {
    return at::get_overlap_status(out, input) == at::MemOverlapStatus::TooHard;
  };
  return undecided(x) || undecided(weight) ||
         (has_bias(bias) && undecided(*bias));
}

void check_gather_linear_out_symint(const at::Tensor& out, const at::Tensor& x,
                                    const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    const SymGatherLinearSizes& s) {
  check_out(out, x, weight, bias, s);
}

}  // namespace fgl::detail
