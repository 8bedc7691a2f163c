// Latency statistics shared by fgl_bench and fgl_infer --iters:
// percentiles of per-call samples and their spread. Plain C++ (no torch), so
// reports can hold them.
#pragma once

#include <cstdint>
#include <vector>

namespace fgl::timing {

/// Percentiles of per-call latencies, in microseconds.
struct LatencyStats {
  int64_t samples = 0;
  double min_us = 0, p10_us = 0, p50_us = 0, p90_us = 0, p99_us = 0;
  double mean_us = 0;
};

/// Fewer samples than this leave the 99th percentile to one or two calls:
/// reports leave it out.
constexpr int64_t kMinSamplesForP99 = 100;

/// Above this spread the samples say more about a busy machine than about
/// the code: reports warn.
constexpr double kWideSpread = 0.5;

/// Percentiles (nearest rank) of `samples_us`; empty input gives zeros.
LatencyStats summarize(std::vector<double> samples_us);

/// (p90 - p10) / p50: how far the middle 80% of the samples spread around
/// the median (0 for no samples).
double spread(const LatencyStats& s);

/// The median (nearest rank, as summarize's) of numerators[i] /
/// denominators[i] over the pairs with a positive denominator: two
/// computations compared call by call, each pair timed back to back, so
/// that what slows the machine for a while slows both sides of a pair.
/// NaN where no pair counts.
double median_ratio(const std::vector<double>& numerators,
                    const std::vector<double>& denominators);

}  // namespace fgl::timing
