// The index of a sharded checkpoint, as Hugging Face writes them
// (model.safetensors.index.json, pytorch_model.bin.index.json): a JSON
// object whose "weight_map" names, for every tensor, the shard file beside
// the index that holds it.
#pragma once

#include <map>
#include <string>

namespace fgl::io {

/// Whether `path` names a sharded checkpoint's index (it ends in
/// ".index.json").
bool is_sharded_index(const std::string& path);

/// Tensor name -> shard path (the index's directory joined with the shard's
/// file name). Throws c10::Error for invalid JSON, a missing weight_map, or
/// a shard that is not a plain file name: an index may not send the reader
/// elsewhere ("../", absolute paths).
std::map<std::string, std::string> read_sharded_index(const std::string& path);

}  // namespace fgl::io
