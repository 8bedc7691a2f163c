// Any bytes into the safetensors header parser: it must refuse them with a
// SafetensorsError or accept them with every entry inside the data section;
// any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fgl/io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto entries = fgl::io::parse_safetensors(data, size);
    for (const auto& e : entries) {
      if (e.begin > e.end || e.end > size) std::abort();
    }
  } catch (const fgl::io::SafetensorsError&) {
  }
  return 0;
}
