// Calls the installed op and compares it with linear(cat(x.unbind(0), -1)).
#include <ATen/ATen.h>
#include <fgl/gather_linear.h>

#include <cstdio>

int main() {
  const auto x = at::randn({3, 5, 16});
  const auto weight = at::randn({7, 48});
  const auto bias = at::randn({7});
  const auto out = fgl::gather_linear(x, weight, bias);
  const auto ref = at::linear(at::cat(x.unbind(0), -1), weight, bias);
  const bool ok = at::allclose(out, ref, 1e-5, 1e-5);
  std::printf("fgl_consumer: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
