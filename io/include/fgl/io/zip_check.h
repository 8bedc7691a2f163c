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

/// Throws ZipError when the archive of `file_size` bytes has no readable
/// central directory, one of its records declares a size or offset the
/// file cannot hold (stored records: at most the file's size; compressed
/// ones: at most deflate's 1032:1 ratio over their compressed size), or its
/// records together expand to more than `max_expanded` bytes. Returns the
/// records' names in the directory's order.
std::vector<std::string> check_zip_directory(
    const ReadAt& read, uint64_t file_size, uint64_t max_expanded = UINT64_MAX);

/// check_zip_directory on bytes in memory.
std::vector<std::string> check_zip_directory(const void* data, size_t size);

/// Throws ZipError where the records' `names` are not those of a torch.save
/// or torch.jit.save archive as PyTorchStreamReader requires (which, when
/// its constructor throws, leaves what it allocated unfreed): the first
/// record in a folder, and a `version` record in it (or `.data/version`),
/// names compared as miniz compares them, ignoring case.
void check_torch_archive_names(const std::vector<std::string>& names);

}  // namespace fgl::io
