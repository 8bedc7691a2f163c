// fgl::timing's call-by-call turns (timing/latency.h): how often and in
// which order each computation runs. No durations are asserted: speed is
// fgl_bench's to measure.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "latency.h"

namespace fgl::timing {
namespace {

TEST(TimeCallsInTurns, CallsEachComputationInRotatingTurns) {
  std::vector<int> order;
  std::vector<std::function<void()>> fns;
  for (int k = 0; k < 3; ++k)
    fns.emplace_back([&order, k] { order.push_back(k); });
  const auto stats = time_calls_in_turns(fns, /*warmup=*/2, /*iters=*/4);
  ASSERT_EQ(stats.size(), 3u);
  for (const auto& s : stats) {
    EXPECT_EQ(s.samples, 4);
    EXPECT_GE(s.min_us, 0.0);
    EXPECT_LE(s.p10_us, s.p50_us);
    EXPECT_LE(s.p50_us, s.p90_us);
  }
  // Two warm-up rounds in order, then rounds starting one further on.
  const std::vector<int> expected = {0, 1, 2, 0, 1, 2,  // warm-up
                                     0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2};
  EXPECT_EQ(order, expected);
}

TEST(TimeCallsInTurns, NoComputationsOrNoRoundsGiveEmptyStats) {
  EXPECT_TRUE(time_calls_in_turns({}, 3, 5).empty());
  int calls = 0;
  const auto stats = time_calls_in_turns({[&calls] { ++calls; }}, 2, 0);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].samples, 0);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace fgl::timing
