// Python's torch.save zip format, read and written here for tensors, lists,
// tuples, dicts and plain scalars.
//
// NOTE: libtorch's own pickle_load/pickle_save fall short both ways.
// pickle_load turns every collections.OrderedDict into None, and a Python
// state_dict is one. pickle_save tags typed lists and dicts with
// torch.jit._pickle globals, which torch.load (weights_only=True, the default
// since torch 2.6) refuses. So the pickle is interpreted and emitted here,
// with only the globals torch.save itself uses.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fgl::io {

class InputFile;

/// A torch.save (or TorchScript) zip file read in two steps: the pickle
/// first, with every tensor on the meta device (sizes, strides and dtype, no
/// bytes read), then the bytes of the tensors asked for. A checkpoint's one
/// layer is taken this way without reading the rest. Python objects the
/// pickle holds that fgl does not know (an argparse.Namespace in a
/// checkpoint, say) become None. Objects of TorchScript classes (TorchScript
/// archives use the same format) become dicts of their attributes; no code
/// of theirs runs, and one whose state is not an attribute dict (a custom
/// __setstate__) is refused. Throws c10::Error for a damaged or
/// non-torch.save file, or one whose records expand to more than
/// `max_expanded` bytes. `file` must outlive this object.
class TorchSaveFile {
 public:
  explicit TorchSaveFile(const InputFile& file,
                         uint64_t max_expanded = UINT64_MAX);
  ~TorchSaveFile();
  TorchSaveFile(const TorchSaveFile&) = delete;
  TorchSaveFile& operator=(const TorchSaveFile&) = delete;

  /// Whether the archive holds TorchScript code (a TorchScript module, or
  /// the archive C++ torch::save writes).
  bool torchscript() const;
  /// The object the file holds, its tensors on the meta device.
  const c10::IValue& root() const;
  /// The CPU tensor that `placeholder`, a tensor of root(), stands for; a
  /// storage's bytes are read once, for all the views of it.
  at::Tensor load(const at::Tensor& placeholder);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The object of a torch.save file's bytes held in memory, read as
/// TorchSaveFile reads it but with its tensors on the CPU (the fuzz target's
/// way in).
c10::IValue read_torch_save(const void* data, size_t size);

/// The bytes of a torch.save zip file holding `value` (tensors, lists,
/// tuples, string-keyed dicts, None, bool, int, float, str), which Python's
/// torch.load(..., weights_only=True) reads. Tensors must be on the CPU.
std::vector<char> write_torch_save(const c10::IValue& value);

}  // namespace fgl::io
