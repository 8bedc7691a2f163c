// GatherLinear: linear(cat(x.unbind(0), -1)) as a libtorch module. forward()
// is the fused fgl::gather_linear op; forward_reference() is the cat + Linear
// path it replaces, kept so every result can be checked against it.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>

namespace fgl::models {

struct GatherLinearOptions {
  GatherLinearOptions(int64_t R, int64_t H, int64_t K) : R_(R), H_(H), K_(K) {}
  /// Slices in x (heads, shards): x is [R, B, H].
  TORCH_ARG(int64_t, R);
  /// Features per slice.
  TORCH_ARG(int64_t, H);
  /// Output features: the result is [B, K].
  TORCH_ARG(int64_t, K);
  TORCH_ARG(bool, bias) = true;
};

struct GatherLinearImpl : torch::nn::Module {
  explicit GatherLinearImpl(const GatherLinearOptions& options);
  GatherLinearImpl(int64_t R, int64_t H, int64_t K)
      : GatherLinearImpl(GatherLinearOptions(R, H, K)) {}

  /// x [R, B, H] -> [B, K] in one fgl::gather_linear call (the dispatcher
  /// picks the CPU or CUDA kernel); no concatenated copy of x is made.
  torch::Tensor forward(const torch::Tensor& x);

  /// proj(cat(x.unbind(0), -1)): the unfused path, same weights.
  torch::Tensor forward_reference(const torch::Tensor& x);

  /// The route forward(x) takes on x's device (fgl::gather_linear_route),
  /// without computing it.
  std::string route(const torch::Tensor& x);

  GatherLinearOptions options;
  torch::nn::Linear proj{nullptr};  // weight [K, R*H], bias [K]

 private:
  void check_input(const torch::Tensor& x) const;
  std::optional<at::Tensor> bias() const;  // none where options.bias() is off
};
TORCH_MODULE(GatherLinear);

}  // namespace fgl::models
