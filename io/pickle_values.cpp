#include "fgl/io/pickle_values.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <iterator>
#include <unordered_map>

namespace fgl::io {
namespace {

bool is_container(const c10::IValue& v) {
  return v.isList() || v.isGenericDict() || v.isTuple();
}

// The values directly inside `v`: elements, dict keys and values.
std::vector<c10::IValue> children(const c10::IValue& v) {
  std::vector<c10::IValue> out;
  if (v.isList()) {
    const auto list = v.toListRef();
    out.assign(list.begin(), list.end());
  } else if (v.isGenericDict()) {
    for (const auto& entry : v.toGenericDict()) {
      out.push_back(entry.key());
      out.push_back(entry.value());
    }
  } else if (v.isTuple()) {
    const auto& elements = v.toTupleRef().elements();
    out.assign(elements.begin(), elements.end());
  }
  return out;
}

// Moves the values inside container `v` to `work`, leaving it empty.
void empty_into(const c10::IValue& v, std::vector<c10::IValue>& work) {
  if (v.isList()) {
    auto list = v.toList();
    for (const auto& e : list) work.push_back(e);
    list.clear();
  } else if (v.isGenericDict()) {
    auto dict = v.toGenericDict();
    for (const auto& entry : dict) {
      work.push_back(entry.key());
      work.push_back(entry.value());
    }
    dict.clear();
  } else if (v.isTuple()) {
    const auto& tuple = v.toTuple();
    for (size_t i = 0; i < tuple->size(); ++i) {
      work.push_back(tuple->elements()[i]);
      tuple->unsafeSetElement(i, c10::IValue());
    }
  }
}

}  // namespace

Containers check_value_graph(const c10::IValue& root) {
  if (!is_container(root)) return {};
  // Post-order over the containers, each visited once: `open` ones are on
  // the current path (reaching one again is a cycle); `done` ones know
  // their height and their size as a tree.
  struct Info {
    bool done = false;
    int64_t height = 0;
    int64_t tree_size = 0;
  };
  struct Frame {
    c10::IValue value;
    std::vector<c10::IValue> children;
    size_t next = 0;
  };
  std::unordered_map<const void*, Info> seen;
  std::vector<Frame> path;
  seen[root.internalToPointer()] = {};
  path.push_back({root, children(root)});
  while (!path.empty()) {
    Frame& frame = path.back();
    if (frame.next < frame.children.size()) {
      const c10::IValue child = frame.children[frame.next++];
      if (!is_container(child)) continue;
      const auto found = seen.find(child.internalToPointer());
      if (found != seen.end()) {
        TORCH_CHECK(found->second.done,
                    "the pickle puts a container inside itself");
        continue;
      }
      TORCH_CHECK(static_cast<int64_t>(path.size()) < kMaxPickleNesting,
                  "the pickle nests containers more than ", kMaxPickleNesting,
                  " deep");
      seen[child.internalToPointer()] = {};
      path.push_back({child, children(child)});
      continue;
    }
    Info info{true, 1, 1};
    for (const auto& child : frame.children) {
      const Info leaf{true, 0, 1};
      const Info& c =
          is_container(child) ? seen.at(child.internalToPointer()) : leaf;
      info.height = std::max(info.height, c.height + 1);
      info.tree_size =
          std::min(info.tree_size + c.tree_size, kMaxPickleValues + 1);
    }
    TORCH_CHECK(info.height <= kMaxPickleNesting,
                "the pickle nests containers more than ", kMaxPickleNesting,
                " deep");
    TORCH_CHECK(info.tree_size <= kMaxPickleValues,
                "the pickle's values expand to more than ", kMaxPickleValues,
                " entries (shared ones counted where they appear)");
    seen[frame.value.internalToPointer()] = info;
    path.pop_back();
  }
  Containers containers;
  for (const auto& entry : seen) containers.insert(entry.first);
  return containers;
}

void destroy_values(std::vector<c10::IValue> work) {
  while (!work.empty()) {
    c10::IValue v = std::move(work.back());
    work.pop_back();
    // Only a container this loop holds alone is emptied: one still held
    // elsewhere (a returned value) is left whole.
    if (is_container(v) && v.use_count() == 1) empty_into(v, work);
  }
}

void destroy_made_values(std::vector<c10::IValue> made,
                         const Containers& kept) {
  std::vector<c10::IValue> work;
  for (auto& v : made) {
    if (is_container(v) && !kept.count(v.internalToPointer())) {
      empty_into(v, work);
    }
  }
  work.insert(work.end(), std::make_move_iterator(made.begin()),
              std::make_move_iterator(made.end()));
  made.clear();
  destroy_values(std::move(work));
}

void destroy_value(c10::IValue value) {
  std::vector<c10::IValue> values;
  values.push_back(std::move(value));
  destroy_values(std::move(values));
}

}  // namespace fgl::io
