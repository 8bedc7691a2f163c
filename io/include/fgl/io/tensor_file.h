// The tensor files fgl_infer reads and writes. Four formats are read, told
// apart by their contents so users never have to name one:
//   - Python torch.save files (the zip format, torch_save_format.h),
//   - C++ torch::save archives and
//   - TorchScript modules whose attributes are tensors (both TorchScript zip
//     archives, read as data: the module's pickled attributes, its code never
//     run; an object whose state only its own __setstate__ reads is refused),
//   - safetensors files (safetensors_file.h).
// Results are written in the torch.save format (torch_save_format.h), through
// a temporary file that is renamed into place.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fgl::io {

/// The container the tensors came in; results are written in the same one.
enum class Layout { kTensor, kList, kTuple, kDict };

enum class FileFormat { kTorchSave, kTorchScript, kSafetensors };

const char* to_string(Layout layout);
const char* to_string(FileFormat format);

/// Tensors of a file in file order. Names are dict keys, list indices
/// ("0", "1", ...) or dotted attribute paths ("proj.weight").
struct TensorFile {
  FileFormat format = FileFormat::kTorchSave;
  Layout layout = Layout::kTensor;
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  // Entries not read, as "name (why)": safetensors dtypes fgl does not know.
  std::vector<std::string> skipped;
  // Entries whose bytes were left unread because the reader was asked for
  // others: names and shapes.
  struct Unread {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<Unread> unread;
};

/// Reads `path` onto the CPU. `nested` accepts containers inside containers
/// (checkpoints, whose names become dotted paths) and skips values that are
/// not tensors; without it the file must hold a tensor, or a list, tuple or
/// dict of tensors. A zip archive whose records expand to more than
/// `max_expanded` bytes is refused before any is read. With `only`
/// non-empty, the bytes of other entries are not read (they are listed in
/// `unread`): a safetensors file's header and a torch.save file's pickle
/// name them. Throws c10::Error saying what is wrong with the file.
TensorFile read_tensor_file(const std::string& path, bool nested = false,
                            uint64_t max_expanded = UINT64_MAX,
                            const std::vector<std::string>& only = {});

/// Whether read_tensor_file's `only` asks for the entry `name` (an empty
/// list asks for every entry).
bool wanted(const std::vector<std::string>& only, const std::string& name);

/// Writes the tensors (moved to the CPU) in `layout` as Python's torch.save
/// would, or, where `path` ends in ".safetensors", as a safetensors file
/// (a dict of `names`, whatever the layout), atomically: a failure leaves no
/// file at `path`.
void write_tensor_file(const std::string& path, Layout layout,
                       const std::vector<std::string>& names,
                       const std::vector<at::Tensor>& tensors);

}  // namespace fgl::io
