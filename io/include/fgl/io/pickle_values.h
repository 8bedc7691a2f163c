// Safety of the value graphs a pickle builds. A pickle is a program: with
// its memo and its mutating opcodes (APPEND, SETITEM, ...) a few hundred
// bytes can build a list that contains itself, containers nested a million
// deep, or a DAG whose tree-shaped walk never ends. Readers walk values
// recursively and ATen destroys them recursively, so such graphs are
// refused before anyone walks them, and destroyed without recursion.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace fgl::io {

/// Containers may nest at most this deep (Python's own recursion limit).
constexpr int64_t kMaxPickleNesting = 1000;
/// A value graph may expand to at most this many values when every shared
/// value is counted at each place it appears (as a recursive walk sees it).
constexpr int64_t kMaxPickleValues = int64_t{1} << 24;

/// The containers of a value graph, by their address.
using Containers = std::unordered_set<const void*>;

/// Throws c10::Error naming the problem when the graph under `root` holds a
/// container inside itself, nests deeper than kMaxPickleNesting, or expands
/// past kMaxPickleValues; else returns its containers. Iterative: any graph
/// is checked safely.
Containers check_value_graph(const c10::IValue& root);

/// Drops `values` without recursion: containers that nothing else holds are
/// emptied into a work list before they are destroyed. (A container that
/// holds itself is held elsewhere too, so it is left, not freed:
/// destroy_made_values frees those a reader made.) Pass values by moving
/// them in: a copy left behind would be destroyed recursively.
void destroy_values(std::vector<c10::IValue> values);
void destroy_value(c10::IValue value);

/// Drops the containers a reader made, `made`, when it is done: each one
/// not in `kept` (what the reader hands out) is emptied whoever holds it,
/// since only other containers it made can, a cycle among them; those in
/// `kept` are left whole. So a pickle's cycles, and the tensors in them,
/// are freed too.
void destroy_made_values(std::vector<c10::IValue> made, const Containers& kept);

}  // namespace fgl::io
