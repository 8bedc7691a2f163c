#include "fgl/io/torch_save_format.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/versions.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "fgl/io/input_file.h"
#include "fgl/io/pickle_values.h"
#include "fgl/io/zip_check.h"

namespace fgl::io {
namespace {

// A pickle stack entry: a value, a MARK, or a Python global (a class or
// function, named "module.name") that only REDUCE may consume.
struct Item {
  c10::IValue value;
  std::string global;
  bool mark = false;
  // The class of a Python object the reader keeps no value of (value is
  // None), named when it is the whole file.
  std::string object_class = {};
};

const std::map<std::string, at::ScalarType>& storage_dtypes() {
  static const std::map<std::string, at::ScalarType> dtypes{
      {"FloatStorage", at::kFloat},
      {"DoubleStorage", at::kDouble},
      {"HalfStorage", at::kHalf},
      {"BFloat16Storage", at::kBFloat16},
      {"LongStorage", at::kLong},
      {"IntStorage", at::kInt},
      {"ShortStorage", at::kShort},
      {"CharStorage", at::kChar},
      {"ByteStorage", at::kByte},
      {"BoolStorage", at::kBool},
      {"ComplexFloatStorage", at::kComplexFloat},
      {"ComplexDoubleStorage", at::kComplexDouble}};
  return dtypes;
}

// The dtype a pickle names "torch.float8_e4m3fn" (a torch.dtype global).
at::ScalarType dtype_named(const std::string& global) {
  static const auto by_name = [] {
    std::map<std::string, at::ScalarType> names;
#define FGL_DTYPE_NAME(_, dtype)                           \
  {                                                        \
    const auto both = c10::getDtypeNames(at::k##dtype);    \
    names.emplace("torch." + both.first, at::k##dtype);    \
    if (!both.second.empty()) {                            \
      names.emplace("torch." + both.second, at::k##dtype); \
    }                                                      \
  }
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(FGL_DTYPE_NAME)
    FGL_DTYPE_NAME(_, Bool)
    FGL_DTYPE_NAME(_, BFloat16)
    FGL_DTYPE_NAME(_, Float8_e4m3fn)
    FGL_DTYPE_NAME(_, Float8_e5m2)
    FGL_DTYPE_NAME(_, Float8_e4m3fnuz)
    FGL_DTYPE_NAME(_, Float8_e5m2fnuz)
    FGL_DTYPE_NAME(_, UInt16)
    FGL_DTYPE_NAME(_, UInt32)
    FGL_DTYPE_NAME(_, UInt64)
#undef FGL_DTYPE_NAME
    return names;
  }();
  const auto it = by_name.find(global);
  TORCH_CHECK(it != by_name.end(), "unknown dtype ", global, " in the pickle");
  return it->second;
}

std::vector<int64_t> int_tuple(const c10::IValue& value) {
  std::vector<int64_t> out;
  for (const auto& e : value.toTupleRef().elements()) {
    out.push_back(e.toInt());
  }
  return out;
}

// A storage whose bytes are read only when a tensor over it is loaded
// (TorchSaveFile): the record, and the meta tensor that stands for it.
struct DeferredStorage {
  std::string record;
  at::Tensor placeholder;  // flat, on the meta device
  at::Tensor loaded;       // flat, on the CPU, once read
};
// Keyed by the placeholder's storage, which every view of it shares.
using DeferredStorages =
    std::unordered_map<const c10::StorageImpl*, DeferredStorage>;

class PickleMachine {
 public:
  // With `deferred`, storages are not read: their tensors live on the meta
  // device and `deferred` says where their bytes are.
  PickleMachine(caffe2::serialize::PyTorchStreamReader& archive,
                const std::vector<char>& pickle,
                DeferredStorages* deferred = nullptr)
      : archive_(archive), data_(pickle), deferred_(deferred) {}
  PickleMachine(const PickleMachine&) = delete;
  PickleMachine& operator=(const PickleMachine&) = delete;
  // Whatever the pickle built, however deep, goes without recursion: every
  // container it made is held in created_ until here (so none is freed
  // recursively by a POP or an overwrite on the way), then all are dropped
  // together, those outside the result emptied first, cycles and all.
  ~PickleMachine() {
    destroy_made_values(std::move(created_), result_containers_);
    std::vector<c10::IValue> values;
    for (auto& item : stack_) values.push_back(std::move(item.value));
    for (auto& entry : memo_) values.push_back(std::move(entry.second.value));
    destroy_values(std::move(values));
  }

  c10::IValue run() {
    while (true) {
      const auto op = static_cast<uint8_t>(read_byte());
      if (op == '.') {  // STOP
        TORCH_CHECK(stack_.size() == 1, "pickle ends with ", stack_.size(),
                    " values on its stack");
        const Item item = pop();
        TORCH_CHECK(!item.value.isNone() || item.object_class.empty(),
                    "the file holds a pickled ", item.object_class,
                    " object, not tensors; a whole pickled object needs its "
                    "class's code to load, and tensor files are read without "
                    "running code. Save the tensors instead, e.g. "
                    "torch.save(module.state_dict(), path)");
        c10::IValue root = value(item);
        try {
          result_containers_ = check_value_graph(root);
        } catch (...) {
          destroy_value(std::move(root));
          throw;
        }
        return root;
      }
      step(op);
    }
  }

 private:
  char read_byte() {
    TORCH_CHECK(pos_ < data_.size(), "the pickle is truncated");
    return data_[pos_++];
  }
  template <typename T>
  T read_le() {  // little-endian, as pickle writes its integers
    TORCH_CHECK(pos_ + sizeof(T) <= data_.size(), "the pickle is truncated");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_bytes(size_t n) {
    TORCH_CHECK(n <= data_.size() - pos_, "the pickle is truncated");
    std::string s(data_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  std::string read_line() {
    std::string s;
    for (char c = read_byte(); c != '\n'; c = read_byte()) {
      s += c;
    }
    return s;
  }

  Item pop() {
    TORCH_CHECK(!stack_.empty(), "the pickle pops an empty stack");
    Item item = std::move(stack_.back());
    stack_.pop_back();
    return item;
  }
  // A global used as a value (a torch.dtype in a checkpoint's config, say)
  // stands for its name: "torch.float32".
  static c10::IValue value(const Item& item) {
    TORCH_CHECK(!item.mark, "unexpected MARK in the pickle");
    return item.global.empty() ? item.value : c10::IValue(item.global);
  }
  // The values above the topmost MARK, which is removed.
  std::vector<c10::IValue> pop_to_mark() {
    std::vector<c10::IValue> out;
    while (true) {
      Item item = pop();
      if (item.mark) {
        break;
      }
      out.push_back(value(item));
    }
    return {out.rbegin(), out.rend()};
  }
  void push(c10::IValue v) {
    // Each value costs memory whether or not the result keeps it: a pickle
    // of a few megabytes (deflated: kilobytes) could build billions.
    TORCH_CHECK(++pushed_ <= kMaxPickleValues, "the pickle builds more than ",
                kMaxPickleValues, " values");
    if (v.isList() || v.isGenericDict() || v.isTuple()) created_.push_back(v);
    stack_.push_back(Item{std::move(v), {}});
  }
  // Tuples can be dict keys, which are hashed and compared recursively
  // while the pickle runs: their nesting is bounded as they are made.
  void push_tuple(std::vector<c10::IValue> elements) {
    int64_t depth = 1;
    for (const auto& e : elements) {
      if (e.isTuple()) {
        const auto it = tuple_depth_.find(e.internalToPointer());
        depth =
            std::max(depth, (it != tuple_depth_.end() ? it->second : 1) + 1);
      }
    }
    TORCH_CHECK(depth <= kMaxPickleNesting,
                "the pickle nests tuples more than ", kMaxPickleNesting,
                " deep");
    auto tuple = c10::ivalue::Tuple::create(std::move(elements));
    tuple_depth_[tuple.get()] = depth;
    push(std::move(tuple));
  }
  c10::IValue& top() {
    TORCH_CHECK(!stack_.empty(), "the pickle reads an empty stack");
    return stack_.back().value;
  }
  void memo_put(uint32_t key) {
    TORCH_CHECK(!stack_.empty(), "the pickle memoizes an empty stack");
    memo_[key] = stack_.back();
  }
  void memo_get(uint32_t key) {
    const auto it = memo_.find(key);
    TORCH_CHECK(it != memo_.end(), "the pickle reads memo ", key,
                " before writing it");
    stack_.push_back(it->second);
  }

  void global(const std::string& module, const std::string& name) {
    if (module == "torch" && storage_dtypes().count(name)) {
      push(static_cast<int64_t>(storage_dtypes().at(name)));
    } else {
      stack_.push_back(Item{c10::IValue(), module + "." + name});
    }
  }

  // An object of a TorchScript class (a module in a TorchScript archive, or
  // the one C++ torch::save writes): a dict that BUILD fills with its
  // attributes. Its class's code is never run.
  void script_object(const std::string& type) {
    c10::IValue attributes =
        c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    script_objects_.emplace(attributes.internalToPointer(), type);
    push(std::move(attributes));
  }

  // BUILD: the state sets the attributes of the object below it. Those of a
  // TorchScript object are its dict's entries; a Python object's are of no
  // use here and are dropped.
  void build(const c10::IValue& state) {
    const c10::IValue& object = top();
    if (!object.isGenericDict()) return;
    const auto it = script_objects_.find(object.internalToPointer());
    if (it == script_objects_.end()) return;
    TORCH_CHECK(state.isGenericDict(), "the pickle builds a ", it->second,
                " from a ", state.tagKind(),
                ": its own __setstate__ code would read that, and tensor "
                "files are read without running code (a TorchScript model "
                "runs with --model)");
    auto attributes = object.toGenericDict();
    for (const auto& entry : state.toGenericDict()) {
      attributes.insert_or_assign(entry.key(), entry.value());
    }
  }

  // ('storage', dtype, key, location, numel): the flat tensor of record
  // data/<key>, read once and shared by every view of it.
  c10::IValue persistent_load(const c10::IValue& pid) {
    const auto& e = pid.toTupleRef().elements();
    // Storages of a dtype with a legacy class (torch.FloatStorage, ...) and,
    // from _rebuild_tensor_v3 (float8, uint16, ...), untyped ones in bytes.
    const bool untyped = e.size() >= 5 && e[1].isString() &&
                         e[1].toStringRef() == "torch.storage.UntypedStorage";
    TORCH_CHECK(e.size() >= 5 && e[0].isString() &&
                    e[0].toStringRef() == "storage" &&
                    (e[1].isInt() || untyped),
                "unsupported persistent id in the pickle");
    const std::string key = e[2].toStringRef();
    const auto it = storages_.find(key);
    if (it != storages_.end()) {
      return it->second;
    }
    bool known = untyped;
    for (const auto& entry : storage_dtypes()) {
      known = known || (e[1].isInt() &&
                        static_cast<int64_t>(entry.second) == e[1].toInt());
    }
    TORCH_CHECK(known, "storage ", key, " has an unsupported type");
    const auto dtype =
        untyped ? at::kByte : static_cast<at::ScalarType>(e[1].toInt());
    const int64_t numel = e[4].toInt();
    // NOTE: the pickle's numel is untrusted: it must match the record's size
    // before anything is allocated.
    const auto item = static_cast<int64_t>(c10::elementSize(dtype));
    int64_t nbytes = 0;
    TORCH_CHECK(numel >= 0 && !__builtin_mul_overflow(numel, item, &nbytes),
                "storage ", key, " has an impossible size of ", numel,
                " elements");
    const std::string record = "data/" + key;
    const size_t size = nbytes > 0 && archive_.hasRecord(record)
                            ? archive_.getRecordSize(record)
                            : 0;
    TORCH_CHECK(size == static_cast<size_t>(nbytes), "storage ", key, " holds ",
                size, " bytes, expected ", nbytes, " (", numel, " elements)");
    if (deferred_ != nullptr) {
      auto flat = at::empty({numel}, at::TensorOptions().dtype(dtype).device(
                                         c10::DeviceType::Meta));
      deferred_->emplace(flat.storage().unsafeGetStorageImpl(),
                         DeferredStorage{record, flat, {}});
      storages_.emplace(key, flat);
      return flat;
    }
    auto flat = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (numel > 0) {
      const auto [data, got] = archive_.getRecord(record);
      TORCH_CHECK(got == size, "storage ", key, " changed size while read");
      std::memcpy(flat.data_ptr(), data.get(), size);
    }
    storages_.emplace(key, flat);
    return flat;
  }

  // The class of the object REDUCE or NEWOBJ of `fn` builds: `fn` itself,
  // or for protocol 2's copyreg.__newobj__ / _reconstructor its first
  // argument.
  static std::string object_class(const Item& fn, const c10::IValue& args) {
    if (args.isTuple() && !args.toTupleRef().elements().empty() &&
        args.toTupleRef().elements()[0].isString() &&
        fn.global.rfind("copyreg.", 0) == 0) {
      return args.toTupleRef().elements()[0].toStringRef();
    }
    return fn.global;
  }

  // The view of a flat storage tensor a pickled tensor is, checked to lie
  // inside the storage first (a placeholder on the meta device would not
  // say so in these words).
  static at::Tensor view_of(const at::Tensor& flat,
                            const std::vector<int64_t>& sizes,
                            const std::vector<int64_t>& strides,
                            int64_t offset) {
    TORCH_CHECK(sizes.size() == strides.size(), "a tensor of ", sizes.size(),
                " dims with ", strides.size(), " strides in the pickle");
    bool empty = false;
    int64_t last = offset;  // the last element the view reaches
    bool overflow = offset < 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      overflow = overflow || sizes[i] < 0 || strides[i] < 0;
      empty = empty || sizes[i] == 0;
      int64_t step = 0;
      overflow = overflow ||
                 __builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
                 __builtin_add_overflow(last, step, &last);
    }
    TORCH_CHECK(!overflow && (empty || last < flat.numel()),
                "a tensor of shape ", c10::IntArrayRef(sizes), ", strides ",
                c10::IntArrayRef(strides), " and offset ", offset,
                " is out of bounds for storage of ", flat.numel(), " elements");
    return flat.as_strided(sizes, strides, offset);
  }

  // What REDUCE of the global `fn` with `args` gives.
  c10::IValue reduce(const std::string& fn, const c10::IValue& args) {
    if (fn == "collections.OrderedDict") {
      return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    }
    const auto& a = args.toTupleRef().elements();
    if (fn == "torch._utils._rebuild_tensor_v2" ||
        fn == "torch._utils._rebuild_tensor") {
      TORCH_CHECK(a.size() >= 4 && a[0].isTensor(), "bad arguments to ", fn);
      return view_of(a[0].toTensor(), int_tuple(a[2]), int_tuple(a[3]),
                     a[1].toInt());
    }
    // (untyped storage, offset, size, stride, requires_grad, hooks, dtype):
    // the storage's bytes seen as `dtype`.
    if (fn == "torch._utils._rebuild_tensor_v3") {
      TORCH_CHECK(a.size() >= 7 && a[0].isTensor() && a[6].isString(),
                  "bad arguments to ", fn);
      const auto dtype = dtype_named(a[6].toStringRef());
      const auto bytes = a[0].toTensor();
      const auto size = static_cast<int64_t>(c10::elementSize(dtype));
      TORCH_CHECK(bytes.numel() % size == 0, "storage of ", bytes.numel(),
                  " bytes does not hold whole ", a[6].toStringRef(),
                  " elements");
      return view_of(bytes.view(dtype), int_tuple(a[2]), int_tuple(a[3]),
                     a[1].toInt());
    }
    // C++ pickle_save's type tags: the value is all we need.
    if (fn == "torch.jit._pickle.restore_type_tag" ||
        fn == "torch.jit._pickle.build_tensorlist" ||
        fn == "torch.jit._pickle.build_intlist" ||
        fn == "torch.jit._pickle.build_doublelist" ||
        fn == "torch.jit._pickle.build_boollist") {
      TORCH_CHECK(!a.empty(), "bad arguments to ", fn);
      return a[0];
    }
    if (fn == "torch._utils._rebuild_parameter" ||
        fn == "torch._utils._rebuild_parameter_with_state") {
      TORCH_CHECK(!a.empty() && a[0].isTensor(), "bad arguments to ", fn);
      return a[0];
    }
    return c10::IValue();  // a Python object we have no use for
  }

  // One opcode; each family's handler answers whether it knew the opcode.
  void step(uint8_t op) {
    TORCH_CHECK(
        stack_op(op) || scalar_op(op) || container_op(op) || object_op(op),
        "unsupported pickle opcode 0x", std::hex, int(op), " at byte ",
        std::dec, pos_ - 1);
  }

  // Framing, marks, the stack's own moves and the memo.
  bool stack_op(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        read_byte();
        return true;
      case 0x95:  // FRAME
        read_le<uint64_t>();
        return true;
      case '(':  // MARK
        stack_.push_back(Item{c10::IValue(), "", true});
        return true;
      case '0':  // POP
        pop();
        return true;
      case '1':  // POP_MARK
        pop_to_mark();
        return true;
      case '2':  // DUP
        stack_.push_back(stack_.at(stack_.size() - 1));
        return true;
      case 'q':  // BINPUT
        memo_put(read_le<uint8_t>());
        return true;
      case 'r':  // LONG_BINPUT
        memo_put(read_le<uint32_t>());
        return true;
      case 0x94:  // MEMOIZE
        memo_put(static_cast<uint32_t>(memo_.size()));
        return true;
      case 'h':  // BINGET
        memo_get(read_le<uint8_t>());
        return true;
      case 'j':  // LONG_BINGET
        memo_get(read_le<uint32_t>());
        return true;
      default:
        return false;
    }
  }

  // None, booleans, integers, floats, strings and bytes.
  bool scalar_op(uint8_t op) {
    switch (op) {
      case 'N':
        push(c10::IValue());
        return true;
      case 0x88:
        push(true);
        return true;
      case 0x89:
        push(false);
        return true;
      case 'J':
        push(static_cast<int64_t>(read_le<int32_t>()));
        return true;
      case 'K':
        push(static_cast<int64_t>(read_le<uint8_t>()));
        return true;
      case 'M':
        push(static_cast<int64_t>(read_le<uint16_t>()));
        return true;
      case 0x8a:  // LONG1
        push(read_long1());
        return true;
      case 'G':  // BINFLOAT
        push(read_binfloat());
        return true;
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
      case 'B':  // BINBYTES
        push(read_bytes(read_le<uint32_t>()));
        return true;
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
      case 'C':   // SHORT_BINBYTES
        push(read_bytes(read_le<uint8_t>()));
        return true;
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
        push(read_bytes(read_le<uint64_t>()));
        return true;
      default:
        return false;
    }
  }

  // n little-endian two's-complement bytes.
  int64_t read_long1() {
    const auto n = read_le<uint8_t>();
    TORCH_CHECK(n <= 8, "integer of ", int(n), " bytes in the pickle");
    uint64_t v = 0;
    const std::string bytes = read_bytes(n);
    for (int i = n - 1; i >= 0; --i) {
      v = (v << 8) | static_cast<uint8_t>(bytes[i]);
    }
    if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) {
      v |= ~uint64_t{0} << (8 * n);  // sign-extend
    }
    return static_cast<int64_t>(v);
  }

  // A big-endian float64.
  double read_binfloat() {
    uint64_t bits = 0;
    for (char c : read_bytes(8)) {
      bits = (bits << 8) | static_cast<uint8_t>(c);
    }
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  }

  // Tuples, lists and dicts: made, and filled.
  bool container_op(uint8_t op) {
    switch (op) {
      case ')':  // EMPTY_TUPLE
        push_tuple({});
        return true;
      case 't':  // TUPLE
        push_tuple(pop_to_mark());
        return true;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<c10::IValue> e(op - 0x84);
        for (auto it = e.rbegin(); it != e.rend(); ++it) {
          *it = value(pop());
        }
        push_tuple(std::move(e));
        return true;
      }
      case ']':  // EMPTY_LIST
        push(c10::impl::GenericList(c10::AnyType::get()));
        return true;
      case 'l': {  // LIST
        c10::impl::GenericList list(c10::AnyType::get());
        for (auto& v : pop_to_mark()) {
          list.push_back(std::move(v));
        }
        push(list);
        return true;
      }
      case 'a':  // APPEND
      case 'e':  // APPENDS
        append(op == 'a' ? std::vector<c10::IValue>{value(pop())}
                         : pop_to_mark());
        return true;
      case '}':  // EMPTY_DICT
        push(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()));
        return true;
      case 'd':    // DICT
      case 'u': {  // SETITEMS
        auto kv = pop_to_mark();
        if (op == 'd') {
          push(
              c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()));
        }
        set_items(std::move(kv));
        return true;
      }
      case 's': {  // SETITEM
        auto v = value(pop());
        auto k = value(pop());
        set_items({std::move(k), std::move(v)});
        return true;
      }
      default:
        return false;
    }
  }

  void append(std::vector<c10::IValue> values) {
    TORCH_CHECK(top().isList(), "APPEND to a ", top().tagKind(),
                " in the pickle");
    auto list = top().toList();
    for (auto& v : values) {
      list.push_back(std::move(v));
    }
  }

  // Keys and values, alternating, into the dict on top of the stack.
  void set_items(std::vector<c10::IValue> kv) {
    TORCH_CHECK(kv.size() % 2 == 0, "odd SETITEMS in the pickle");
    TORCH_CHECK(top().isGenericDict(), "SETITEMS on a ", top().tagKind(),
                " in the pickle");
    auto dict = top().toGenericDict();
    for (size_t i = 0; i < kv.size(); i += 2) {
      dict.insert_or_assign(std::move(kv[i]), std::move(kv[i + 1]));
    }
  }

  // Globals, calls of them, object state and torch's storages.
  bool object_op(uint8_t op) {
    switch (op) {
      case 'c': {  // GLOBAL
        const auto module = read_line();
        global(module, read_line());
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        const auto name = value(pop()).toStringRef();
        global(value(pop()).toStringRef(), name);
        return true;
      }
      case 'R':     // REDUCE
      case 0x81: {  // NEWOBJ
        const auto args = value(pop());
        call(pop(), args);
        return true;
      }
      case 'b':  // BUILD
        build(value(pop()));
        return true;
      case 'Q':  // BINPERSID
        push(persistent_load(value(pop())));
        return true;
      default:
        return false;
    }
  }

  // fn(*args): a TorchScript object, a value fgl knows how to make, or an
  // object of a class it does not run (kept as a named placeholder).
  void call(const Item& fn, const c10::IValue& args) {
    TORCH_CHECK(!fn.global.empty(), "REDUCE of a non-global in the pickle");
    if (fn.global.rfind("__torch__.", 0) == 0) {
      script_object(fn.global);
    } else if (c10::IValue result = reduce(fn.global, args); !result.isNone()) {
      push(std::move(result));
    } else {
      stack_.push_back(Item{c10::IValue(), "", false, object_class(fn, args)});
    }
  }

  caffe2::serialize::PyTorchStreamReader& archive_;
  const std::vector<char>& data_;
  size_t pos_ = 0;
  std::vector<Item> stack_;
  std::unordered_map<uint32_t, Item> memo_;
  std::unordered_map<std::string, at::Tensor> storages_;
  DeferredStorages* deferred_;
  std::unordered_map<const void*, int64_t> tuple_depth_;
  // TorchScript objects' dicts (script_object), with their class names.
  std::unordered_map<const void*, std::string> script_objects_;
  std::vector<c10::IValue> created_;  // every container, see ~PickleMachine
  Containers result_containers_;      // those run() returns
  int64_t pushed_ = 0;                // values built, see push
};

// Emits protocol-2 pickle opcodes; tensors become storages written as
// records data/0, data/1, ... exactly as torch.save lays them out.
class PickleWriter {
 public:
  std::string pickle;
  std::vector<at::Tensor> storages;

  void write(const c10::IValue& v) {
    if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isNone()) {
      pickle += 'N';
    } else if (v.isBool()) {
      pickle += v.toBool() ? '\x88' : '\x89';
    } else if (v.isInt()) {
      integer(v.toInt());
    } else if (v.isDouble()) {
      uint64_t bits;
      const double d = v.toDouble();
      std::memcpy(&bits, &d, sizeof(d));
      pickle += 'G';
      for (int i = 7; i >= 0; --i) {
        pickle += static_cast<char>((bits >> (8 * i)) & 0xff);
      }
    } else if (v.isString()) {
      string(v.toStringRef());
    } else if (v.isList()) {
      pickle += "](";
      for (const auto& e : v.toListRef()) {
        write(e);
      }
      pickle += 'e';
    } else if (v.isTuple()) {
      pickle += '(';
      for (const auto& e : v.toTupleRef().elements()) {
        write(e);
      }
      pickle += 't';
    } else if (v.isGenericDict()) {
      pickle += "}(";
      for (const auto& e : v.toGenericDict()) {
        write(e.key());
        write(e.value());
      }
      pickle += 'u';
    } else {
      TORCH_CHECK(false, "cannot write a ", v.tagKind(),
                  " in torch.save format");
    }
  }

 private:
  template <typename T>
  void le(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    pickle.append(b, sizeof(T));
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      pickle += 'J';
      le(static_cast<int32_t>(v));
    } else {
      pickle += '\x8a';
      pickle += '\x08';
      le(v);
    }
  }
  void string(const std::string& s) {
    pickle += 'X';
    le(static_cast<uint32_t>(s.size()));
    pickle += s;
  }
  void global(const std::string& module, const std::string& name) {
    pickle += 'c' + module + '\n' + name + '\n';
  }
  void int_tuple(at::IntArrayRef values) {
    pickle += '(';
    for (const auto v : values) {
      integer(v);
    }
    pickle += 't';
  }
  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  //                                  requires_grad, backward_hooks)
  void tensor(const at::Tensor& t) {
    TORCH_CHECK(t.device().is_cpu(), "write_torch_save needs CPU tensors");
    const auto data = t.contiguous();
    std::string storage_class;
    for (const auto& [name, dtype] : storage_dtypes()) {
      if (dtype == data.scalar_type()) {
        storage_class = name;
      }
    }
    TORCH_CHECK(!storage_class.empty(), "cannot write ", data.scalar_type(),
                " tensors in torch.save format");
    const std::string key = std::to_string(storages.size());
    storages.push_back(data);
    global("torch._utils", "_rebuild_tensor_v2");
    pickle += "((";
    string("storage");
    global("torch", storage_class);
    string(key);
    string("cpu");
    integer(data.numel());
    pickle += "tQ";  // TUPLE, BINPERSID
    integer(0);
    int_tuple(data.sizes());
    int_tuple(data.strides());
    pickle += '\x89';  // requires_grad=False
    global("collections", "OrderedDict");
    pickle += ")R";  // OrderedDict()
    pickle += "tR";
  }
};

}  // namespace

std::vector<char> write_torch_save(const c10::IValue& value) {
  PickleWriter writer;
  writer.pickle = "\x80\x02";  // PROTO 2, what torch.save writes
  writer.write(value);
  writer.pickle += '.';
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter zip(
      [&](const void* buf, size_t n) -> size_t {
        const auto* bytes = static_cast<const char*>(buf);
        out.insert(out.end(), bytes, bytes + n);
        return n;
      });
  zip.writeRecord("data.pkl", writer.pickle.data(), writer.pickle.size());
  zip.writeRecord("byteorder", "little", 6);
  for (size_t i = 0; i < writer.storages.size(); ++i) {
    const auto& t = writer.storages[i];
    zip.writeRecord("data/" + std::to_string(i), t.data_ptr(), t.nbytes());
  }
  zip.writeEndOfFile();
  return out;
}

namespace {

// Bytes in memory as a zip source. NOTE: not caffe2's MemoryReadAdapter,
// which copies whatever range it is asked for; reads here stop at the end.
class BytesAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BytesAdapter(const void* data, size_t size)
      : data_(static_cast<const char*>(data)), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n,
              const char* what = "") const override {
    if (pos >= size_) return 0;
    n = std::min<uint64_t>(n, size_ - pos);
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* data_;
  size_t size_;
};

c10::IValue read_archive(caffe2::serialize::PyTorchStreamReader& archive,
                         DeferredStorages* deferred = nullptr) {
  TORCH_CHECK(archive.hasRecord("data.pkl"),
              "a zip file without data.pkl, not written by torch.save");
  const auto [data, size] = archive.getRecord("data.pkl");
  const auto* bytes = static_cast<const char*>(data.get());
  const std::vector<char> pickle(bytes, bytes + size);
  return PickleMachine(archive, pickle, deferred).run();
}

// The file format versions this libtorch's PyTorchStreamReader reads.
constexpr TorchVersions kTorchVersions{
    caffe2::serialize::kMinSupportedFileFormatVersion,
    caffe2::serialize::kMaxSupportedFileFormatVersion};

// Refuses a zip archive whose directory is damaged or expands past
// `max_expanded` bytes, or that libtorch's reader would refuse only after
// allocating what it then leaves (check_torch_archive), before any record
// is read; `where` opens the message.
void check_archive(const ReadAt& read, uint64_t size, uint64_t max_expanded,
                   const std::string& where) {
  try {
    check_torch_archive(read, size,
                        check_zip_directory(read, size, max_expanded),
                        kTorchVersions);
  } catch (const ZipError& e) {
    TORCH_CHECK(false, where, e.what());
  }
}

void check_zip(const InputFile& file, uint64_t max_expanded) {
  check_archive([&](uint64_t offset, void* out,
                    size_t n) { return file.read_some(offset, out, n); },
                file.size(), max_expanded, file.path() + ": ");
}

bool holds_torchscript(caffe2::serialize::PyTorchStreamReader& archive) {
  for (const auto& record : archive.getAllRecords()) {
    if (record == "constants.pkl" || record.rfind("code/", 0) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

struct TorchSaveFile::State {
  explicit State(
      std::shared_ptr<caffe2::serialize::ReadAdapterInterface> adapter)
      : archive(std::move(adapter)) {}
  caffe2::serialize::PyTorchStreamReader archive;
  DeferredStorages storages;
  c10::IValue root;
  bool torchscript = false;
};

TorchSaveFile::TorchSaveFile(const InputFile& file, uint64_t max_expanded) {
  check_zip(file, max_expanded);
  state_ = std::make_unique<State>(file.adapter());
  state_->torchscript = holds_torchscript(state_->archive);
  state_->root = read_archive(state_->archive, &state_->storages);
}

TorchSaveFile::~TorchSaveFile() = default;

bool TorchSaveFile::torchscript() const { return state_->torchscript; }

const c10::IValue& TorchSaveFile::root() const { return state_->root; }

at::Tensor TorchSaveFile::load(const at::Tensor& placeholder) {
  const auto it =
      state_->storages.find(placeholder.storage().unsafeGetStorageImpl());
  TORCH_CHECK(it != state_->storages.end(),
              "TorchSaveFile::load: a tensor this file did not make");
  DeferredStorage& storage = it->second;
  if (!storage.loaded.defined()) {
    auto flat = at::empty_like(storage.placeholder, at::Device(at::kCPU));
    const auto nbytes = static_cast<size_t>(flat.nbytes());
    if (nbytes > 0) {
      const auto [data, got] = state_->archive.getRecord(storage.record);
      TORCH_CHECK(got == nbytes, storage.record, " changed size while read");
      std::memcpy(flat.data_ptr(), data.get(), nbytes);
    }
    storage.loaded = flat;
  }
  // The placeholder's view of its storage, over the bytes: an untyped
  // storage (bytes) is seen in the tensor's dtype first.
  at::Tensor base = storage.loaded;
  if (base.scalar_type() != placeholder.scalar_type()) {
    base = base.view(placeholder.scalar_type());
  }
  return base.as_strided(placeholder.sizes(), placeholder.strides(),
                         placeholder.storage_offset());
}

c10::IValue read_torch_save(const void* data, size_t size) {
  check_archive(read_bytes(data, size), size, UINT64_MAX, "");
  caffe2::serialize::PyTorchStreamReader archive(
      std::make_shared<BytesAdapter>(data, size));
  return read_archive(archive);
}

}  // namespace fgl::io
