// fgl_bench's command line.
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <vector>

#include "cases.h"
#include "cpu/cpu_route.h"
#include "cuda/kernel_choice.h"
#include "runner.h"

namespace fgl::bench {

struct Options {
  c10::Device device{c10::kCPU};
  std::vector<Case> cases;
  RunConfig run;
  std::string json_path;  // empty: no JSON
  bool quick = false;
  bool list = false;  // print the cases and exit
  bool allow_tf32 = false;
  // The forced route of --device's backend; nullopt: the policy's.
  std::optional<cuda::Route> route;
  std::optional<cpu::Route> cpu_route;
  bool help = false;
  std::string usage;
};

/// Parses argv. Throws std::invalid_argument with a message naming the bad
/// option. Only asks whether CUDA is present when the device is CUDA or not
/// given, so `--device cpu` never touches CUDA.
Options parse_options(int argc, const char* const* argv);

}  // namespace fgl::bench
