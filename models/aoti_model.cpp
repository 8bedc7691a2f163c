#include "fgl/models/aoti_model.h"

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

namespace fgl::models {
namespace {

constexpr const char* kModelName = "model";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_aoti_package(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& record : reader.getAllRecords()) {
      if (record.find("data/aotinductor/") != std::string::npos) {
        return true;
      }
    }
    return false;
  } catch (const c10::Error&) {
    return ends_with(path, ".pt2");
  }
}

std::unordered_map<std::string, std::string> read_aoti_metadata(
    const std::string& path) {
  return torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(
      path, kModelName);
}

std::string aoti_device(
    const std::unordered_map<std::string, std::string>& metadata) {
  for (const char* key : {"device", "AOTI_DEVICE_KEY"}) {
    const auto it = metadata.find(key);
    if (it != metadata.end() && !it->second.empty()) {
      return it->second;
    }
  }
  return "";
}

AotiModel::AotiModel(const std::string& path, const c10::Device& device)
    : loader_(std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          path, kModelName, /*run_single_threaded=*/false, /*num_runners=*/1,
          device.is_cuda() ? device.index() : -1)),
      metadata_(loader_->get_metadata()) {}

AotiModel::~AotiModel() = default;

at::Tensor AotiModel::forward(const at::Tensor& x) {
  const auto outputs = loader_->run({x});
  TORCH_CHECK(outputs.size() == 1, "the package returned ", outputs.size(),
              " outputs; fgl_infer runs models with one output (B, K)");
  return outputs[0];
}

std::optional<LinearWeights> AotiModel::weights(
    const std::string& prefix) const {
  auto* runner = loader_->get_runner();
  const auto constants = runner->extract_constants_map(/*use_inactive=*/false);
  const auto fqns = runner->getConstantNamesToOriginalFQNs();
  // The map is keyed by original FQN in current torch; older versions used
  // the internal constant names, which map to FQNs.
  auto find = [&](const std::string& fqn) -> std::optional<at::Tensor> {
    if (const auto it = constants.find(fqn); it != constants.end()) {
      return it->second;
    }
    for (const auto& [name, original] : fqns) {
      if (original == fqn) {
        if (const auto it = constants.find(name); it != constants.end()) {
          return it->second;
        }
      }
    }
    return std::nullopt;
  };
  const auto weight = find(prefix + "weight");
  if (!weight) {
    return std::nullopt;
  }
  return LinearWeights{*weight, find(prefix + "bias"), prefix, {}};
}

}  // namespace fgl::models
