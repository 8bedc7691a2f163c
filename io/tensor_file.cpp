#include "fgl/io/tensor_file.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "fgl/io/atomic_write.h"
#include "fgl/io/input_file.h"
#include "fgl/io/paths.h"
#include "fgl/io/safetensors_file.h"
#include "fgl/io/safetensors_header.h"
#include "fgl/io/torch_save_format.h"

namespace fgl::io {
namespace {

// The first bytes of the file, enough to tell the formats apart.
std::vector<char> read_head(const InputFile& file) {
  std::vector<char> head(9);  // safetensors: 8-byte length, then '{'
  head.resize(file.read_some(0, head.data(), head.size()));
  return head;
}

bool starts_with(const std::vector<char>& bytes, const char* magic) {
  const size_t n = std::strlen(magic);
  return bytes.size() >= n && std::memcmp(bytes.data(), magic, n) == 0;
}

std::string key_to_string(const c10::IValue& key) {
  if (key.isString()) {
    return key.toStringRef();
  }
  std::ostringstream os;
  os << key;
  return os.str();
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Collects the tensors under `value`, naming them by their path. Without
// `nested`, only tensors are accepted here (the caller has already opened the
// top-level container).
void collect(const c10::IValue& value, const std::string& name, bool nested,
             TensorFile& out) {
  if (value.isTensor()) {
    out.names.push_back(name);
    out.tensors.push_back(value.toTensor().detach());
    return;
  }
  TORCH_CHECK(nested, "entry '", name, "' is a ", value.tagKind(),
              ", not a tensor");
  if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      collect(entry.value(), join(name, key_to_string(entry.key())), nested,
              out);
    }
  } else if (value.isList()) {
    const auto list = value.toListRef();
    for (size_t i = 0; i < list.size(); ++i) {
      collect(list[i], join(name, std::to_string(i)), nested, out);
    }
  } else if (value.isTuple()) {
    const auto& elements = value.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i) {
      collect(elements[i], join(name, std::to_string(i)), nested, out);
    }
  }
  // NOTE: anything else (ints, strings, optimizer settings in a checkpoint)
  // is not ours to read and is skipped.
}

TensorFile from_pickle(const c10::IValue& root, bool nested,
                       const std::string& path) {
  TensorFile file;
  file.format = FileFormat::kTorchSave;
  if (root.isTensor()) {
    file.layout = Layout::kTensor;
    collect(root, "x", nested, file);
  } else if (root.isGenericDict()) {
    file.layout = Layout::kDict;
    for (const auto& entry : root.toGenericDict()) {
      collect(entry.value(), key_to_string(entry.key()), nested, file);
    }
  } else if (root.isList() || root.isTuple()) {
    file.layout = root.isList() ? Layout::kList : Layout::kTuple;
    const auto elements = root.isList() ? root.toListRef().vec()
                                        : root.toTupleRef().elements().vec();
    for (size_t i = 0; i < elements.size(); ++i) {
      collect(elements[i], std::to_string(i), nested, file);
    }
  } else {
    TORCH_CHECK(false, path, " holds a ", root.tagKind(),
                ", not a tensor or a list, tuple or dict of tensors");
  }
  return file;
}

// A TorchScript archive (C++ torch::save writes one) read as data: the
// pickle of its module object, whose attributes are the tensors. Its code
// is never run (torch_save_format.h).
TensorFile from_torchscript(const c10::IValue& module,
                            const std::string& path) {
  TORCH_CHECK(module.isGenericDict(), path, " is a TorchScript archive whose ",
              "data is a ", module.tagKind(), ", not a module");
  TensorFile file;
  file.format = FileFormat::kTorchScript;
  for (const auto& attribute : module.toGenericDict()) {
    collect(attribute.value(), key_to_string(attribute.key()),
            /*nested=*/true, file);
  }
  // C++ torch::save(tensor) stores the attribute "0", torch::save(vector)
  // "0", "1", ...: give those back as the tensor or list they were.
  bool indexed = !file.names.empty();
  for (size_t i = 0; i < file.names.size() && indexed; ++i) {
    indexed = file.names[i] == std::to_string(i);
  }
  if (indexed && file.names.size() == 1) {
    file.layout = Layout::kTensor;
    file.names[0] = "x";
  } else {
    file.layout = indexed ? Layout::kList : Layout::kDict;
  }
  return file;
}

// Reads the bytes of the tensors of `file` named in `only` (all without
// it); the others go to `unread`.
TensorFile load_wanted(TorchSaveFile& archive, TensorFile file,
                       const std::vector<std::string>& only) {
  TensorFile out;
  out.format = file.format;
  out.layout = file.layout;
  for (size_t i = 0; i < file.names.size(); ++i) {
    if (!wanted(only, file.names[i])) {
      out.unread.push_back(
          {std::move(file.names[i]), file.tensors[i].sizes().vec()});
      continue;
    }
    out.names.push_back(std::move(file.names[i]));
    out.tensors.push_back(archive.load(file.tensors[i]));
  }
  return out;
}

c10::IValue pack(Layout layout, const std::vector<std::string>& names,
                 const std::vector<at::Tensor>& tensors) {
  switch (layout) {
    case Layout::kTensor:
      TORCH_CHECK(tensors.size() == 1, "a tensor layout holds one tensor, got ",
                  tensors.size());
      return tensors[0];
    case Layout::kList: {
      c10::impl::GenericList list(c10::TensorType::get());
      for (const auto& t : tensors) {
        list.push_back(t);
      }
      return list;
    }
    case Layout::kTuple:
      return c10::ivalue::Tuple::create(
          std::vector<c10::IValue>(tensors.begin(), tensors.end()));
    case Layout::kDict: {
      TORCH_CHECK(names.size() == tensors.size(), "dict layout needs ",
                  tensors.size(), " names, got ", names.size());
      c10::impl::GenericDict dict(c10::StringType::get(),
                                  c10::TensorType::get());
      for (size_t i = 0; i < tensors.size(); ++i) {
        dict.insert(names[i], tensors[i]);
      }
      return dict;
    }
  }
  TORCH_CHECK(false, "unknown layout");
}

}  // namespace

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::kTensor:
      return "tensor";
    case Layout::kList:
      return "list";
    case Layout::kTuple:
      return "tuple";
    case Layout::kDict:
      return "dict";
  }
  return "?";
}

const char* to_string(FileFormat format) {
  switch (format) {
    case FileFormat::kTorchSave:
      return "torch.save";
    case FileFormat::kTorchScript:
      return "TorchScript";
    case FileFormat::kSafetensors:
      return "safetensors";
  }
  return "?";
}

bool wanted(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() ||
         std::find(only.begin(), only.end(), name) != only.end();
}

TensorFile read_tensor_file(const std::string& path, bool nested,
                            uint64_t max_expanded,
                            const std::vector<std::string>& only) {
  const InputFile input(path);
  const auto bytes = read_head(input);
  TORCH_CHECK(!bytes.empty(), path, " is empty");
  if (looks_like_safetensors(
          reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size())) {
    TensorFile file = read_safetensors(input, only);
    TORCH_CHECK(!file.tensors.empty() || !file.unread.empty(), path,
                " holds no tensors");
    return file;
  }
  TORCH_CHECK(starts_with(bytes, "PK\x03\x04"), path,
              " is not a PyTorch zip file or a safetensors file",
              starts_with(bytes, "\x80")
                  ? " (it looks like the legacy torch.save format: load and "
                    "save it again with torch >= 1.6)"
                  : "");
  TorchSaveFile archive(input, max_expanded);
  TensorFile file = archive.torchscript()
                        ? from_torchscript(archive.root(), path)
                        : from_pickle(archive.root(), nested, path);
  TORCH_CHECK(!file.tensors.empty(), path, " holds no tensors");
  return load_wanted(archive, std::move(file), only);
}

void write_tensor_file(const std::string& path, Layout layout,
                       const std::vector<std::string>& names,
                       const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> on_cpu;
  on_cpu.reserve(tensors.size());
  for (const auto& t : tensors) {
    on_cpu.push_back(t.cpu().contiguous());
  }
  write_file_atomically(path,
                        has_suffix(path, ".safetensors")
                            ? write_safetensors(names, on_cpu)
                            : write_torch_save(pack(layout, names, on_cpu)));
}

}  // namespace fgl::io
