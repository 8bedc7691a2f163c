// GatherLinearParams from checked tensors, for the backends' torch-facing
// files. KernelT is the kernel's element type, bit-identical to ScalarT (the
// same type on the CPU; __half for at::Half where a CUDA kernel takes it).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "gather_linear_checks.h"
#include "gather_linear_params.h"

namespace fgl::detail {

template <typename KernelT, typename ScalarT>
GatherLinearParams<KernelT> make_params(const at::Tensor& x,
                                        const at::Tensor& weight,
                                        const std::optional<at::Tensor>& bias,
                                        at::Tensor& out,
                                        const GatherLinearSizes& s) {
  static_assert(sizeof(KernelT) == sizeof(ScalarT));
  const bool with_bias = has_bias(bias);
  GatherLinearParams<KernelT> p{};
  p.x = reinterpret_cast<const KernelT*>(x.const_data_ptr<ScalarT>());
  p.weight = reinterpret_cast<const KernelT*>(weight.const_data_ptr<ScalarT>());
  p.bias =
      with_bias
          ? reinterpret_cast<const KernelT*>(bias->const_data_ptr<ScalarT>())
          : nullptr;
  p.out = reinterpret_cast<KernelT*>(out.mutable_data_ptr<ScalarT>());
  p.R = s.R;
  p.B = s.B;
  p.H = s.H;
  p.K = s.K;
  p.x_stride_r = x.stride(0);
  p.x_stride_b = x.stride(1);
  p.x_stride_h = x.stride(2);
  p.weight_stride_k = weight.stride(0);
  p.weight_stride_c = weight.stride(1);
  p.bias_stride = with_bias ? bias->stride(0) : 0;
  p.out_stride_b = out.stride(0);
  p.out_stride_k = out.stride(1);
  return p;
}

}  // namespace fgl::detail
