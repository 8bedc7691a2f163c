// The forwards fgl_infer compares: the one under test (the fused op through
// GatherLinear, a TorchScript model or an AOTInductor package given with
// --model) and the unfused reference built from the same weights.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fgl/models/weights.h"
#include "fgl/parallel/tensor_parallel_runner.h"
#include "options.h"

namespace fgl::app {

using Forward = std::function<at::Tensor(const at::Tensor&)>;

struct ModelForwards {
  Forward run;        // the forward under test
  Forward reference;  // proj(cat(x.unbind(0), -1)); empty when not checked
  // The fused op's route for x (fgl::gather_linear_route); empty where the
  // forward is a model's own or split over GPUs.
  std::function<std::string(const at::Tensor&)> route;
  std::string format;                   // "torchscript" or "aoti"
  int64_t K = 0;                        // 0: unknown until the model has run
  std::optional<bool> bias;             // unknown for a model without weights
  c10::ScalarType dtype = c10::kFloat;  // what x must be converted to
  // --tensor-parallel: the runner behind `run`, for its per-rank times.
  std::shared_ptr<TensorParallelRunner> tensor_parallel;
};

/// The fused op and the reference over `weights`, for x [R, B, H].
ModelForwards weights_forwards(const models::LinearWeights& weights, int64_t R,
                               int64_t H, const c10::Device& device,
                               c10::ScalarType dtype);

/// Replaces the run of `forwards` (weights_forwards on devices[0]) by the
/// op split by heads over `devices`, rank p on devices[p] and NCCL between
/// them; the reference stays on devices[0].
void split_over_gpus(ModelForwards& forwards,
                     const models::LinearWeights& weights, int64_t H,
                     const std::vector<c10::Device>& devices);

/// Loads --model (TorchScript or an AOTInductor package, told apart by the
/// file's contents) for x [R, B, H] on `device`. `dtype` is the run's dtype
/// from --dtype / the input; a package keeps the dtype it was compiled for.
/// Throws AppError saying what is wrong with the file and what to do.
ModelForwards load_model(const InferOptions& options, const c10::Device& device,
                         c10::ScalarType dtype, int64_t R, int64_t H);

}  // namespace fgl::app
