// CPU kernel of fgl::gather_linear. The [B, R*H] concat never exists: on
// AVX-512 (BF16) CPUs every dtype takes a kernel that reads x through its
// strides (avx512_dot_kernel.h); elsewhere, where x's strides make the
// concatenation a view (gathered_view.h), one BLAS GEMM reads it in place;
// otherwise one GEMM per gathered slice accumulates into the output,
//   out = bias + sum_r x[r] @ weight[:, r*H:(r+1)*H]^T
// with x[r] and the weight column block as strided views that BLAS reads in
// place when one of their strides is 1.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include "backend_entry.h"
#include "gather_linear_checks.h"
#include "gathered_view.h"
#include "make_params.h"
#ifdef FGL_WITH_AVX512_DOT
#include "cpu/avx512_dot_kernel.h"
#endif

namespace fgl {
namespace {

// Computes into `out` ([B, K], checked).
void run(const at::Tensor& x, const at::Tensor& weight,
         const std::optional<at::Tensor>& bias,
         const detail::GatherLinearSizes& s, at::Tensor& out) {
  if (out.numel() == 0) {
    return;
  }
#ifdef FGL_WITH_AVX512_DOT
  if (cpu::can_run_avx512_dot() && x.stride(2) == 1 && weight.stride(1) == 1) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, x.scalar_type(), "gather_linear_cpu", [&] {
          cpu::avx512_dot_gather_linear(
              detail::make_params<scalar_t, scalar_t>(x, weight, bias, out, s));
        });
    return;
  }
#endif
  const bool has_bias = bias.has_value() && bias->defined();
  const auto gathered = s.R * s.H > 0 ? detail::gathered_view(x) : std::nullopt;
  if (gathered.has_value()) {
    // One GEMM; half types accumulate in float32 inside it and round once.
    if (has_bias) {
      at::addmm_out(out, *bias, *gathered, weight.t());
    } else {
      at::mm_out(out, *gathered, weight.t());
    }
    return;
  }
  // Half types accumulate in float32 across slices: summing R partial
  // products in bf16 would round R times.
  const bool reduced = at::isReducedFloatingType(x.scalar_type());
  at::Tensor acc =
      reduced ? at::empty({s.B, s.K}, x.options().dtype(at::kFloat)) : out;
  if (has_bias) {
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
  return detail::gather_linear_out_with(x, weight, bias, out, run);
}

at::Tensor gather_linear_cpu(const at::Tensor& x, const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias) {
  return detail::gather_linear_with(x, weight, bias, run);
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CPU, m) {
  m.impl("gather_linear", &gather_linear_cpu);
  m.impl("gather_linear.out", &gather_linear_out_cpu);
}

}  // namespace fgl
