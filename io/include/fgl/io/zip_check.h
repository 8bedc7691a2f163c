// A torch-free check of a zip archive's central directory, run before
// libtorch's PyTorchStreamReader sees the file.
//
// NOTE: PyTorchStreamReader allocates each record's size as the central
// directory declares it, before reading a byte of it: a 2 KB file declaring a
// 4 GB record makes it allocate 4 GB (found by fuzz_torch_save). Every
// declared size is checked against the file's size here first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fgl::io {

class ZipError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads up to `n` bytes at `offset` into `out`; returns the count read.
using ReadAt = std::function<size_t(uint64_t offset, void* out, size_t n)>;

/// A record as the central directory declares it.
struct ZipRecord {
  std::string name;
  uint64_t method = 0;  // 0: stored
  uint64_t compressed = 0, uncompressed = 0;
  uint64_t offset = 0;  // of its local header
};

/// Throws ZipError when the archive of `file_size` bytes has no readable
/// central directory, one of its records declares a size or offset the
/// file cannot hold (stored records: at most the file's size; compressed
/// ones: at most deflate's 1032:1 ratio over their compressed size) or
/// declares bytes though marked a folder (miniz writes none of them, so
/// libtorch's reader would hand out memory it never wrote), or its records
/// together expand to more than `max_expanded` bytes. Returns the records
/// in the directory's order.
std::vector<ZipRecord> check_zip_directory(const ReadAt& read,
                                           uint64_t file_size,
                                           uint64_t max_expanded = UINT64_MAX);

/// The file format versions PyTorchStreamReader reads.
struct TorchVersions {
  uint64_t min = 0, max = 0;
};

/// Throws ZipError where PyTorchStreamReader's constructor would throw on
/// `records` of the archive `read` reads (and leave what it allocated
/// unfreed): the first record not in a folder; no `version` record in it
/// (nor `.data/version`, which it reads first); the local header of that
/// record or of `.data/serialization_id` damaged or running past the file;
/// or a stored version that is not a number within `versions`. Names
/// compare as miniz compares them, ignoring case.
void check_torch_archive(const ReadAt& read, uint64_t file_size,
                         const std::vector<ZipRecord>& records,
                         const TorchVersions& versions);

/// A ReadAt over bytes in memory.
ReadAt read_bytes(const void* data, size_t size);

}  // namespace fgl::io
