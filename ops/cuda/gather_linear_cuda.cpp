// CUDA backend of fgl::gather_linear: the torch-facing side. It validates,
// allocates, sets the device and stream, maps the dtype to the kernel's type
// and checks the launch; the kernels themselves live in
// gather_linear_kernel.cu and never see a torch type.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <torch/library.h>

#include <cstdlib>
#include <string>

#include "gather_linear_checks.h"
#include "gather_linear_kernel.h"
#include "gathered_view.h"
#include "kernel_choice.h"
#include "make_params.h"

namespace fgl {
namespace {

// The kernel-side type of each ATen scalar type (same bit layout).
template <typename T>
struct KernelType {
  using type = T;
};
template <>
struct KernelType<at::Half> {
  using type = __half;
};
template <>
struct KernelType<at::BFloat16> {
  using type = __nv_bfloat16;
};

// FGL_CUDA_FUSED_ONLY=1 keeps every problem on the fused kernels, for tests,
// compute-sanitizer and benchmarks of the kernels themselves.
bool fused_only() {
  static const bool value = [] {
    const char* env = std::getenv("FGL_CUDA_FUSED_ONLY");
    return env != nullptr && std::string(env) == "1";
  }();
  return value;
}

// The reference path's own route, for the problems where no fused kernel has
// beaten it yet (kernel_choice.h): one cuBLAS GEMM with the bias in its
// epilogue (which also honours the TF32 settings) over the gathered x, a
// view where x's strides allow one and the reference's `cat` otherwise.
void gathered_cublas(const at::Tensor& x, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, at::Tensor& out) {
  const auto view = detail::gathered_view(x);
  const at::Tensor gathered =
      view.has_value() ? *view : at::cat(x.unbind(0), -1);  // [B, R*H]
  if (bias.has_value() && bias->defined()) {
    at::addmm_out(out, *bias, gathered, weight.t());
  } else {
    at::mm_out(out, gathered, weight.t());
  }
}

// Computes into `out` ([B, K], checked) on the inputs' device and the current
// stream.
void run(const at::Tensor& x, const at::Tensor& weight,
         const std::optional<at::Tensor>& bias,
         const detail::GatherLinearSizes& s, at::Tensor& out) {
  if (out.numel() == 0) {
    return;
  }
  const c10::cuda::CUDAGuard device_guard(x.device());
  if (s.R * s.H == 0) {  // an empty contraction: out is the bias (or zero)
    if (bias.has_value() && bias->defined()) {
      out.copy_(bias->unsqueeze(0).expand({s.B, s.K}));
    } else {
      out.zero_();
    }
    return;
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  const int compute_capability = 10 * props->major + props->minor;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "gather_linear_cuda", [&] {
        const auto p =
            detail::make_params<typename KernelType<scalar_t>::type, scalar_t>(
                x, weight, bias, out, s);
        const cuda::RouteQuery query{s.R,
                                     s.B,
                                     s.H,
                                     s.K,
                                     static_cast<int>(sizeof(scalar_t)),
                                     cuda::can_stream(p),
                                     fused_only(),
                                     compute_capability};
        switch (cuda::choose_route(query)) {
          case cuda::Route::kStreaming:
            cuda::launch_streaming(p, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
          case cuda::Route::kTiled:
            TORCH_CHECK(s.K <= cuda::max_tiled_k(), "gather_linear: K = ", s.K,
                        " (weight.size(0)) exceeds the ", cuda::max_tiled_k(),
                        " output features one CUDA launch covers; split "
                        "weight along dim 0");
            cuda::launch_tiled(p, stream);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            break;
          case cuda::Route::kGatheredCublas:
            gathered_cublas(x, weight, bias, out);
            break;
        }
      });
}

at::Tensor& gather_linear_out_cuda(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   at::Tensor& out) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  detail::check_gather_linear_out(out, x, weight, bias, s);
  run(x, weight, bias, s, out);
  return out;
}

at::Tensor gather_linear_cuda(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  at::Tensor out = at::empty({s.B, s.K}, x.options());
  run(x, weight, bias, s, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CUDA, m) {
  m.impl("gather_linear", &gather_linear_cuda);
  m.impl("gather_linear.out", &gather_linear_out_cuda);
}

}  // namespace fgl
