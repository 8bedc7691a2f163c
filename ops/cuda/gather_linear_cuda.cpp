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

template <typename scalar_t>
auto make_params(const at::Tensor& x, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, at::Tensor& out,
                 const detail::GatherLinearSizes& s) {
  using T = typename KernelType<scalar_t>::type;
  const bool has_bias = bias.has_value() && bias->defined();
  cuda::GatherLinearParams<T> p{};
  p.x = reinterpret_cast<const T*>(x.const_data_ptr<scalar_t>());
  p.weight = reinterpret_cast<const T*>(weight.const_data_ptr<scalar_t>());
  p.bias = has_bias
               ? reinterpret_cast<const T*>(bias->const_data_ptr<scalar_t>())
               : nullptr;
  p.out = reinterpret_cast<T*>(out.mutable_data_ptr<scalar_t>());
  p.R = s.R;
  p.B = s.B;
  p.H = s.H;
  p.K = s.K;
  p.x_stride_r = x.stride(0);
  p.x_stride_b = x.stride(1);
  p.x_stride_h = x.stride(2);
  p.weight_stride_k = weight.stride(0);
  p.weight_stride_c = weight.stride(1);
  p.bias_stride = has_bias ? bias->stride(0) : 0;
  p.out_stride_b = out.stride(0);
  p.out_stride_k = out.stride(1);
  return p;
}

// NOTE: the general fused kernel (cuda/tiled_kernel.cuh) runs on CUDA cores
// and loses to cat + cuBLAS on every problem measured outside the
// weight-streaming regime (bench/NOTES.md), so until a tensor-core kernel
// replaces it those problems take the reference path's own route: the
// gathered copy and one cuBLAS GEMM with the bias in its epilogue (which
// also honours the TF32 settings). FGL_CUDA_FUSED_ONLY=1 keeps every problem
// on the fused kernels, for tests and benchmarks of them.
bool fused_only() {
  static const bool value = [] {
    const char* env = std::getenv("FGL_CUDA_FUSED_ONLY");
    return env != nullptr && std::string(env) == "1";
  }();
  return value;
}

void gathered_cublas(const at::Tensor& x, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, at::Tensor& out) {
  const at::Tensor gathered = at::cat(x.unbind(0), -1);  // [B, R*H]
  if (bias.has_value() && bias->defined()) {
    at::addmm_out(out, *bias, gathered, weight.t());
  } else {
    at::mm_out(out, gathered, weight.t());
  }
}

at::Tensor& gather_linear_out_cuda(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   at::Tensor& out) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  detail::check_gather_linear_out(out, x, weight, bias, s);
  if (out.numel() == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "gather_linear_cuda", [&] {
        const auto p = make_params<scalar_t>(x, weight, bias, out, s);
        if (cuda::try_launch_streaming(p, stream)) {
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        } else if (fused_only() || s.R * s.H == 0) {
          TORCH_CHECK(s.K <= cuda::max_tiled_k(), "gather_linear: K = ", s.K,
                      " (weight.size(0)) exceeds the ", cuda::max_tiled_k(),
                      " output features one CUDA launch covers; split weight "
                      "along dim 0");
          cuda::launch_tiled(p, stream);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        } else {
          gathered_cublas(x, weight, bias, out);
        }
      });
  return out;
}

at::Tensor gather_linear_cuda(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  const auto s = detail::check_gather_linear_inputs(x, weight, bias);
  at::Tensor out = at::empty({s.B, s.K}, x.options());
  return gather_linear_out_cuda(x, weight, bias, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CUDA, m) {
  m.impl("gather_linear", &gather_linear_cuda);
  m.impl("gather_linear.out", &gather_linear_out_cuda);
}

}  // namespace fgl
