// The value-graph guards of the pickle reader (io/pickle_values.h): a
// container inside itself, nesting past the limit and DAGs that expand
// past it are refused, and any graph is destroyed without recursion.
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <gtest/gtest.h>

#include "fgl/io/pickle_values.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

c10::impl::GenericList empty_list() {
  return c10::impl::GenericList(c10::AnyType::get());
}

// [[[...]]] nested `depth` deep, built without recursion.
c10::IValue nested_lists(int64_t depth) {
  c10::IValue value = empty_list();
  for (int64_t i = 1; i < depth; ++i) {
    auto outer = empty_list();
    outer.push_back(std::move(value));
    value = outer;
  }
  return value;
}

TEST(PickleValues, AcceptsOrdinaryValues) {
  c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
  auto shared = empty_list();
  shared.push_back(at::ones({2}));
  dict.insert("a", shared);
  dict.insert("b", shared);  // shared, not a cycle
  dict.insert("c", c10::ivalue::Tuple::create({1, "x"}));
  EXPECT_NO_THROW(io::check_value_graph(dict));
  EXPECT_NO_THROW(io::check_value_graph(nested_lists(io::kMaxPickleNesting)));
}

TEST(PickleValues, RefusesAContainerInsideItself) {
  auto list = empty_list();
  list.push_back(list);
  EXPECT_TRUE(throws_with([&] { io::check_value_graph(list); },
                          {"puts a container inside itself"}));
  // Destroying it returns (the cycle is left to leak, not walked forever).
  io::destroy_value(std::move(list));
}

TEST(PickleValues, RefusesDeepNestingAndDestroysItWithoutRecursion) {
  // A million levels overflow the stack of a recursive walk or destructor.
  auto deep = nested_lists(1000000);
  EXPECT_TRUE(throws_with([&] { io::check_value_graph(deep); },
                          {"nests containers more than 1000 deep"}));
  io::destroy_value(std::move(deep));
}

TEST(PickleValues, RefusesGraphsThatExpandPastTheLimit) {
  // Each level holds the previous one twice: 2^40 entries as a tree.
  c10::IValue value = empty_list();
  for (int i = 0; i < 40; ++i) {
    auto level = empty_list();
    level.push_back(value);
    level.push_back(value);
    value = level;
  }
  EXPECT_TRUE(throws_with([&] { io::check_value_graph(value); },
                          {"expand to more than 16777216 entries"}));
}

TEST(PickleValues, DestroyLeavesValuesHeldElsewhereWhole) {
  auto inner = empty_list();
  inner.push_back(1);
  auto outer = empty_list();
  outer.push_back(inner);
  io::destroy_value(std::move(outer));
  EXPECT_EQ(inner.size(), 1u);
}

}  // namespace
}  // namespace fgl::testing
