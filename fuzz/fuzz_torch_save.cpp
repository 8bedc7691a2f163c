// Any bytes into our torch.save reader (zip through libtorch's
// PyTorchStreamReader, pickle through io/torch_save_format.cpp): a
// c10::Error or std::exception is a refusal (fgl_infer exits 65 on both);
// a crash, abort, sanitizer report, timeout or runaway allocation is a bug.
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <exception>

#include "fgl/io/torch_save_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    fgl::io::read_torch_save(data, size);
  } catch (const c10::Error&) {
  } catch (const std::exception&) {
  }
  return 0;
}
