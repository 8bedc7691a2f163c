#include "fgl/io/input_file.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace fgl::io {
namespace {

ReadObserver g_read_observer;

// Reads are split into pieces of this size, so an observer hears of a long
// read while it runs.
constexpr size_t kObservedPiece = size_t{64} << 20;

class Adapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit Adapter(const InputFile& file) : file_(file) {}
  size_t size() const override { return file_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n,
              const char* what = "") const override {
    return file_.read_some(pos, buf, n);
  }

 private:
  const InputFile& file_;
};

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  TORCH_CHECK(fd_ >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    TORCH_CHECK(false, path, " is not a regular file");
  }
  // Reads of a regular file never block; the flag only mattered for open.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

void set_read_observer(ReadObserver observer) {
  g_read_observer = std::move(observer);
}

size_t InputFile::read_some(uint64_t offset, void* out, size_t n) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(out) + got,
                              std::min(n - got, kObservedPiece),
                              static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
    read_ += static_cast<uint64_t>(r);
    if (g_read_observer) g_read_observer(path_, read_, size_);
  }
  return got;
}

void InputFile::read_exact(uint64_t offset, void* out, size_t n) const {
  errno = 0;
  const size_t got = read_some(offset, out, n);
  TORCH_CHECK(got == n, "cannot read ", path_, ": ",
              errno != 0 ? std::strerror(errno) : "unexpected end of file");
}

std::shared_ptr<caffe2::serialize::ReadAdapterInterface> InputFile::adapter()
    const {
  return std::make_shared<Adapter>(*this);
}

}  // namespace fgl::io
