#include "fgl/models/scripted_model.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import.h>

#include <exception>

#include "fgl/io/input_file.h"

namespace fgl::models {
namespace {

// "Unknown builtin op: other::op.\n..." -> "other::op".
std::optional<std::string> unknown_op(const std::string& message) {
  const std::string marker = "Unknown builtin op: ";
  const auto at = message.find(marker);
  if (at == std::string::npos) {
    return std::nullopt;
  }
  const auto begin = at + marker.size();
  auto end = message.find_first_of(" \n", begin);
  std::string op = message.substr(begin, end - begin);
  while (!op.empty() && op.back() == '.') {
    op.pop_back();
  }
  return op;
}

bool holds_torchscript_code(const io::InputFile& file) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(file.adapter());
    for (const auto& record : reader.getAllRecords()) {
      if (record.rfind("code/", 0) == 0) {
        return true;
      }
    }
  } catch (const c10::Error&) {
  }
  return false;
}

// Opened once (io/input_file.h): the archive checked is the one loaded.
torch::jit::Module load(const std::string& path) {
  const io::InputFile file(path);
  TORCH_CHECK(holds_torchscript_code(file), path,
              " is not a TorchScript archive (no TorchScript code inside); "
              "write one with torch.jit.script(model).save(path)");
  try {
    return torch::jit::load(file.adapter(), c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    // The TorchScript compiler throws torch::jit::ErrorReport, not c10::Error.
    if (const auto op = unknown_op(e.what())) {
      TORCH_CHECK(false,
                  "the model calls an operator that is not registered: ", *op,
                  "; load the library that defines it (fgl_infer has only "
                  "fgl::gather_linear and the ATen ops)");
    }
    throw;
  }
}

void check_forward(const torch::jit::Module& module, const std::string& path) {
  const auto method = module.find_method("forward");
  TORCH_CHECK(method.has_value(), path, " has no forward method");
  const auto& schema = method->function().getSchema();
  const auto& args = schema.arguments();  // args[0] is self
  const bool one_tensor =
      args.size() == 2 && args[1].type()->kind() == c10::TypeKind::TensorType;
  TORCH_CHECK(one_tensor,
              "the model's forward must take one Tensor x (R, B, "
              "H), but it is ",
              schema);
}

}  // namespace

bool is_torchscript_archive(const std::string& path) {
  try {
    return holds_torchscript_code(io::InputFile(path));
  } catch (const c10::Error&) {
    return false;
  }
}

ScriptedModel::ScriptedModel(const std::string& path) : module_(load(path)) {
  check_forward(module_, path);
  module_.eval();
}

void ScriptedModel::to(const c10::Device& device, c10::ScalarType dtype) {
  module_.to(device, dtype);
}

at::Tensor ScriptedModel::forward(const at::Tensor& x) {
  const auto out = module_.forward({x});
  TORCH_CHECK(out.isTensor(), "the model's forward returned a ", out.tagKind(),
              ", not a Tensor");
  return out.toTensor();
}

std::optional<LinearWeights> ScriptedModel::weights(
    const std::string& prefix) const {
  LinearWeights w;
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    if (p.name == prefix + "weight") {
      w.weight = p.value.detach();
    } else if (p.name == prefix + "bias") {
      w.bias = p.value.detach();
    }
  }
  if (!w.weight.defined()) {
    return std::nullopt;
  }
  w.prefix = prefix;
  return w;
}

std::optional<int64_t> ScriptedModel::int_attribute(
    const std::string& name) const {
  if (!module_.hasattr(name)) {
    return std::nullopt;
  }
  const auto value = module_.attr(name);
  return value.isInt() ? std::optional<int64_t>(value.toInt()) : std::nullopt;
}

}  // namespace fgl::models
