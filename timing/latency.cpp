#include "latency.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>

namespace fgl::timing {
namespace {

// One call of `fn`, timed by the steady clock, in microseconds.
double steady_clock_us(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const std::chrono::duration<double, std::micro> dt =
      std::chrono::steady_clock::now() - t0;
  return dt.count();
}

}  // namespace

LatencyStats time_calls(const std::function<void()>& fn,
                        const c10::Device& device, int warmup, int iters,
                        const std::function<void(int)>& after_call) {
  int calls = 0;
  const auto called = [&] {
    if (after_call) after_call(++calls);
  };
  for (int i = 0; i < warmup; ++i) {
    fn();
    called();
  }
  std::vector<double> samples_us;
  samples_us.reserve(static_cast<size_t>(std::max(iters, 0)));
  if (device.is_cpu()) {
    for (int i = 0; i < iters; ++i) {
      samples_us.push_back(steady_clock_us(fn));
      called();
    }
    return summarize(std::move(samples_us));
  }
  // Device-generic events: the backend's own timing events (cudaEvent_t on
  // CUDA), recorded on the current stream.
  const c10::DeviceGuard guard(device);
  const c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream stream = impl.getStream(device);
  std::vector<c10::Event> starts, stops;
  starts.reserve(iters);
  stops.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    starts.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    stops.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    starts.back().record(stream);
    fn();
    stops.back().record(stream);
    called();
  }
  stream.synchronize();
  for (int i = 0; i < iters; ++i) {
    samples_us.push_back(starts[i].elapsedTime(stops[i]) * 1e3);
  }
  return summarize(std::move(samples_us));
}

std::vector<LatencyStats> Turns::stats() const {
  std::vector<LatencyStats> stats;
  stats.reserve(samples_us.size());
  for (const auto& s : samples_us) stats.push_back(summarize(s));
  return stats;
}

Turns time_calls_in_turns(const std::vector<std::function<void()>>& fns,
                          int warmup, int iters) {
  const size_t n = fns.size();
  for (int i = 0; i < warmup; ++i) {
    for (const auto& fn : fns) fn();
  }
  Turns turns;
  turns.samples_us.resize(n);
  for (auto& s : turns.samples_us) {
    s.reserve(static_cast<size_t>(std::max(iters, 0)));
  }
  for (int i = 0; i < iters; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const size_t k = (static_cast<size_t>(i) + j) % n;
      turns.samples_us[k].push_back(steady_clock_us(fns[k]));
    }
  }
  return turns;
}

}  // namespace fgl::timing
