// Tensors from a safetensors file, the format for inputs that are not
// trusted: a length-prefixed JSON header and raw little-endian data, no code.
// The header is validated by safetensors_header.h before any tensor exists.
#pragma once

#include <string>

#include "models/tensor_file.h"

namespace fgl::models {

class InputFile;

/// Reads every tensor of the safetensors file onto the CPU, as a dict in
/// file order. Throws c10::Error saying what is wrong with the file.
TensorFile read_safetensors(const InputFile& file);

}  // namespace fgl::models
