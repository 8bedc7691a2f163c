// Latency measurement shared by fgl_bench and fgl_infer --iters: warm-up,
// then one timed sample per call.
#pragma once

#include <c10/core/Device.h>

#include <functional>

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

}  // namespace fgl::timing
