// fgl_infer: runs the fused gather+linear op on the built-in demo problem and
// checks it against the cat + linear reference path.
#include <ATen/ATen.h>

#include <cstdio>

#include "fgl/gather_linear.h"

int main() {
  constexpr int64_t R = 4, B = 12, H = 32, K = 56;
  at::manual_seed(0);
  const auto x = at::randn({R, B, H});
  const auto weight = at::randn({K, R * H});
  const auto bias = at::randn({K});

  const auto fused = fgl::gather_linear(x, weight, bias);
  const auto reference = at::linear(at::cat(x.unbind(0), -1), weight, bias);
  const double max_abs_err = (fused - reference).abs().max().item<double>();
  const bool ok = at::allclose(fused, reference, 1e-4, 1e-4);
  std::printf(
      "demo R=%ld B=%ld H=%ld K=%ld: max |fused - reference| = %.3g: %s\n", R,
      B, H, K, max_abs_err, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
