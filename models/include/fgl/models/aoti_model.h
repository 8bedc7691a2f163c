// An AOTInductor package (.pt2 from torch._inductor.aoti_compile_and_package)
// loaded with torch::inductor::AOTIModelPackageLoader. The package was
// compiled for one device and dtype; its forward takes x [R, B, H]. The op
// library must be loaded first (programs link libfgl_ops.so).
// NOTE: a package holds compiled code; load only files you trust.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "fgl/models/weights.h"

namespace torch::inductor {
class AOTIModelPackageLoader;
}

namespace fgl::models {

/// Whether `path` is an AOTInductor package: a zip archive with
/// "<model>/data/aotinductor/" entries (a .pt2 extension as a fallback when
/// the archive cannot be listed).
bool is_aoti_package(const std::string& path);

/// The package's metadata (R, H, K and "device" as python/fgl/export.py
/// writes them, plus AOTInductor's own keys), read without loading the
/// compiled code.
std::unordered_map<std::string, std::string> read_aoti_metadata(
    const std::string& path);

/// The device type a package was compiled for ("cpu", "cuda"), from
/// `metadata`; empty when it does not say.
std::string aoti_device(
    const std::unordered_map<std::string, std::string>& metadata);

class AotiModel {
 public:
  /// Loads the package's compiled code for `device` (its type must be the
  /// package's; cuda:N picks the GPU).
  AotiModel(const std::string& path, const c10::Device& device);
  ~AotiModel();

  at::Tensor forward(const at::Tensor& x);

  /// `<prefix>weight` / `<prefix>bias` (by default GatherLinear's `proj.`)
  /// from the package's constants; nullopt when the package does not hold
  /// that weight. `prefix` ends in a dot.
  std::optional<LinearWeights> weights(
      const std::string& prefix = "proj.") const;

  const std::unordered_map<std::string, std::string>& metadata() const {
    return metadata_;
  }

 private:
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  std::unordered_map<std::string, std::string> metadata_;
};

}  // namespace fgl::models
