#include "fgl/io/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace fgl::io {
namespace {

using Json = nlohmann::ordered_json;  // keeps the file's tensor order

[[noreturn]] void fail(const std::string& what) {
  throw SafetensorsError("safetensors: " + what);
}

SafetensorsDtype parse_dtype(const std::string& name, const Json& value) {
  if (!value.is_string()) {
    fail("tensor '" + name + "' has no dtype string");
  }
  static const std::pair<const char*, SafetensorsDtype> kNames[] = {
      {"BOOL", SafetensorsDtype::kBool},
      {"U8", SafetensorsDtype::kU8},
      {"I8", SafetensorsDtype::kI8},
      {"I16", SafetensorsDtype::kI16},
      {"U16", SafetensorsDtype::kU16},
      {"I32", SafetensorsDtype::kI32},
      {"U32", SafetensorsDtype::kU32},
      {"I64", SafetensorsDtype::kI64},
      {"U64", SafetensorsDtype::kU64},
      {"F16", SafetensorsDtype::kF16},
      {"BF16", SafetensorsDtype::kBF16},
      {"F32", SafetensorsDtype::kF32},
      {"F64", SafetensorsDtype::kF64},
      {"F8_E4M3", SafetensorsDtype::kF8E4M3},
      {"F8_E5M2", SafetensorsDtype::kF8E5M2}};
  const auto& s = value.get_ref<const std::string&>();
  for (const auto& [spelling, dtype] : kNames) {
    if (s == spelling) return dtype;
  }
  return SafetensorsDtype::kUnknown;
}

// Each dim a non-negative integer; the element count must not overflow.
std::vector<int64_t> parse_shape(const std::string& name, const Json& value,
                                 uint64_t& numel) {
  if (!value.is_array()) {
    fail("tensor '" + name + "' has no shape array");
  }
  std::vector<int64_t> shape;
  numel = 1;
  for (const auto& dim : value) {
    if (!dim.is_number_integer() ||
        (dim.is_number_unsigned() ? dim.get<uint64_t>() > INT64_MAX
                                  : dim.get<int64_t>() < 0)) {
      fail("tensor '" + name + "' has a shape entry that is not a size");
    }
    const auto d = dim.get<uint64_t>();
    if (__builtin_mul_overflow(numel, d, &numel)) {
      fail("tensor '" + name + "' has a shape whose size overflows");
    }
    shape.push_back(static_cast<int64_t>(d));
  }
  return shape;
}

SafetensorsEntry parse_entry(const std::string& name, const Json& value,
                             uint64_t data_bytes) {
  if (!value.is_object()) {
    fail("entry '" + name + "' is not an object");
  }
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = value.find("dtype");
  e.dtype = parse_dtype(name, dtype == value.end() ? Json() : *dtype);
  e.dtype_name = dtype->get<std::string>().substr(0, 32);
  const auto shape = value.find("shape");
  uint64_t numel = 0;
  e.shape = parse_shape(name, shape == value.end() ? Json() : *shape, numel);
  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    fail("tensor '" + name + "' has no data_offsets [begin, end]");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_bytes) {
    fail("tensor '" + name + "' has data_offsets [" + std::to_string(e.begin) +
         ", " + std::to_string(e.end) + "] outside the " +
         std::to_string(data_bytes) + " data bytes of the file");
  }
  if (e.dtype == SafetensorsDtype::kUnknown) {
    return e;  // its size per element is unknown; it will not be read
  }
  uint64_t nbytes = 0;
  const bool overflow =
      __builtin_mul_overflow(numel, element_size(e.dtype), &nbytes);
  if (overflow || nbytes != e.end - e.begin) {
    fail("tensor '" + name + "' has " + std::to_string(e.end - e.begin) +
         " data bytes, but its shape and dtype need " +
         (overflow ? std::string("more than 2^64") : std::to_string(nbytes)));
  }
  return e;
}

}  // namespace

size_t element_size(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kBool:
    case SafetensorsDtype::kU8:
    case SafetensorsDtype::kI8:
    case SafetensorsDtype::kF8E4M3:
    case SafetensorsDtype::kF8E5M2:
      return 1;
    case SafetensorsDtype::kI16:
    case SafetensorsDtype::kU16:
    case SafetensorsDtype::kF16:
    case SafetensorsDtype::kBF16:
      return 2;
    case SafetensorsDtype::kI32:
    case SafetensorsDtype::kU32:
    case SafetensorsDtype::kF32:
      return 4;
    case SafetensorsDtype::kI64:
    case SafetensorsDtype::kU64:
    case SafetensorsDtype::kF64:
      return 8;
    case SafetensorsDtype::kUnknown:
      return 0;
  }
  return 0;
}

uint64_t safetensors_header_length(const unsigned char* data, size_t size,
                                   uint64_t file_size) {
  if (size < 8 || file_size < 8) {
    fail("the file is shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | data[i];
  }
  if (n > kMaxSafetensorsHeaderBytes) {
    fail("the header length " + std::to_string(n) + " exceeds the limit of " +
         std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (n > file_size - 8) {
    fail("the header length " + std::to_string(n) + " exceeds the " +
         std::to_string(file_size - 8) + " bytes after it (truncated file?)");
  }
  return n;
}

std::string safetensors_preamble(
    const std::vector<SafetensorsEntry>& entries,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json strings = Json::object();
    for (const auto& [key, value] : metadata) strings[key] = value;
    header["__metadata__"] = strings;
  }
  for (const auto& e : entries) {
    header[e.name] = {{"dtype", e.dtype_name},
                      {"shape", e.shape},
                      {"data_offsets", {e.begin, e.end}}};
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  }
  return out + json;
}

std::vector<SafetensorsEntry> parse_safetensors_header(const std::string& json,
                                                       uint64_t data_bytes) {
  const Json header = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    fail("the header is not valid JSON");
  }
  if (!header.is_object()) {
    fail("the header is not a JSON object");
  }
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      continue;  // free-form strings; nothing of ours
    }
    entries.push_back(parse_entry(name, value, data_bytes));
  }
  // Tensors may not share bytes: otherwise a small file could name its data
  // many times over and make the reader allocate far more than its size.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      fail("tensors '" + by_offset[i - 1]->name + "' and '" +
           by_offset[i]->name + "' overlap in the data section");
    }
  }
  return entries;
}

std::vector<SafetensorsEntry> parse_safetensors(const unsigned char* data,
                                                size_t size) {
  const uint64_t n = safetensors_header_length(data, size, size);
  const std::string json(reinterpret_cast<const char*>(data) + 8, n);
  return parse_safetensors_header(json, size - 8 - n);
}

bool looks_like_safetensors(const unsigned char* head, size_t size) {
  if (size < 9 || head[8] != '{') {
    return false;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | head[i];
  }
  return n >= 2 && n <= kMaxSafetensorsHeaderBytes;
}

}  // namespace fgl::io
