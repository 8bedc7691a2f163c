// fgl_make_fixtures DIR: writes the C++-made files the fgl_infer end-to-end
// tests run on, all with torch::save (fresh random values each run):
//   cpp_tensor.pt  one x (3, 5, 7)
//   cpp_list.pt    std::vector of two x (3, 5, 7) and (3, 4, 7)
//   cpp_module.pt  a GatherLinear(R=3, H=7, K=11) module
#include <torch/serialize.h>
#include <torch/utils.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "fgl/models/gather_linear_module.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fgl_make_fixtures DIR\n";
    return 64;
  }
  const std::string dir = argv[1];
  torch::manual_seed(std::random_device{}());
  torch::save(torch::randn({3, 5, 7}), dir + "/cpp_tensor.pt");
  torch::save(std::vector<torch::Tensor>{torch::randn({3, 5, 7}),
                                         torch::randn({3, 4, 7})},
              dir + "/cpp_list.pt");
  fgl::models::GatherLinear model(3, 7, 11);
  torch::save(model, dir + "/cpp_module.pt");
  return 0;
}
