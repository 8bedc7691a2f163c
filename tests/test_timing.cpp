// fgl::timing's call-by-call turns (timing/latency.h): how often and in
// which order each computation runs, and how two are compared round by
// round. No durations are asserted: speed is fgl_bench's to measure.
#include <gtest/gtest.h>

#include <cmath>
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
  const Turns turns = time_calls_in_turns(fns, /*warmup=*/2, /*iters=*/4);
  ASSERT_EQ(turns.samples_us.size(), 3u);
  for (const auto& s : turns.samples_us) EXPECT_EQ(s.size(), 4u);
  const auto stats = turns.stats();
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
  EXPECT_TRUE(time_calls_in_turns({}, 3, 5).samples_us.empty());
  int calls = 0;
  const auto stats = time_calls_in_turns({[&calls] { ++calls; }}, 2, 0).stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].samples, 0);
  EXPECT_EQ(calls, 2);
}

TEST(MedianRatio, ComparesTwoComputationsRoundByRound) {
  // Rounds in which the machine ran slower slowed both sides of their pair:
  // every pair's ratio stays 2.
  const std::vector<double> slow = {2, 2, 3, 6, 6}, fast = {1, 1, 1.5, 3, 3};
  EXPECT_DOUBLE_EQ(median_ratio(slow, fast), 2.0);
  EXPECT_DOUBLE_EQ(median_ratio(fast, slow), 0.5);
  // Nearest-rank median of 1/4, 2, 3, 5 (as summarize's p50): 2.
  EXPECT_DOUBLE_EQ(median_ratio({1, 4, 3, 5}, {4, 2, 1, 1}), 2.0);
  // Pairs without a positive denominator do not count; none gives NaN.
  EXPECT_DOUBLE_EQ(median_ratio({3, 7}, {0, 7}), 1.0);
  EXPECT_TRUE(std::isnan(median_ratio({1, 2}, {0, -1})));
  EXPECT_TRUE(std::isnan(median_ratio({}, {})));
  // Only as many pairs as the shorter side holds.
  EXPECT_DOUBLE_EQ(median_ratio({4, 4, 100}, {2, 2}), 2.0);
}

}  // namespace
}  // namespace fgl::timing
