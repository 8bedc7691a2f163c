// Writing a file so that it is either absent or whole, whatever happens to
// the writing process.
#pragma once

#include <string>
#include <vector>

namespace fgl::io {

/// Writes `bytes` to `path` atomically: readers (and a later run) see no
/// file or the whole file. The bytes go to an unnamed file in the target's
/// directory (O_TMPFILE) that gets a name only once complete and is renamed
/// over `path`, so a process killed while writing, even by SIGKILL, leaves
/// nothing. Where the file system lacks O_TMPFILE a named temporary file
/// takes its place, removed on failure and by remove_pending_output. Only a
/// regular file (or nothing) at `path` is replaced. Throws c10::Error.
void write_file_atomically(const std::string& path,
                           const std::vector<char>& bytes);

/// Removes the named temporary file of a write in progress, if there is
/// one. Async-signal-safe: for SIGINT/SIGTERM handlers.
void remove_pending_output() noexcept;

}  // namespace fgl::io
