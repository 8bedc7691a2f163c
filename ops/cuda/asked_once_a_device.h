// A device's fixed answers (its bandwidth, how many clusters of a kernel it
// holds) cost a driver call or an occupancy query: asked once a device, the
// launches that follow pay nothing for them.
#pragma once

#include <mutex>

namespace fgl::cuda {

// What `ask()` answers for `device`, asked the first time this call site (the
// type of `ask`) meets the device, from any thread; devices past the cache's
// reach are asked every time.
template <typename Ask>
auto asked_once_a_device(int device, Ask ask) -> decltype(ask()) {
  using Answer = decltype(ask());
  constexpr int kDevices = 64;
  if (device < 0 || device >= kDevices) return ask();
  static std::once_flag once[kDevices];
  static Answer cached[kDevices];
  std::call_once(once[device], [&] { cached[device] = ask(); });
  return cached[device];
}

}  // namespace fgl::cuda
