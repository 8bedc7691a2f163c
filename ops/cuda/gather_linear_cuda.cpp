// CUDA backend of fgl::gather_linear: the torch-facing side. It validates,
// allocates, sets the device and stream, describes the problem to the
// routing policy (kernel_choice.h) and runs the route it names: a fused
// kernel (launchers in gather_linear_kernel.h, which never see a torch type)
// or cuBLAS.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend_entry.h"
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

// The Hopper kernel exists for the half types and float32 in builds with
// CUTLASS; the policy routes nothing else to it (can_run_wgmma).
template <typename T>
cudaError_t launch_wgmma_if_built(const GatherLinearParams<T>& p,
                                  cuda::Route route, bool tf32_allowed,
                                  const cuda::WgmmaTail* tail, int tile_cols,
                                  cudaStream_t stream) {
#ifdef FGL_WITH_WGMMA
  if constexpr (!std::is_same_v<T, double>) {
    return cuda::launch_wgmma(p, route, tf32_allowed, tail, tile_cols, stream);
  }
#endif
  return cudaErrorNotSupported;
}

// The warp-mma kernel exists for the half types and float32 (3xTF32); the
// policy routes nothing else to it (plan_warp_mma).
template <typename T>
cudaError_t launch_warp_mma_if_built(const GatherLinearParams<T>& p,
                                     const cuda::WarpMmaPlan& plan,
                                     cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, double>) {
    return cuda::launch_warp_mma(p, plan, stream);
  }
  return cudaErrorNotSupported;
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

cuda::Problem describe(const at::Tensor& x, const at::Tensor& weight,
                       const detail::GatherLinearSizes& s) {
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(x.get_device());
  const int64_t e = x.element_size();
  const int64_t vec = 16 / e;
  cuda::Problem p;
  p.arch = prop->major * 10 + prop->minor;
  p.sm_count = prop->multiProcessorCount;
  p.max_smem_per_block = static_cast<int64_t>(prop->sharedMemPerBlockOptin);
  p.element_size = static_cast<int>(e);
  p.R = s.R;
  p.B = s.B;
  p.H = s.H;
  p.K = s.K;
  // The tensor map's rules: unit stride along c, rows 16-byte aligned and
  // not overlapping.
  p.weight_tma_ok = weight.stride(1) == 1 && weight.stride(0) >= s.R * s.H &&
                    weight.stride(0) % vec == 0 &&
                    aligned16(weight.const_data_ptr());
  p.x_vectors = x.stride(2) == 1 && s.H % vec == 0 && x.stride(0) % vec == 0 &&
                x.stride(1) % vec == 0 && aligned16(x.const_data_ptr());
  p.x_tma_ok = p.x_vectors && x.stride(0) > 0 && x.stride(1) > 0;
  p.rows_contiguous = x.stride(2) == 1 && weight.stride(1) == 1;
  p.x_gathered_view = detail::has_gathered_view(x);
  p.tf32_allowed =
      x.scalar_type() == at::kFloat && at::globalContext().allowTF32CuBLAS();
#ifdef FGL_WITH_WGMMA
  p.wgmma_built = true;
#endif
  p.memory_gbps = cuda::memory_gbps(x.get_device());
  if (p.arch == cuda::kStreamArch) {
    C10_CUDA_CHECK(
        cuda::stream_resident_clusters(x.get_device(), p.stream_clusters));
  }
  return p;
}

// Computes into `out` ([B, K], checked; B, K and R*H > 0).
void run(const at::Tensor& x, const at::Tensor& weight,
         const std::optional<at::Tensor>& bias,
         const detail::GatherLinearSizes& s, detail::Output& output) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  const cuda::Problem problem = describe(x, weight, s);
  const cuda::RouteChoice choice = cuda::choose(problem);
  const cuda::Route route = choice.route;
  if (route == cuda::Route::kCublasView) {
    detail::library_gemm(*detail::gathered_view(x), weight, bias, output.get());
    return;
  }
  if (route == cuda::Route::kCublasCat) {
    const at::Tensor gathered = at::cat(x.unbind(0), -1);  // before out
    detail::library_gemm(gathered, weight, bias, output.get());
    return;
  }
  TORCH_CHECK(route != cuda::Route::kTiled || s.K <= cuda::max_tiled_k(),
              "gather_linear: K = ", s.K, " (weight.size(0)) exceeds the ",
              cuda::max_tiled_k(),
              " output features one tiled CUDA launch covers");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // The tail split's workspace, from the stream's allocator: no other
  // launch touches it before this one is done.
  at::Tensor workspace;
  std::optional<cuda::WgmmaTail> tail;
  if (choice.wgmma_tail) {
    workspace = at::empty({choice.wgmma_tail->workspace_bytes},
                          x.options().dtype(at::kByte));
    tail = cuda::WgmmaTail{choice.wgmma_tail->layout, workspace.data_ptr(),
                           choice.wgmma_tail->workspace_bytes};
  }
  at::Tensor& out = output.get();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "gather_linear_cuda", [&] {
        using T = typename KernelType<scalar_t>::type;
        const auto p =
            detail::make_params<T, scalar_t>(x, weight, bias, out, s);
        if (route == cuda::Route::kWarpDot) {
          C10_CUDA_CHECK(cuda::launch_warp_dot(p, *choice.warp_dot, stream));
        } else if (route == cuda::Route::kWarpMma) {
          C10_CUDA_CHECK(launch_warp_mma_if_built(p, *choice.warp_mma, stream));
        } else if (route == cuda::Route::kWgmma ||
                   route == cuda::Route::kWgmmaPingpong ||
                   route == cuda::Route::kWgmmaSplit ||
                   route == cuda::Route::kWgmmaStationary ||
                   route == cuda::Route::kWgmmaPacked) {
          C10_CUDA_CHECK(launch_wgmma_if_built(p, route, problem.tf32_allowed,
                                               tail ? &*tail : nullptr,
                                               choice.wgmma_tile_cols, stream));
        } else if (route == cuda::Route::kStream) {
          C10_CUDA_CHECK(cuda::launch_stream(p, *choice.stream,
                                             problem.x_vectors, stream));
        } else {
          C10_CUDA_CHECK(cuda::launch_tiled(p, stream));
        }
      });
}

at::Tensor& gather_linear_out_cuda(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   at::Tensor& out) {
  return detail::gather_linear_out_with(x, weight, bias, out, run);
}

at::Tensor gather_linear_cuda(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  return detail::gather_linear_with(x, weight, bias, run);
}

// The route run() takes for the same inputs.
std::string name_route(const at::Tensor& x, const at::Tensor& weight,
                       const detail::GatherLinearSizes& s) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  return cuda::route_name(cuda::choose(describe(x, weight, s)).route);
}

std::string gather_linear_route_cuda(const at::Tensor& x,
                                     const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias) {
  return detail::gather_linear_route_with(x, weight, bias, name_route);
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CUDA, m) {
  m.impl("gather_linear", &gather_linear_cuda);
  m.impl("gather_linear.out", &gather_linear_out_cuda);
  m.impl("gather_linear_route", &gather_linear_route_cuda);
}

}  // namespace fgl
