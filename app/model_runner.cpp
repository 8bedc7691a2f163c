#include "model_runner.h"

#include <chrono>
#include <memory>
#include <utility>

#include "errors.h"
#include "fail.h"
#include "fgl/models/aoti_model.h"
#include "fgl/models/gather_linear_module.h"
#include "fgl/models/scripted_model.h"
#include "fgl/parallel/nccl_groups.h"
#include "log.h"

namespace fgl::app {
namespace {

// How long a rank waits for the others (the rendezvous, each all-reduce)
// before the run fails instead of hanging.
constexpr std::chrono::minutes kTensorParallelTimeout{2};

constexpr const char* kModelHint =
    "--model must be a TorchScript file (torch.jit.script(model).save) or an "
    "AOTInductor package (.pt2) whose forward takes x (R, B, H); "
    "examples/export_model.py writes both";

// The prefix of the layer whose weights the reference uses: --weights-prefix
// (trailing dot optional), else GatherLinear's "proj.".
std::string layer_prefix(const InferOptions& o) {
  return o.weights_prefix.empty() ? "proj."
                                  : models::dotted_prefix(o.weights_prefix);
}

// The reference over the model's own weights; empty without them, which
// only --no-check accepts.
Forward reference_forward(const std::optional<models::LinearWeights>& weights,
                          const InferOptions& o, int64_t R, int64_t H,
                          const c10::Device& device, c10::ScalarType dtype) {
  if (!weights && !o.check) {
    return {};
  }
  if (!weights) {
    throw AppError(kExitDataErr,
                   "model " + o.model + " has no " + layer_prefix(o) +
                       "weight parameter, so there is no reference to check "
                       "it against",
                   "pass --weights-prefix with the name of the model's "
                   "linear layer (e.g. out_proj), or --no-check to run it "
                   "unchecked");
  }
  return weights_forwards(*weights, R, H, device, dtype).reference;
}

// The run and reference forwards of a loaded model (ScriptedModel or
// AotiModel); `noun` names the file in messages ("model", "package").
template <typename Model>
ModelForwards forwards_of(const char* format, const std::string& noun,
                          std::shared_ptr<Model> model, const InferOptions& o,
                          const c10::Device& device, c10::ScalarType dtype,
                          int64_t R, int64_t H) {
  const auto weights = model->weights(layer_prefix(o));
  ModelForwards forwards;
  forwards.format = format;
  forwards.dtype = dtype;
  forwards.run = [model](const at::Tensor& x) mutable {
    return model->forward(x);
  };
  forwards.reference = or_fail(
      kExitDataErr, noun + " " + o.model + " does not fit the input",
      "x must be (R, B, H) and " + layer_prefix(o) + "weight (K, R*H)",
      [&] { return reference_forward(weights, o, R, H, device, dtype); });
  forwards.K = weights ? weights->K() : 0;
  if (weights) forwards.bias = weights->bias.has_value();
  return forwards;
}

void check_attribute(const models::ScriptedModel& model, const char* name,
                     int64_t want, const std::string& path) {
  const auto value = model.int_attribute(name);
  if (value && *value != want) {
    throw AppError(kExitDataErr,
                   "model " + path + " has " + name + "=" +
                       std::to_string(*value) + " but the input has " + name +
                       "=" + std::to_string(want),
                   "x must be (R, B, H) for the model's R and H");
  }
}

ModelForwards torchscript_forwards(const InferOptions& o,
                                   const c10::Device& device,
                                   c10::ScalarType dtype, int64_t R,
                                   int64_t H) {
  auto model =
      or_fail(kExitDataErr, "cannot load model " + o.model, kModelHint,
              [&] { return std::make_shared<models::ScriptedModel>(o.model); });
  check_attribute(*model, "R", R, o.model);
  check_attribute(*model, "H", H, o.model);
  model->to(device, dtype);
  auto forwards =
      forwards_of("torchscript", "model", model, o, device, dtype, R, H);
  if (forwards.K == 0) forwards.K = model->int_attribute("K").value_or(0);
  return forwards;
}

ModelForwards aoti_forwards(const InferOptions& o, const c10::Device& device,
                            c10::ScalarType dtype, int64_t R, int64_t H) {
  const auto metadata =
      or_fail(kExitDataErr, "cannot read package " + o.model, kModelHint,
              [&] { return models::read_aoti_metadata(o.model); });
  const std::string compiled_for = models::aoti_device(metadata);
  const auto package_device = or_fail(
      kExitDataErr,
      "package " + o.model + " names an unknown device '" + compiled_for + "'",
      kModelHint, [&] {
        return compiled_for.empty() ? device : c10::Device(compiled_for);
      });
  if (package_device.type() != device.type()) {
    throw AppError(kExitUsage,
                   "package " + o.model + " was compiled for " + compiled_for +
                       " but --device is " +
                       c10::DeviceTypeName(device.type(), /*lower_case=*/true),
                   "pass --device " + compiled_for +
                       " (a package runs only on the device type it was "
                       "compiled for) or export it again for this device");
  }
  for (const char* name : {"R", "H"}) {
    const auto it = metadata.find(name);
    const int64_t want = name[0] == 'R' ? R : H;
    if (it != metadata.end() && it->second != std::to_string(want)) {
      throw AppError(kExitDataErr,
                     "package " + o.model + " has " + name + "=" + it->second +
                         " but the input has " + name + "=" +
                         std::to_string(want),
                     "x must be (R, B, H) for the package's R and H");
    }
  }
  auto model = or_fail(
      kExitDataErr, "cannot load package " + o.model, kModelHint,
      [&] { return std::make_shared<models::AotiModel>(o.model, device); });
  const auto weights = model->weights(layer_prefix(o));
  if (weights && weights->weight.scalar_type() != dtype) {
    if (o.dtype) {
      const std::string requested = c10::getDtypeNames(*o.dtype).first;
      throw AppError(
          kExitUsage,
          "package " + o.model + " was compiled for " +
              c10::getDtypeNames(weights->weight.scalar_type()).first +
              " but --dtype is " + requested,
          "drop --dtype (the input is converted to the package's "
          "dtype) or export the package in " +
              requested + " (examples/export_model.py --dtype " + requested +
              ")");
    }
    dtype = weights->weight.scalar_type();
    log::info("converting the input to the package's dtype " +
              c10::getDtypeNames(dtype).first);
  }
  auto forwards = forwards_of("aoti", "package", model, o, device, dtype, R, H);
  if (forwards.reference && weights && !weights->bias) {
    // AOTInductor may fold the bias into the package's code (exported under
    // no_grad, only proj.weight stays a constant), so a missing bias
    // constant does not mean there is none: the check adds the model's own
    // answer for x = 0, which is its bias whatever it folded.
    forwards.reference =
        [model, linear = forwards.reference](const at::Tensor& x) mutable {
          return linear(x) + model->forward(at::zeros_like(x));
        };
    forwards.bias = std::nullopt;
  }
  const auto k = metadata.find("K");
  if (forwards.K == 0 && k != metadata.end())
    forwards.K = std::stoll(k->second);
  return forwards;
}

}  // namespace

ModelForwards weights_forwards(const models::LinearWeights& weights, int64_t R,
                               int64_t H, const c10::Device& device,
                               c10::ScalarType dtype) {
  const auto options = models::options_for(weights, R, H);
  models::GatherLinear model(options);
  models::load_weights(*model, weights);
  model->to(device, dtype);
  model->eval();
  ModelForwards forwards;
  forwards.run = [model](const at::Tensor& x) mutable {
    return model->forward(x);
  };
  forwards.reference = [model](const at::Tensor& x) mutable {
    return model->forward_reference(x);
  };
  forwards.route = [model](const at::Tensor& x) mutable {
    return model->route(x);
  };
  forwards.K = options.K();
  forwards.bias = options.bias();
  forwards.dtype = dtype;
  return forwards;
}

void split_over_gpus(ModelForwards& forwards,
                     const models::LinearWeights& weights, int64_t H,
                     const std::vector<c10::Device>& devices) {
  const auto dtype = forwards.dtype;
  const auto bias = weights.bias ? std::optional(weights.bias->to(dtype))
                                 : std::optional<at::Tensor>();
  auto runner = std::make_shared<TensorParallelRunner>(
      devices,
      nccl_groups(static_cast<int>(devices.size()), kTensorParallelTimeout),
      weights.weight.to(dtype), bias, H);
  forwards.run = [runner](const at::Tensor& x) { return (*runner)(x); };
  forwards.route = nullptr;  // each rank routes its own shard
  forwards.tensor_parallel = std::move(runner);
}

ModelForwards load_model(const InferOptions& o, const c10::Device& device,
                         c10::ScalarType dtype, int64_t R, int64_t H) {
  const bool package = models::is_aoti_package(o.model);
  log::info(
      "loading " +
      std::string(package ? "AOTInductor package " : "TorchScript model ") +
      o.model);
  return package ? aoti_forwards(o, device, dtype, R, H)
                 : torchscript_forwards(o, device, dtype, R, H);
}

}  // namespace fgl::app
