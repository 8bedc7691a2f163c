// CPU kernel of fgl::gather_linear: one BLAS GEMM per gathered slice,
// accumulated into the output, so the [B, R*H] concat never exists:
//   out = bias + sum_r x[r] @ weight[:, r*H:(r+1)*H]^T
// x[r] and the weight column block are strided views; BLAS reads them in
// place when one of their strides is 1.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "gather_linear_checks.h"

namespace fgl {
namespace {

// Computes into `out` ([B, K], checked).
void run(const at::Tensor& x, const at::Tensor& weight,
         const std::optional<at::Tensor>& bias,
         const detail::GatherLinearSizes& s, at::Tensor& out) {
  if (out.numel() == 0) {
    return;
  }
  // Half types accumulate in float32 across slices: summing R partial
  // products in bf16 would round R times.
  const bool reduced = at::isReducedFloatingType(x.scalar_type());
  at::Tensor acc =
      reduced ? at::empty({s.B, s.K}, x.options().dtype(at::kFloat)) : out;
  if (bias.has_value() && bias->defined()) {
    acc.copy_(bias->unsqueeze(0).expand({s.B, s.K}));
  } else {
    acc.zero_();
  }
  for (int64_t r = 0; r < s.R; ++r) {
    at::Tensor x_r = x.select(0, r);                  // [B, H]
    at::Tensor w_r = weight.narrow(1, r * s.H, s.H);  // [K, H]
    if (reduced) {
      // One slice is converted at a time: bounded extra memory.
      acc.addmm_(x_r.to(at::kFloat), w_r.to(at::kFloat).t());
    } else {
      acc.addmm_(x_r, w_r.t());
    }
  }
  if (reduced) {
    out.copy_(acc);
  }
}

at::Tensor& gather_linear_out_cpu(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias,
                                  at::Tensor& out) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  detail::check_gather_linear_out(out, x, weight, bias, s);
  run(x, weight, bias, s, out);
  return out;
}

at::Tensor gather_linear_cpu(const at::Tensor& x, const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  at::Tensor out = at::empty({s.B, s.K}, x.options());
  run(x, weight, bias, s, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CPU, m) {
  m.impl("gather_linear", &gather_linear_cpu);
  m.impl("gather_linear.out", &gather_linear_out_cpu);
}

}  // namespace fgl
