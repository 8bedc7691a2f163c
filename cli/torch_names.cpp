#include "torch_names.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

namespace fgl::cli {

std::optional<c10::ScalarType> parse_dtype(const std::string& name) {
  static const std::map<std::string, c10::ScalarType> names{
      {"float32", c10::kFloat},     {"fp32", c10::kFloat},
      {"float", c10::kFloat},       {"float16", c10::kHalf},
      {"fp16", c10::kHalf},         {"half", c10::kHalf},
      {"bfloat16", c10::kBFloat16}, {"bf16", c10::kBFloat16},
      {"float64", c10::kDouble},    {"fp64", c10::kDouble},
      {"double", c10::kDouble}};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const auto it = names.find(lower);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

std::optional<c10::Device> parse_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "cuda") return c10::Device(c10::kCUDA, 0);
  const std::string prefix = "cuda:";
  const std::string index = name.substr(std::min(name.size(), prefix.size()));
  if (name.compare(0, prefix.size(), prefix) != 0 || index.empty() ||
      index.size() > 3 ||
      !std::all_of(index.begin(), index.end(),
                   [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  const int value = std::stoi(index);
  // c10 counts devices in an int8_t.
  if (value > std::numeric_limits<c10::DeviceIndex>::max()) return std::nullopt;
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(value));
}

}  // namespace fgl::cli
