// CUDA-graph replay timing (compiled only with FGL_ENABLE_CUDA): many calls
// captured into one graph, each replay timed with CUDA events, so launch
// overhead between calls and host jitter drop out of the per-call time.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>

#include "latency.h"

namespace fgl::bench {

/// Name of CUDA device `index`, e.g. "NVIDIA H200".
std::string cuda_device_name(c10::DeviceIndex index);

/// Peak memory bandwidth of CUDA device `index` in GB/s (0 where not
/// known): what the op's routing reads (Problem::memory_gbps).
int64_t cuda_memory_gbps(c10::DeviceIndex index);

/// Free memory of CUDA device `index`, in bytes.
int64_t cuda_free_bytes(c10::DeviceIndex index);

struct GraphTimingConfig {
  int64_t calls = 20;      // calls captured into the graph
  int warmup_replays = 5;  // untimed replays first
  int replays = 50;        // timed replays
};

/// Times `call(i)`, i = 0 .. calls-1, on CUDA device `device`: runs every
/// call once eagerly on a side stream (so cuBLAS handles and workspaces exist
/// before capture), captures all of them into one at::cuda::CUDAGraph on that
/// stream, replays it `warmup_replays` times, then records a CUDA event pair
/// around each of `replays` replays. Returns the per-call latency of each
/// replay (replay time / calls).
timing::LatencyStats time_graph_replays(
    const std::function<void(int64_t)>& call, const c10::Device& device,
    const GraphTimingConfig& config);

}  // namespace fgl::bench
