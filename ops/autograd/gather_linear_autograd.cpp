// Autograd kernel of fgl::gather_linear, for every device (the Autograd alias
// key). With out = linear(cat(x.unbind(0), -1), weight, bias) and
// W_r = weight[:, r*H:(r+1)*H]:
//   grad_x[r]  = grad_out @ W_r              (one GEMM per r, into grad_x[r])
//   grad_W_r   = grad_out^T @ x[r]           (one GEMM per r, into a column
//                                             block of grad_weight)
//   grad_bias  = grad_out.sum(0)
// so the backward, like the forward, never materialises the [B, R*H] concat.
// Sizes are SymInts: torch.compile and torch.export trace this backward with
// symbolic B (and H, K); only R, the loop count, is specialised.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "fgl/gather_linear.h"
#include "gather_linear_checks.h"

namespace fgl {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class GatherLinearFunction
    : public torch::autograd::Function<GatherLinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    // Each input's gradient needs only the other operand: save no more.
    // (needs_input_grad is for backward; forward reads requires_grad.)
    ctx->save_for_backward({weight.requires_grad() ? x : at::Tensor(),
                            x.requires_grad() ? weight : at::Tensor()});
    ctx->saved_data["has_bias"] = detail::has_bias(bias);
    ctx->saved_data["R"] = x.sym_size(0);
    ctx->saved_data["H"] = x.sym_size(2);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return fgl::gather_linear(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    // NOTE: the GEMMs below write into slices (out=), which autograd cannot
    // record; create_graph=True would otherwise fail with a less clear error.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "gather_linear: double backward (create_graph=True) is not "
                "supported");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const at::Tensor& grad_out = grad_outputs[0];  // [B, K]
    // R is guarded (specialised) only here, when a backward is traced.
    const int64_t R =
        ctx->saved_data["R"].toSymInt().guard_int(__FILE__, __LINE__);
    const c10::SymInt H = ctx->saved_data["H"].toSymInt();
    const c10::SymInt B = grad_out.sym_size(0);
    const c10::SymInt K = grad_out.sym_size(1);

    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_x = at::empty_symint({R, B, H}, grad_out.options());
      for (int64_t r = 0; r < R; ++r) {
        at::Tensor grad_x_r = grad_x.select(0, r);  // [B, H], contiguous
        at::mm_out(grad_x_r, grad_out, weight.narrow_symint(1, r * H, H));
      }
    }
    if (ctx->needs_input_grad(1)) {
      grad_weight = at::empty_symint({K, R * H}, grad_out.options());
      const at::Tensor grad_out_t = grad_out.t();  // [K, B]
      for (int64_t r = 0; r < R; ++r) {
        // [K, H] with row stride R*H: BLAS writes it in place.
        at::Tensor grad_w_r = grad_weight.narrow_symint(1, r * H, H);
        at::mm_out(grad_w_r, grad_out_t, x.select(0, r));
      }
    }
    if (has_bias && ctx->needs_input_grad(2)) {
      grad_bias = grad_out.sum(0);  // half types accumulate in float32
    }
    return {grad_x, grad_weight, grad_bias};
  }
};

at::Tensor gather_linear_autograd(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias) {
  const bool with_bias = detail::has_bias(bias);
  if (!at::GradMode::is_enabled() ||
      !(x.requires_grad() || weight.requires_grad() ||
        (with_bias && bias->requires_grad()))) {
    // Nothing to differentiate: skip the graph node (inference in grad mode).
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return fgl::gather_linear(x, weight, bias);
  }
  // Validate before autograd sees the inputs, so that bad input raises the
  // backends' messages rather than an autograd-internal one. Symbolic sizes:
  // this also runs under torch.compile with dynamic shapes.
  detail::check_gather_linear_inputs_symint(x, weight, bias);
  return GatherLinearFunction::apply(x, weight, bias);
}

// Out variants are not differentiable (as in ATen); refuse instead of
// silently returning a result without a history.
at::Tensor& gather_linear_out_autograd(const at::Tensor& x,
                                       const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias,
                                       at::Tensor& out) {
  const bool bias_requires_grad =
      detail::has_bias(bias) && bias->requires_grad();
  TORCH_CHECK(!at::GradMode::is_enabled() ||
                  !(x.requires_grad() || weight.requires_grad() ||
                    bias_requires_grad || out.requires_grad()),
              "gather_linear.out: functions with out=... arguments don't "
              "support automatic differentiation, but one of the arguments "
              "requires grad; call gather_linear instead");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return fgl::gather_linear_out(out, x, weight, bias);
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, Autograd, m) {
  m.impl("gather_linear", &gather_linear_autograd);
  m.impl("gather_linear.out", &gather_linear_out_autograd);
  // A route's name has no gradient: inputs that require one go straight on
  // to their device's kernel.
  m.impl("gather_linear_route", torch::CppFunction::makeFallthrough());
}

}  // namespace fgl
