// Small path helpers on POSIX calls.
// NOTE: not std::filesystem: libtorch.so exports copies of some
// std::filesystem symbols, and calls that bind to them crash at run time.
#pragma once

#include <cstdint>
#include <string>

namespace fgl::io {

/// The directory part of `path`; "." for a bare file name.
std::string parent_directory(const std::string& path);

/// The last component of `path`.
std::string base_name(const std::string& path);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

/// Whether `path` ends in `suffix` (".safetensors", ".index.json") after
/// some name.
bool has_suffix(const std::string& path, const std::string& suffix);

/// A plain file (not a directory, FIFO, socket or device), links followed.
bool is_regular_file(const std::string& path);

/// Whether something other than a regular file sits at `path` itself: a
/// symbolic link, directory, FIFO, socket or device (links not followed).
bool is_special_file(const std::string& path);

/// Whether `a` and `b` name one existing file (links followed).
bool same_file(const std::string& a, const std::string& b);

/// The size of `path` in bytes; -1 when it cannot be stat'ed.
int64_t file_size(const std::string& path);

}  // namespace fgl::io
