// Uses the installed package the two documented ways: the op (fgl::ops)
// against linear(cat(x.unbind(0), -1)), and the README's "model from C++"
// (fgl::models: weights written, read back into GatherLinear, both
// forwards compared).
#include <ATen/ATen.h>
#include <fgl/gather_linear.h>
#include <torch/serialize.h>

#include <cstdio>
#include <string>

#include "fgl/models/gather_linear_module.h"
#include "fgl/models/weights.h"

int main(int argc, char** argv) {
  const auto x = at::randn({3, 5, 16});
  const auto weight = at::randn({7, 48});
  const auto bias = at::randn({7});
  const auto out = fgl::gather_linear(x, weight, bias);
  const auto ref = at::linear(at::cat(x.unbind(0), -1), weight, bias);
  bool ok = at::allclose(out, ref, 1e-5, 1e-5);

  // torch::save(GatherLinear) is one of the weight files read_weights takes.
  const std::string path = argc > 1 ? argv[1] : "fgl_consumer_weights.pt";
  fgl::models::GatherLinear saved(fgl::models::GatherLinearOptions(3, 16, 7));
  torch::save(saved, path);
  const auto weights = fgl::models::read_weights(path);
  fgl::models::GatherLinear model(fgl::models::options_for(weights, 3, 16));
  fgl::models::load_weights(*model, weights);
  ok = ok &&
       at::allclose(model->forward(x), model->forward_reference(x), 1e-5, 1e-5);

  std::printf("fgl_consumer: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
