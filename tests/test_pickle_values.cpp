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
  // Destroying it returns: the cycle is left, not walked forever.
  io::destroy_value(list);
  EXPECT_EQ(list.size(), 1u);
  // A reader's own containers are emptied whoever holds them.
  io::destroy_made_values({list}, {});
  EXPECT_EQ(list.size(), 0u);
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

TEST(PickleValues, TellsTheContainersOfAGraph) {
  auto inner = empty_list();
  auto outer = empty_list();
  outer.push_back(inner);
  outer.push_back(inner);
  outer.push_back(at::ones({1}));
  const io::Containers containers = io::check_value_graph(outer);
  EXPECT_EQ(containers,
            (io::Containers{c10::IValue(outer).internalToPointer(),
                            c10::IValue(inner).internalToPointer()}));
  EXPECT_TRUE(io::check_value_graph(at::ones({1})).empty());
}

// What a reader made and does not hand out is freed, a container inside
// itself and the tensors in it included; what it hands out is left whole.
TEST(PickleValues, DestroyMadeValuesFreesCyclesAndKeepsTheResult) {
  const auto in_cycle = at::ones({1000});
  const auto in_result = at::ones({3});
  auto cycle = empty_list();
  cycle.push_back(in_cycle);
  cycle.push_back(cycle);
  auto shared = empty_list();
  shared.push_back(in_result);
  auto result = empty_list();
  result.push_back(shared);
  // Garbage that holds a piece of the result and itself.
  auto garbage = empty_list();
  garbage.push_back(shared);
  garbage.push_back(garbage);
  const io::Containers kept = io::check_value_graph(result);
  std::vector<c10::IValue> made{cycle, shared, result, garbage};
  cycle = empty_list();
  garbage = empty_list();
  shared = empty_list();
  io::destroy_made_values(std::move(made), kept);
  EXPECT_EQ(in_cycle.use_count(), 1);  // the cycle's hold is gone
  ASSERT_EQ(result.size(), 1u);
  ASSERT_EQ(result.get(0).toListRef().size(), 1u);
  EXPECT_TRUE(result.get(0).toListRef()[0].toTensor().is_same(in_result));
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
