#include "models/safetensors_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "models/safetensors_header.h"

namespace fgl::models {
namespace {

at::ScalarType to_scalar_type(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32:
      return at::kFloat;
    case SafetensorsDtype::kF16:
      return at::kHalf;
    case SafetensorsDtype::kBF16:
      return at::kBFloat16;
    case SafetensorsDtype::kF64:
      return at::kDouble;
  }
  TORCH_CHECK(false, "unknown safetensors dtype");
}

// Closes the descriptor on every path out, errors included.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes at `offset`; a short read means the file
// changed under us.
void read_at(int fd, void* out, size_t size, uint64_t offset,
             const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    TORCH_CHECK(n > 0, "cannot read ", path, ": ",
                n == 0 ? "unexpected end of file" : std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace

TensorFile read_safetensors(const std::string& path) {
  const Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  TORCH_CHECK(file.fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  TORCH_CHECK(::fstat(file.fd, &st) == 0 && S_ISREG(st.st_mode), path,
              " is not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  TensorFile out;
  out.format = FileFormat::kSafetensors;
  out.layout = Layout::kDict;
  try {
    unsigned char prefix[8] = {};
    read_at(file.fd, prefix, file_size < 8 ? file_size : 8, 0, path);
    const uint64_t n = safetensors_header_length(prefix, 8, file_size);
    std::string json(n, '\0');
    read_at(file.fd, json.data(), n, 8, path);
    const uint64_t data_start = 8 + n;
    for (const auto& e :
         parse_safetensors_header(json, file_size - data_start)) {
      auto t = at::empty(e.shape,
                         at::TensorOptions().dtype(to_scalar_type(e.dtype)));
      read_at(file.fd, t.data_ptr(), e.end - e.begin, data_start + e.begin,
              path);
      out.names.push_back(e.name);
      out.tensors.push_back(std::move(t));
    }
  } catch (const SafetensorsError& e) {
    TORCH_CHECK(false, path, ": ", e.what());
  }
  return out;
}

}  // namespace fgl::models
