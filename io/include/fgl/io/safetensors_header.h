// The header of a safetensors file, parsed and validated without torch, so
// that its fuzz target needs no libtorch. A safetensors file is
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data]
// where the header maps each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets relative to the data section) and
// may hold a "__metadata__" map of strings.
//
// NOTE: the file is untrusted: every length, offset and size product is
// checked against the bytes that exist before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fgl::io {

/// A malformed safetensors file; the message says what is wrong.
class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The format's dtypes fgl knows; kUnknown for any other name (a newer or
/// packed format), whose entries are skipped rather than read.
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,
  kF8E5M2,
  kUnknown
};

struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::string dtype_name;  // as the header spells it
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section, end exclusive
  uint64_t end = 0;
};

/// The most JSON header bytes read (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;

/// Bytes per element of `dtype`; 0 for kUnknown.
size_t element_size(SafetensorsDtype dtype);

/// Reads the 8-byte length prefix from the first `size` bytes of a file of
/// `file_size` bytes and returns N, the JSON header's length. Throws
/// SafetensorsError when the prefix is short or N does not fit the file or
/// the header limit.
uint64_t safetensors_header_length(const unsigned char* data, size_t size,
                                   uint64_t file_size);

/// Parses the JSON header `json` of a file whose data section holds
/// `data_bytes` bytes. Entries come in file order. Throws SafetensorsError for
/// bad JSON, a missing dtype, negative or overflowing shapes, and offsets
/// outside the data section or (for known dtypes) disagreeing with the
/// shape.
std::vector<SafetensorsEntry> parse_safetensors_header(const std::string& json,
                                                       uint64_t data_bytes);

/// Both steps on a whole file held in memory.
std::vector<SafetensorsEntry> parse_safetensors(const unsigned char* data,
                                                size_t size);

/// The bytes before the data of a safetensors file holding `entries` (their
/// dtype_name, shape and offsets) and `metadata` strings: the length prefix
/// and the JSON header, padded with spaces so that the data starts 8-byte
/// aligned.
std::string safetensors_preamble(
    const std::vector<SafetensorsEntry>& entries,
    const std::vector<std::pair<std::string, std::string>>& metadata);

/// True when `head` (the first bytes of a file) looks like safetensors: a
/// length prefix followed by '{'.
bool looks_like_safetensors(const unsigned char* head, size_t size);

}  // namespace fgl::io
