// Any bytes as a file into read_tensor_file, fgl_infer's entry point for
// --input and --weights: format detection, the safetensors reader, our
// torch.save reader and libtorch's TorchScript loader. Refusals are c10::Error
// or std::exception; anything else is a bug.
#include <c10/util/Exception.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "fgl/io/tensor_file.h"

namespace {

// One scratch file per process, rewritten for every input.
const std::string& scratch_path() {
  static const std::string path =
      "/tmp/fgl_fuzz_tensor_file_" + std::to_string(::getpid());
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(scratch_path().c_str(), "wb");
  if (f == nullptr) return 0;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  std::fclose(f);
  if (!ok) return 0;
  for (const bool nested : {false, true}) {
    try {
      fgl::io::read_tensor_file(scratch_path(), nested);
    } catch (const c10::Error&) {
    } catch (const std::exception&) {
    }
  }
  return 0;
}
