// fgl_infer's command line: parsed and validated here, before any file is
// touched, so that a typo costs nothing.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>

#include "log.h"

namespace fgl::app {

/// 16 GiB: above any weights fgl_infer is meant for, below what would make a
/// damaged or hostile file exhaust the machine's memory.
constexpr int64_t kDefaultMaxInputBytes = int64_t{16} << 30;

struct InferOptions {
  std::string input;           // empty with weights: the built-in demo
  std::string weights;         // state_dict / torch::save(GatherLinear)
  std::string weights_prefix;  // empty: "weight", then "proj.weight"
  std::string model;           // TorchScript file or .pt2 (not --weights)
  std::string output;          // empty: results are not written
  int64_t batch_size = 0;      // rows per call along B; 0: whole batches
  bool check = true;
  std::optional<double> atol, rtol;      // empty: the dtype's defaults
  std::optional<c10::Device> device;     // empty: auto (cuda:0 if any)
  std::optional<c10::ScalarType> dtype;  // empty: auto (the input's)
  // > 0: the op split by heads over GPUs cuda:0 .. N-1, summed by NCCL
  // (--weights only); the reference runs on cuda:0.
  int tensor_parallel = 0;
  int warmup = 5;
  int iters = 0;  // > 0: benchmark mode
  bool json = false;
  log::Level log_level = log::Level::kInfo;
  // Larger --input/--weights files are refused before they are opened.
  int64_t max_input_bytes = kDefaultMaxInputBytes;
};

/// What the command line asks for.
struct Command {
  enum class Kind { kRun, kHelp, kVersion };
  Kind kind = Kind::kRun;
  std::string text;  // --help / --version text
  InferOptions options;
};

/// Parses argv; throws AppError (kExitUsage) saying what is wrong and how to
/// fix it.
Command parse_command_line(int argc, const char* const* argv);

/// "fgl_infer 0.1.0 (libtorch 2.11.0, ...)".
std::string version_text();

}  // namespace fgl::app
