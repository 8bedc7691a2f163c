// CPU backend of fgl::gather_linear: the torch-facing side. It describes
// the problem to the routing policy (cpu_route.h) and runs the route it
// names: the AVX-512 dot-product kernel, which reads x in place
// (avx512_dot_kernel.h); one BLAS GEMM over x's gathered view
// (gathered_view.h) or over the concatenation x's strides do not hold; or
// one GEMM per slice,
//   out = bias + sum_r x[r] @ weight[:, r*H:(r+1)*H]^T
// with x[r] and the weight column block as strided views that BLAS reads in
// place when one of their strides is 1.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <string>

#include "backend_entry.h"
#include "cpu/cpu_route.h"
#include "gather_linear_checks.h"
#include "gathered_view.h"
#include "make_params.h"
#ifdef FGL_WITH_AVX512_DOT
#include "cpu/avx512_dot_kernel.h"
#endif

namespace fgl {
namespace {

cpu::Dtype dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return cpu::Dtype::kFloat16;
    case at::kBFloat16:
      return cpu::Dtype::kBFloat16;
    case at::kDouble:
      return cpu::Dtype::kFloat64;
    default:
      return cpu::Dtype::kFloat32;
  }
}

// From this many slices one strided copy of x (B, R, H) built the
// concatenation faster than `cat`'s copy per slice (bench/NOTES.md, "c8").
constexpr int64_t kMinSlicesForOneCopy = 8;

// x's concatenation (B, R*H), bit for bit the reference's.
at::Tensor concatenation(const at::Tensor& x) {
  if (x.size(0) >= kMinSlicesForOneCopy) {
    return x.permute({1, 0, 2}).reshape({x.size(1), x.size(0) * x.size(2)});
  }
  return at::cat(x.unbind(0), -1);
}

void gemm_slices(const at::Tensor& x, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias,
                 const detail::GatherLinearSizes& s, detail::Output& out) {
  // Half types accumulate in float32 across slices: summing R partial
  // products in bf16 would round R times.
  const bool reduced = at::isReducedFloatingType(x.scalar_type());
  at::Tensor acc = reduced
                       ? at::empty({s.B, s.K}, x.options().dtype(at::kFloat))
                       : out.get();
  if (detail::has_bias(bias)) {
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
    out.get().copy_(acc);
  }
}

cpu::Problem describe(const at::Tensor& x, const at::Tensor& weight,
                      const detail::GatherLinearSizes& s) {
  cpu::Problem p;
  p.cpu = cpu::detect_features();
  p.dtype = dtype_of(x.scalar_type());
  p.R = s.R;
  p.B = s.B;
  p.H = s.H;
  p.K = s.K;
  p.dot_layout = x.stride(2) == 1 && weight.stride(1) == 1;
  p.x_gathered_view = detail::has_gathered_view(x);
  p.threads = at::get_num_threads();
  return p;
}

// Computes into `out` ([B, K], checked; B, K and R*H > 0).
void run(const at::Tensor& x, const at::Tensor& weight,
         const std::optional<at::Tensor>& bias,
         const detail::GatherLinearSizes& s, detail::Output& out) {
  switch (cpu::choose_route(describe(x, weight, s))) {
    case cpu::Route::kDotKernel:
#ifdef FGL_WITH_AVX512_DOT
      AT_DISPATCH_FLOATING_TYPES_AND2(
          at::kHalf, at::kBFloat16, x.scalar_type(), "gather_linear_cpu", [&] {
            const auto p = detail::make_params<scalar_t, scalar_t>(
                x, weight, bias, out.get(), s);
            // Threads own disjoint tiles of output features.
            const auto tiles = cpu::avx512_dot_tiles(s.B, s.R, s.H, s.K);
            at::parallel_for(0, tiles.count, tiles.grain,
                             [&](int64_t begin, int64_t end) {
                               cpu::avx512_dot_gather_linear(p, begin, end);
                             });
          });
      return;
#else
      break;  // never chosen: detect_features() reports no dot kernel
#endif
    case cpu::Route::kGemmView:
      detail::library_gemm(*detail::gathered_view(x), weight, bias, out.get());
      return;
    case cpu::Route::kGemmCat: {
      const at::Tensor gathered = concatenation(x);  // before out
      detail::library_gemm(gathered, weight, bias, out.get());
      return;
    }
    case cpu::Route::kGemmSlices:
      break;
  }
  gemm_slices(x, weight, bias, s, out);
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

// The route run() takes for the same inputs.
std::string name_route(const at::Tensor& x, const at::Tensor& weight,
                       const detail::GatherLinearSizes& s) {
  return cpu::route_name(cpu::choose_route(describe(x, weight, s)));
}

std::string gather_linear_route_cpu(const at::Tensor& x,
                                    const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  return detail::gather_linear_route_with(x, weight, bias, name_route);
}

}  // namespace

TORCH_LIBRARY_IMPL(fgl, CPU, m) {
  m.impl("gather_linear", &gather_linear_cpu);
  m.impl("gather_linear.out", &gather_linear_out_cpu);
  m.impl("gather_linear_route", &gather_linear_route_cpu);
}

}  // namespace fgl
