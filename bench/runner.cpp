#include "runner.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "fgl/gather_linear.h"

#ifdef FGL_BENCH_CUDA
#include "graph_timer.h"
#endif

namespace fgl::bench {
namespace {

// The route fgl takes for `in` (forced or the policy's).
std::string route_of(const Inputs& in) {
  return gather_linear_route(in.x, in.weight, in.bias);
}

#ifdef FGL_BENCH_CUDA
// How many operand sets to rotate through: enough that they add up to
// `rotate_bytes`, no more than `max_copies`, and no more than half the free
// device memory holds.
int64_t choose_copies(int64_t set_bytes, int64_t free_bytes,
                      const RunConfig& config) {
  const int64_t wanted =
      (config.rotate_bytes + set_bytes - 1) / std::max<int64_t>(set_bytes, 1);
  const int64_t fit = free_bytes / 2 / std::max<int64_t>(set_bytes, 1);
  return std::max<int64_t>(1, std::min({wanted, config.max_copies, fit}));
}
#endif

}  // namespace

CaseResult run_case(const Case& c, const c10::Device& device,
                    const RunConfig& config) {
  CaseResult result;
  result.c = c;
  result.floor = roofline(c, config.tf32);
  result.fgl_only = config.fgl_only;
  const size_t computations = computations_run(config.fgl_only);

  if (device.is_cpu()) {
    const Inputs in = random_inputs(c, device);
    result.route = route_of(in);
    std::vector<std::function<void()>> calls;
    for (size_t p = 0; p < computations; ++p) {
      calls.emplace_back([&in, computation = kComputations[p]] {
        run_computation(computation, in);
      });
    }
    const auto turns =
        timing::time_calls_in_turns(calls, config.warmup, config.replays);
    const auto stats = turns.stats();
    std::copy(stats.begin(), stats.end(), result.latency.begin());
    if (!config.fgl_only) {
      result.paired_speedup = timing::median_ratio(
          turns.samples_us[kCatIndex], turns.samples_us[kFusedIndex]);
    }
  } else {
#ifdef FGL_BENCH_CUDA
    std::vector<Inputs> sets = {random_inputs(c, device)};
    result.route = route_of(sets.front());
    result.copies = choose_copies(sets.front().nbytes(),
                                  cuda_free_bytes(device.index()), config);
    while (static_cast<int64_t>(sets.size()) < result.copies) {
      sets.push_back(random_inputs(c, device));
    }
    // Every copy is used equally often.
    const int64_t calls = std::max(config.calls_per_graph, result.copies);
    result.calls_per_graph =
        (calls + result.copies - 1) / result.copies * result.copies;
    const GraphTimingConfig graph_config{result.calls_per_graph, config.warmup,
                                         config.replays};
    for (size_t p = 0; p < computations; ++p) {
      const Computation computation = kComputations[p];
      result.latency[p] = time_graph_replays(
          [&](int64_t i) {
            run_computation(computation, sets[i % result.copies]);
          },
          device, graph_config);
    }
#else
    TORCH_CHECK(false, "fgl_bench was built without CUDA; cannot time on ",
                device);
#endif
  }

  result.rel_error = relative_errors(c, device, config.fgl_only);
  return result;
}

}  // namespace fgl::bench
