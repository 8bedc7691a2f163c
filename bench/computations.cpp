#include "computations.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "fgl/gather_linear.h"

namespace fgl::bench {

const char* computation_name(Computation c) {
  switch (c) {
    case Computation::kFused:
      return "fgl";
    case Computation::kCatLinear:
      return "cat_linear";
    case Computation::kPermuteLinear:
      return "permute_linear";
  }
  return "?";
}

int64_t Inputs::nbytes() const {
  return static_cast<int64_t>(x.nbytes() + weight.nbytes() +
                              (bias.defined() ? bias.nbytes() : 0));
}

Inputs random_inputs(const Case& c, const c10::Device& device) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(c.R * c.H));
  Inputs in;
  in.x = at::randn({c.R, c.B, c.H}, opts).to(c.dtype);
  in.weight = at::randn({c.K, c.R * c.H}, opts).mul_(w_scale).to(c.dtype);
  if (c.bias) in.bias = at::randn({c.K}, opts).to(c.dtype);
  return in;
}

at::Tensor run_computation(Computation c, const Inputs& in) {
  switch (c) {
    case Computation::kFused:
      return fgl::gather_linear(in.x, in.weight, in.bias);
    case Computation::kCatLinear:
      return at::linear(at::cat(in.x.unbind(0), -1), in.weight, in.bias);
    case Computation::kPermuteLinear: {
      const int64_t B = in.x.size(1);
      const int64_t RH = in.x.size(0) * in.x.size(2);
      return at::linear(in.x.permute({1, 0, 2}).reshape({B, RH}), in.weight,
                        in.bias);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown benchmark computation");
}

std::array<double, kComputations.size()> relative_errors(
    const Case& c, const c10::Device& device, bool fgl_only) {
  const Inputs in = random_inputs(c, device);
  const auto to_ref = [](const at::Tensor& t) {
    return t.defined() ? t.to(at::kCPU).to(at::kDouble) : t;
  };
  const at::Tensor ref = at::linear(at::cat(to_ref(in.x).unbind(0), -1),
                                    to_ref(in.weight), to_ref(in.bias));
  const double ref_norm = ref.norm().item<double>();
  std::array<double, kComputations.size()> errors;
  errors.fill(std::numeric_limits<double>::quiet_NaN());
  for (size_t i = 0; i < computations_run(fgl_only); ++i) {
    const at::Tensor out = to_ref(run_computation(kComputations[i], in));
    errors[i] = (out - ref).norm().item<double>() / ref_norm;
  }
  return errors;
}

}  // namespace fgl::bench
