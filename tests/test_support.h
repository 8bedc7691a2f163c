// Shared pieces of the fgl GoogleTest suite: the float64 reference, fresh
// random inputs, dtype-aware comparison and device discovery.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cpu/cpu_route.h"
#include "cuda/kernel_choice.h"

namespace fgl::testing {

/// One problem: x [R, B, H], weight [K, R*H].
struct Shape {
  int64_t R, B, H, K;
};

inline bool operator==(const Shape& a, const Shape& b) {
  return a.R == b.R && a.B == b.B && a.H == b.H && a.K == b.K;
}

/// "R4_B12_H32_K56": test names and traces.
inline std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << "R" << s.R << "_B" << s.B << "_H" << s.H << "_K" << s.K;
}

/// The path users write today, in float64: linear(cat(x.unbind(0), -1)).
at::Tensor reference_gather_linear(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias);

/// A torch.save archive in memory, as PyTorchStreamWriter writes one: the
/// `records` (name, bytes) in folder "archive/", then its version record.
std::vector<char> torch_archive(
    const std::vector<std::pair<std::string, std::string>>& records);

/// Standard-normal values of `dtype` on `device`; never all zeros.
at::Tensor random_tensor(at::IntArrayRef sizes, at::ScalarType dtype,
                         const at::Device& device);

/// Passes when every |out - ref| <= rtol(dtype) * (|ref| + rms(ref)) +
/// 4 eps(dtype) * ref_abs, where ref_abs (optional) is the reference computed
/// on |x|, |weight|, |bias|: the rounding bound of a sum whose terms cancel.
/// NaN or an unwritten (NaN-poisoned) element never passes.
::testing::AssertionResult matches_reference(const at::Tensor& out,
                                             const at::Tensor& ref,
                                             const at::Tensor& ref_abs = {});

/// "cpu", "cuda:0", ... for every device this process can run the op on.
std::vector<at::Device> available_devices();

/// Dtypes the op supports on every backend.
std::vector<at::ScalarType> supported_dtypes();

/// Forces a route (cuda/kernel_choice.h, cpu/cpu_route.h) while it lives;
/// nullopt keeps the policy's.
class ScopedRoute {
 public:
  explicit ScopedRoute(std::optional<cuda::Route> route) {
    cuda::force_route(route);
  }
  explicit ScopedRoute(std::optional<cpu::Route> route) {
    cpu::force_route(route);
  }
  ~ScopedRoute() {
    cuda::force_route(std::nullopt);
    cpu::force_route(std::nullopt);
  }
  ScopedRoute(const ScopedRoute&) = delete;
  ScopedRoute& operator=(const ScopedRoute&) = delete;
};

/// Runs `fn`, expecting a c10::Error whose message contains every fragment.
template <typename Fn>
::testing::AssertionResult throws_with(Fn&& fn,
                                       const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    for (const auto& part : parts) {
      if (msg.find(part) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message lacks \"" << part << "\": " << msg;
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no c10::Error was thrown";
}

}  // namespace fgl::testing
