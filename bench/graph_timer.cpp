#include "graph_timer.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "cuda/gather_linear_kernel.h"

namespace fgl::bench {

std::string cuda_device_name(c10::DeviceIndex index) {
  return at::cuda::getDeviceProperties(index)->name;
}

int64_t cuda_memory_gbps(c10::DeviceIndex index) {
  return cuda::memory_gbps(index);
}

int64_t cuda_free_bytes(c10::DeviceIndex index) {
  const c10::cuda::CUDAGuard guard(index);
  size_t free_bytes = 0, total_bytes = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(free_bytes);
}

timing::LatencyStats time_graph_replays(
    const std::function<void(int64_t)>& call, const c10::Device& device,
    const GraphTimingConfig& config) {
  TORCH_CHECK(device.is_cuda() && device.has_index(),
              "time_graph_replays needs a CUDA device with an index, got ",
              device);
  TORCH_CHECK(config.calls >= 1 && config.replays >= 1,
              "time_graph_replays needs calls >= 1 and replays >= 1, got ",
              config.calls, " and ", config.replays);
  const c10::cuda::CUDAGuard device_guard(device);
  const auto origin = at::cuda::getCurrentCUDAStream();
  const auto side = at::cuda::getStreamFromPool(false, device.index());
  // The side stream must see the inputs the origin stream made.
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(origin);
  inputs_ready.block(side);

  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard stream_guard(side);
    // NOTE: eager warm-up on the capture stream itself: cuBLAS picks its
    // workspace per (handle, stream), and allocating it mid-capture is what
    // breaks captures.
    for (int64_t i = 0; i < config.calls; ++i) call(i);
    side.synchronize();
    graph.capture_begin();
    for (int64_t i = 0; i < config.calls; ++i) call(i);
    graph.capture_end();

    for (int i = 0; i < config.warmup_replays; ++i) graph.replay();
    std::vector<at::cuda::CUDAEvent> starts, stops;
    starts.reserve(config.replays);
    stops.reserve(config.replays);
    for (int i = 0; i < config.replays; ++i) {
      starts.emplace_back(cudaEventDefault);
      stops.emplace_back(cudaEventDefault);
    }
    for (int i = 0; i < config.replays; ++i) {
      starts[i].record(side);
      graph.replay();
      stops[i].record(side);
    }
    side.synchronize();

    std::vector<double> per_call_us;
    per_call_us.reserve(config.replays);
    for (int i = 0; i < config.replays; ++i) {
      const double replay_ms = starts[i].elapsed_time(stops[i]);
      per_call_us.push_back(replay_ms * 1e3 /
                            static_cast<double>(config.calls));
    }
    // Later work on the origin stream may free what the graph read.
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(origin);
    return timing::summarize(std::move(per_call_us));
  }
}

}  // namespace fgl::bench
