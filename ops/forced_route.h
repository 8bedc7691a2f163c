// The route tests and benchmarks force over a backend's routing policy
// (cuda/kernel_choice.h, cpu/cpu_route.h): one per backend, read on every
// call from any thread.
#pragma once

#include <atomic>
#include <optional>

namespace fgl::detail {

template <typename Route>
class ForcedRoute {
 public:
  void set(std::optional<Route> route) {
    value_.store(route ? static_cast<int>(*route) : -1);
  }
  std::optional<Route> get() const {
    const int v = value_.load();
    if (v < 0) return std::nullopt;
    return static_cast<Route>(v);
  }

 private:
  std::atomic<int> value_{-1};
};

}  // namespace fgl::detail
