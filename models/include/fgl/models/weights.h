// Weights for GatherLinear from a file. Accepted layouts, in any format
// read_tensor_file reads:
//   - nn.Linear(...).state_dict() saved from Python: keys "weight", "bias";
//   - the state_dict of a bigger model: keys "<prefix>weight", "<prefix>bias";
//   - a C++ torch::save(GatherLinear): "proj.weight", "proj.bias".
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fgl/models/gather_linear_module.h"

namespace fgl::models {

struct LinearWeights {
  at::Tensor weight;                 // [K, R*H]
  std::optional<at::Tensor> bias;    // [K]
  std::string prefix;                // the prefix the tensors were found under
  std::vector<std::string> skipped;  // the file's entries not read (why)
  int64_t K() const { return weight.size(0); }
  int64_t in_features() const { return weight.size(1); }
};

/// A layer's name prefix as a user gives it ("encoder.out_proj", with or
/// without its trailing dot), ending in a dot.
std::string dotted_prefix(const std::string& prefix);

/// Reads `<prefix>weight` and, when present, `<prefix>bias` from `path`. An
/// empty prefix looks for "weight", then "proj.weight"; a prefix may be given
/// with or without its trailing dot. `path` may be a sharded checkpoint's
/// index (sharded_index.h): then only the shards holding those tensors are
/// read; of a safetensors file only those tensors are read.
/// `max_expanded` as in read_tensor_file.
/// Throws c10::Error naming what is missing or misshapen and the names the
/// file does hold.
LinearWeights read_weights(const std::string& path,
                           const std::string& prefix = "",
                           uint64_t max_expanded = UINT64_MAX);

/// Options for a module that takes x [R, B, H] with these weights. R and H
/// come from x, since a [K, R*H] weight cannot tell them apart; throws
/// c10::Error saying which dims disagree when R*H is not the weight's width.
GatherLinearOptions options_for(const LinearWeights& weights, int64_t R,
                                int64_t H);

/// Copies `weights` into `model`, after checking their shapes (and whether
/// there is a bias) against the model's options.
void load_weights(GatherLinearImpl& model, const LinearWeights& weights);

/// read_weights + load_weights.
void load_weights(GatherLinearImpl& model, const std::string& path,
                  const std::string& prefix = "");

}  // namespace fgl::models
