#include "fgl/io/safetensors_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "fgl/io/input_file.h"
#include "fgl/io/safetensors_header.h"

namespace fgl::io {
namespace {

at::ScalarType to_scalar_type(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kBool:
      return at::kBool;
    case SafetensorsDtype::kU8:
      return at::kByte;
    case SafetensorsDtype::kI8:
      return at::kChar;
    case SafetensorsDtype::kI16:
      return at::kShort;
    case SafetensorsDtype::kU16:
      return at::kUInt16;
    case SafetensorsDtype::kI32:
      return at::kInt;
    case SafetensorsDtype::kU32:
      return at::kUInt32;
    case SafetensorsDtype::kI64:
      return at::kLong;
    case SafetensorsDtype::kU64:
      return at::kUInt64;
    case SafetensorsDtype::kF16:
      return at::kHalf;
    case SafetensorsDtype::kBF16:
      return at::kBFloat16;
    case SafetensorsDtype::kF32:
      return at::kFloat;
    case SafetensorsDtype::kF64:
      return at::kDouble;
    case SafetensorsDtype::kF8E4M3:
      return at::kFloat8_e4m3fn;
    case SafetensorsDtype::kF8E5M2:
      return at::kFloat8_e5m2;
    case SafetensorsDtype::kUnknown:
      break;
  }
  TORCH_CHECK(false, "unknown safetensors dtype");
}

const char* dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "F32";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kDouble:
      return "F64";
    default:
      TORCH_CHECK(false, "safetensors output of ", dtype, " is not written");
  }
}

}  // namespace

std::vector<char> write_safetensors(const std::vector<std::string>& names,
                                    const std::vector<at::Tensor>& tensors) {
  std::vector<SafetensorsEntry> entries;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    SafetensorsEntry e;
    e.name = names[i];
    e.dtype_name = dtype_name(tensors[i].scalar_type());
    e.shape = tensors[i].sizes().vec();
    e.begin = offset;
    e.end = offset += tensors[i].nbytes();
    entries.push_back(std::move(e));
  }
  const std::string preamble =
      safetensors_preamble(entries, {{"format", "pt"}});
  std::vector<char> bytes(preamble.begin(), preamble.end());
  bytes.reserve(bytes.size() + offset);
  for (const auto& t : tensors) {
    const auto* data = static_cast<const char*>(t.const_data_ptr());
    bytes.insert(bytes.end(), data, data + t.nbytes());
  }
  return bytes;
}

TensorFile read_safetensors(const InputFile& file,
                            const std::vector<std::string>& only) {
  const uint64_t file_size = file.size();
  TensorFile out;
  out.format = FileFormat::kSafetensors;
  out.layout = Layout::kDict;
  try {
    unsigned char prefix[8] = {};
    file.read_exact(0, prefix, file_size < 8 ? file_size : 8);
    const uint64_t n = safetensors_header_length(prefix, 8, file_size);
    std::string json(n, '\0');
    file.read_exact(8, json.data(), n);
    const uint64_t data_start = 8 + n;
    for (const auto& e :
         parse_safetensors_header(json, file_size - data_start)) {
      if (!wanted(only, e.name)) {
        out.unread.push_back({e.name, e.shape});
        continue;
      }
      if (e.dtype == SafetensorsDtype::kUnknown) {
        out.skipped.push_back(e.name + " (dtype " + e.dtype_name + ")");
        continue;
      }
      auto t = at::empty(e.shape,
                         at::TensorOptions().dtype(to_scalar_type(e.dtype)));
      file.read_exact(data_start + e.begin, t.data_ptr(), e.end - e.begin);
      out.names.push_back(e.name);
      out.tensors.push_back(std::move(t));
    }
  } catch (const SafetensorsError& e) {
    TORCH_CHECK(false, file.path(), ": ", e.what());
  }
  return out;
}

}  // namespace fgl::io
