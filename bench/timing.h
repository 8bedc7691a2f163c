// Latency measurement shared by fgl_bench and fgl_infer --iters: warm-up,
// one timed sample per call, percentiles.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace fgl::bench {

/// Percentiles of per-call latencies, in microseconds.
struct LatencyStats {
  int64_t samples = 0;
  double min_us = 0, p10_us = 0, p50_us = 0, p90_us = 0, p99_us = 0;
  double mean_us = 0;
};

/// Percentiles (nearest rank) of `samples_us`; empty input gives zeros.
LatencyStats summarize(std::vector<double> samples_us);

/// Runs `fn` `warmup` times, then times each of `iters` calls separately:
/// with device events on the current stream for a GPU (so host overhead that
/// overlaps the GPU is not counted), with a steady clock for the CPU.
LatencyStats time_calls(const std::function<void()>& fn,
                        const c10::Device& device, int warmup, int iters);

}  // namespace fgl::bench
