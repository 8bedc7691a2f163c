// A TorchScript model file (torch.jit.save of a module whose forward takes
// x [R, B, H]), loaded with torch::jit::load. The op library must be loaded
// (programs link libfgl_ops.so) for torch.ops.fgl.gather_linear to resolve.
// NOTE: a TorchScript file is code; load only files you trust.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <optional>
#include <string>

#include "fgl/models/weights.h"

namespace fgl::models {

class ScriptedModel {
 public:
  /// Loads `path` onto the CPU. Throws c10::Error when the file is not a
  /// TorchScript archive, calls an operator that is not registered, or has a
  /// forward that does not take exactly one Tensor.
  explicit ScriptedModel(const std::string& path);

  /// Moves the parameters and buffers; the module is in eval mode.
  void to(const c10::Device& device, c10::ScalarType dtype);

  at::Tensor forward(const at::Tensor& x);

  /// `<prefix>weight` and `<prefix>bias` from the named parameters (by
  /// default GatherLinear's `proj.`), as they are now (device, dtype);
  /// nullopt without that weight. `prefix` ends in a dot.
  std::optional<LinearWeights> weights(
      const std::string& prefix = "proj.") const;

  /// An int attribute of the module (R, H, K of GatherLinear), if it has one.
  std::optional<int64_t> int_attribute(const std::string& name) const;

 private:
  torch::jit::Module module_;
};

/// Whether `path` is a zip archive holding TorchScript code (code/ entries).
bool is_torchscript_archive(const std::string& path);

}  // namespace fgl::models
