#include "fgl/io/atomic_write.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "fgl/io/paths.h"

namespace fgl::io {
namespace {

// The temporary name of the write in progress, for remove_pending_output:
// a fixed buffer and a flag, which a signal handler may read.
char g_pending[4096];
std::atomic<bool> g_has_pending{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void set_pending(const std::string& name) {
  g_has_pending.store(false);
  if (name.size() < sizeof(g_pending)) {
    std::memcpy(g_pending, name.c_str(), name.size() + 1);
    g_has_pending.store(true);
  }
}

void clear_pending() { g_has_pending.store(false); }

// A name beside the target, dot-prefixed: ".y.pt.tmp-k3x9qa".
std::string temporary_name(const std::string& path) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string suffix(6, 'a');
  for (char& c : suffix) c = kChars[rng() % (sizeof(kChars) - 1)];
  return parent_directory(path) + "/." + base_name(path) + ".tmp-" + suffix;
}

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
  TORCH_CHECK(false, what, " ", path, ": ", std::strerror(err));
}

void write_all(int fd, const std::vector<char>& bytes,
               const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n =
        ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", path, n < 0 ? errno : EIO);
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot flush", path, errno);
}

// An unnamed file in `dir`, or -1 where the file system (or a missing
// /proc, through which it is linked) does not allow one.
int open_unnamed(const std::string& dir) {
  if (::access("/proc/self/fd", X_OK) != 0) return -1;
  return ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
}

// Gives the unnamed file `fd` a fresh temporary name; returns that name.
std::string link_unnamed(int fd, const std::string& path) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name = temporary_name(path);
    set_pending(name);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(),
                 AT_SYMLINK_FOLLOW) == 0) {
      return name;
    }
    clear_pending();
    if (errno != EEXIST) fail("cannot create a file in", path, errno);
  }
  fail("cannot create a file in", path, EEXIST);
}

// A named temporary file (mkstemp), with the mode a plain create would give.
int open_named(const std::string& path, std::string& name) {
  name = parent_directory(path) + "/." + base_name(path) + ".tmp-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    fail("cannot create a file in", parent_directory(path), errno);
  }
  set_pending(name);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(name.c_str());
    clear_pending();
    fail("cannot set the mode of", path, err);
  }
  return fd;
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::vector<char>& bytes) {
  std::string name;  // the temporary file's name, once it has one
  int fd = open_unnamed(parent_directory(path));
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = open_named(path, name);
  try {
    write_all(fd, bytes, path);
    if (unnamed) name = link_unnamed(fd, path);
  } catch (...) {
    ::close(fd);
    if (!name.empty()) ::unlink(name.c_str());
    clear_pending();
    throw;
  }
  const auto give_up = [&](const char* what, int err) {
    ::unlink(name.c_str());
    clear_pending();
    fail(what, path, err);
  };
  if (::close(fd) != 0) give_up("cannot write", errno);
  // rename would replace a link, FIFO or device node at `path` by a regular
  // file (as root even /dev/null): only regular files are replaced.
  if (is_special_file(path)) {
    ::unlink(name.c_str());
    clear_pending();
    TORCH_CHECK(false, "not replacing ", path,
                ": it exists and is not a regular file");
  }
  if (::rename(name.c_str(), path.c_str()) != 0) {
    give_up("cannot create", errno);
  }
  clear_pending();
}

void remove_pending_output() noexcept {
  if (g_has_pending.load()) ::unlink(g_pending);
}

}  // namespace fgl::io
