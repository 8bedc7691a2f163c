#include "fgl/models/weights.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "fgl/io/sharded_index.h"
#include "fgl/io/tensor_file.h"

namespace fgl::models {
namespace {

std::optional<at::Tensor> find(const io::TensorFile& file,
                               const std::string& name) {
  const auto it = std::find(file.names.begin(), file.names.end(), name);
  if (it == file.names.end()) {
    return std::nullopt;
  }
  return file.tensors[it - file.names.begin()];
}

// At most 12 names, then how many there are in all.
std::string first_names(const std::vector<std::string>& names) {
  std::ostringstream os;
  const size_t shown = std::min<size_t>(names.size(), 12);
  for (size_t i = 0; i < shown; ++i) os << (i ? ", " : "") << names[i];
  if (shown < names.size()) os << ", ... (" << names.size() << " in all)";
  return os.str();
}

// At most 12 entries with their shapes, read or not, then how many there
// are in all.
std::string list_names(const io::TensorFile& file) {
  std::ostringstream os;
  const size_t count = file.names.size() + file.unread.size();
  const size_t shown = std::min<size_t>(count, 12);
  for (size_t i = 0; i < shown; ++i) {
    os << (i ? ", " : "");
    if (i < file.names.size()) {
      os << file.names[i] << " " << file.tensors[i].sizes();
    } else {
      const auto& entry = file.unread[i - file.names.size()];
      os << entry.name << " " << c10::IntArrayRef(entry.shape);
    }
  }
  if (shown < count) os << ", ... (" << count << " in all)";
  if (!file.skipped.empty()) {
    os << "; not read: " << file.skipped.front();
    if (file.skipped.size() > 1) {
      os << " and " << file.skipped.size() - 1 << " more";
    }
  }
  return os.str();
}

// The prefixes read_weights tries, in order.
std::vector<std::string> candidate_prefixes(const std::string& prefix) {
  if (prefix.empty()) return {"", "proj."};
  return {dotted_prefix(prefix)};
}

// <p>weight and <p>bias for every candidate prefix p.
std::vector<std::string> wanted_names(
    const std::vector<std::string>& prefixes) {
  std::vector<std::string> names;
  for (const auto& p : prefixes) {
    names.push_back(p + "weight");
    names.push_back(p + "bias");
  }
  return names;
}

std::string missing_weight(const std::vector<std::string>& prefixes) {
  return prefixes.size() > 1 ? "'weight' or 'proj.weight'"
                             : "'" + prefixes[0] + "weight'";
}

// The first candidate prefix whose weight `file` holds.
LinearWeights pick(const io::TensorFile& file,
                   const std::vector<std::string>& prefixes,
                   const std::string& path) {
  for (const auto& p : prefixes) {
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
  TORCH_CHECK(false, path, " has no ", missing_weight(prefixes),
              " tensor; it holds: ", list_names(file),
              ". Pass the prefix of the linear layer's weight, e.g. "
              "--weights-prefix encoder.out_proj");
}

// A sharded checkpoint: only the shards holding the weight and bias are
// read (and of a safetensors shard only those two tensors).
LinearWeights read_sharded(const std::string& index_path,
                           const std::vector<std::string>& prefixes,
                           uint64_t max_expanded) {
  const auto shards = io::read_sharded_index(index_path);
  for (const auto& p : prefixes) {
    const auto weight = shards.find(p + "weight");
    if (weight == shards.end()) continue;
    std::vector<std::string> files{weight->second};
    const auto bias = shards.find(p + "bias");
    if (bias != shards.end() && bias->second != weight->second) {
      files.push_back(bias->second);
    }
    io::TensorFile merged;
    for (const auto& shard : files) {
      const io::TensorFile part = io::read_tensor_file(
          shard, /*nested=*/true, max_expanded, {p + "weight", p + "bias"});
      merged.names.insert(merged.names.end(), part.names.begin(),
                          part.names.end());
      merged.tensors.insert(merged.tensors.end(), part.tensors.begin(),
                            part.tensors.end());
    }
    return pick(merged, {p}, weight->second);
  }
  std::vector<std::string> names;
  for (const auto& entry : shards) names.push_back(entry.first);
  TORCH_CHECK(false, index_path, " (a sharded checkpoint's index) names no ",
              missing_weight(prefixes),
              " tensor; it names: ", first_names(names),
              ". Pass the prefix of the linear layer's weight, e.g. "
              "--weights-prefix encoder.out_proj");
}

}  // namespace

std::string dotted_prefix(const std::string& prefix) {
  return prefix.empty() || prefix.back() == '.' ? prefix : prefix + ".";
}

LinearWeights read_weights(const std::string& path, const std::string& prefix,
                           uint64_t max_expanded) {
  const auto prefixes = candidate_prefixes(prefix);
  if (io::is_sharded_index(path)) {
    return read_sharded(path, prefixes, max_expanded);
  }
  return pick(io::read_tensor_file(path, /*nested=*/true, max_expanded,
                                   wanted_names(prefixes)),
              prefixes, path);
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
