#include "models/weights.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "models/tensor_file.h"

namespace fgl::models {
namespace {

std::optional<at::Tensor> find(const TensorFile& file,
                               const std::string& name) {
  const auto it = std::find(file.names.begin(), file.names.end(), name);
  if (it == file.names.end()) {
    return std::nullopt;
  }
  return file.tensors[it - file.names.begin()];
}

std::string list_names(const TensorFile& file) {
  std::ostringstream os;
  const size_t shown = std::min<size_t>(file.names.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    os << (i ? ", " : "") << file.names[i] << " " << file.tensors[i].sizes();
  }
  if (shown < file.names.size()) {
    os << ", ... (" << file.names.size() << " in all)";
  }
  if (!file.skipped.empty()) {
    os << "; not read: " << file.skipped.front();
    if (file.skipped.size() > 1) {
      os << " and " << file.skipped.size() - 1 << " more";
    }
  }
  return os.str();
}

}  // namespace

LinearWeights read_weights(const std::string& path, const std::string& prefix,
                           uint64_t max_expanded) {
  const TensorFile file = read_tensor_file(path, /*nested=*/true, max_expanded);
  std::vector<std::string> candidates;
  if (prefix.empty()) {
    candidates = {"", "proj."};
  } else {
    candidates = {prefix.back() == '.' ? prefix : prefix + "."};
  }
  for (const auto& p : candidates) {
    const auto weight = find(file, p + "weight");
    if (!weight) {
      continue;
    }
    TORCH_CHECK(weight->dim() == 2, path, ": ", p,
                "weight must be 2-D (K, R*H), got shape ", weight->sizes());
    LinearWeights out{*weight, find(file, p + "bias"), p, file.skipped};
    if (out.bias) {
      TORCH_CHECK(out.bias->dim() == 1 && out.bias->size(0) == out.K(), path,
                  ": ", p, "bias must be 1-D of length K = ", out.K(),
                  " (from ", p, "weight ", weight->sizes(), "), got shape ",
                  out.bias->sizes());
    }
    return out;
  }
  TORCH_CHECK(false, path, " has no ",
              prefix.empty() ? "'weight' or 'proj.weight'"
                             : "'" + candidates[0] + "weight'",
              " tensor; it holds: ", list_names(file),
              ". Pass the prefix of the linear layer's weight, e.g. "
              "--weights-prefix encoder.out_proj");
}

GatherLinearOptions options_for(const LinearWeights& weights, int64_t R,
                                int64_t H) {
  TORCH_CHECK(R * H == weights.in_features(), "x and the weights disagree: x ",
              "has R=", R, " and H=", H, " (R*H=", R * H, ") but '",
              weights.prefix, "weight' has shape ", weights.weight.sizes(),
              " (K=", weights.K(), ", R*H=", weights.in_features(), ")");
  return GatherLinearOptions(R, H, weights.K()).bias(weights.bias.has_value());
}

void load_weights(GatherLinearImpl& model, const LinearWeights& weights) {
  const auto& o = model.options;
  TORCH_CHECK(weights.K() == o.K() && weights.in_features() == o.R() * o.H(),
              "'", weights.prefix, "weight' has shape ", weights.weight.sizes(),
              " but the model expects (K, R*H) = (", o.K(), ", ", o.R() * o.H(),
              ") (R=", o.R(), ", H=", o.H(), ")",
              weights.K() != o.K() ? "; K differs" : "",
              weights.in_features() != o.R() * o.H() ? "; R*H differs" : "");
  TORCH_CHECK(weights.bias.has_value() == o.bias(), "the model was built ",
              o.bias() ? "with" : "without", " a bias but the weights have ",
              weights.bias ? "one" : "none");
  torch::NoGradGuard no_grad;
  model.proj->weight.copy_(weights.weight);
  if (weights.bias) {
    model.proj->bias.copy_(*weights.bias);
  }
}

void load_weights(GatherLinearImpl& model, const std::string& path,
                  const std::string& prefix) {
  load_weights(model, read_weights(path, prefix));
}

}  // namespace fgl::models
