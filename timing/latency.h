// Latency measurement shared by fgl_bench and fgl_infer --iters: warm-up,
// then one timed sample per call.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <vector>

#include "latency_stats.h"

namespace fgl::timing {

/// Runs `fn` `warmup` times, then times each of `iters` calls separately:
/// with device events on the current stream for a GPU (so host overhead that
/// overlaps the GPU is not counted), with a steady clock for the CPU.
/// `after_call`, when given, is told the number of calls made so far
/// (warm-up included) after each call, for progress.
LatencyStats time_calls(const std::function<void()>& fn,
                        const c10::Device& device, int warmup, int iters,
                        const std::function<void(int)>& after_call = {});

/// Per-call samples of computations timed in turns: samples_us[f][i] is
/// fns[f]'s call in round i.
struct Turns {
  std::vector<std::vector<double>> samples_us;
  /// One LatencyStats per fn.
  std::vector<LatencyStats> stats() const;
};

/// Times several CPU computations call by call in turns: after `warmup`
/// untimed rounds, `iters` rounds each calling every fn once, round i
/// starting with fns[i % fns.size()] (so no fn always follows the same one).
/// A machine that slows down or speeds up during the run (clocks, other
/// load) then shifts every computation alike, and their ratios hold where
/// timing them one after another would not; median_ratio compares two of
/// them round by round.
Turns time_calls_in_turns(const std::vector<std::function<void()>>& fns,
                          int warmup, int iters);

}  // namespace fgl::timing
