// Tensors from a safetensors file, the format for inputs that are not
// trusted: a length-prefixed JSON header and raw little-endian data, no code.
// The header is validated by safetensors_header.h before any tensor exists.
#pragma once

#include <string>
#include <vector>

#include "fgl/io/tensor_file.h"

namespace fgl::io {

class InputFile;

/// Reads the tensors of the safetensors file onto the CPU, as a dict in file
/// order: all of them, or with `only` non-empty those it names (the others'
/// bytes are never read; their names go to TensorFile::unread). Throws
/// c10::Error saying what is wrong with the file.
TensorFile read_safetensors(const InputFile& file,
                            const std::vector<std::string>& only = {});

/// The bytes of a safetensors file holding `tensors` (CPU, contiguous;
/// float32, float16, bfloat16 or float64) under `names`, in order, with
/// metadata {"format": "pt"} as PyTorch's writers put it.
std::vector<char> write_safetensors(const std::vector<std::string>& names,
                                    const std::vector<at::Tensor>& tensors);

}  // namespace fgl::io
