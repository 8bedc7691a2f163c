#include "fgl/io/sharded_index.h"

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fgl/io/input_file.h"
#include "fgl/io/paths.h"

namespace fgl::io {

bool is_sharded_index(const std::string& path) {
  return has_suffix(path, ".index.json");
}

std::map<std::string, std::string> read_sharded_index(const std::string& path) {
  const InputFile file(path);
  std::string text(file.size(), '\0');
  file.read_exact(0, text.data(), text.size());
  const auto json =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TORCH_CHECK(!json.is_discarded() && json.is_object(), path,
              " is not a JSON object (a sharded checkpoint's index)");
  const auto map = json.find("weight_map");
  TORCH_CHECK(map != json.end() && map->is_object(), path,
              " has no \"weight_map\" object naming each tensor's shard");
  const std::string dir = parent_directory(path);
  std::map<std::string, std::string> shards;
  for (const auto& [name, shard] : map->items()) {
    TORCH_CHECK(shard.is_string(), path, ": the shard of '", name,
                "' is not a file name");
    const auto& file_name = shard.get_ref<const std::string&>();
    TORCH_CHECK(!file_name.empty() && file_name != "." && file_name != ".." &&
                    file_name.find('/') == std::string::npos,
                path, ": the shard of '", name, "' is '",
                file_name.substr(0, 64), "', not a file beside the index");
    shards.emplace(name, dir + "/" + file_name);
  }
  return shards;
}

}  // namespace fgl::io
