// Tensors from a safetensors file, the format for inputs that are not
// trusted: a length-prefixed JSON header and raw little-endian data, no code.
// The header is validated by safetensors_header.h before any tensor exists.
#pragma once

#include <string>
#include <vector>

#include "models/tensor_file.h"

namespace fgl::models {

class InputFile;

/// Reads the tensors of the safetensors file onto the CPU, as a dict in file
/// order: all of them, or with `only` non-empty those it names (the others'
/// bytes are never read; their names go to TensorFile::unread). Throws
/// c10::Error saying what is wrong with the file.
TensorFile read_safetensors(const InputFile& file,
                            const std::vector<std::string>& only = {});

}  // namespace fgl::models
