// A file opened once for reading, by descriptor: what a path named when it
// was opened is what every later read sees, even if the path is swapped for
// something else meanwhile.
#pragma once

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fgl::io {

/// Told, as an InputFile reads, its path, the bytes it has read so far and
/// its size. A program that shows progress on long reads installs one
/// (fgl_infer); there is none by default. Install it before reads start.
using ReadObserver =
    std::function<void(const std::string& path, uint64_t read, uint64_t size)>;
void set_read_observer(ReadObserver observer);

class InputFile {
 public:
  /// Opens `path` without blocking (a FIFO would wait for a writer) and
  /// refuses anything but a regular file. Throws c10::Error.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  /// The size when opened.
  uint64_t size() const { return size_; }

  /// Reads up to `n` bytes at `offset`; returns the count (less only at the
  /// end of the file).
  size_t read_some(uint64_t offset, void* out, size_t n) const;
  /// Reads exactly `n` bytes at `offset`; throws c10::Error on a short read
  /// (the file changed under us).
  void read_exact(uint64_t offset, void* out, size_t n) const;

  /// A reader for libtorch's zip reader (PyTorchStreamReader) over this file;
  /// it must not outlive the InputFile.
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> adapter() const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  mutable uint64_t read_ = 0;  // bytes read so far, for the ReadObserver
};

}  // namespace fgl::io
