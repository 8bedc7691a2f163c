// The whole fgl_infer run behind main: load x and the weights (or make the
// demo problem), batch, run the fused and reference forwards, check, time and
// write the results.
#pragma once

#include "options.h"
#include "report.h"

namespace fgl::app {

/// The built-in problem a bare `fgl_infer` runs: the seed shape, fixed seed.
struct DemoShape {
  static constexpr int64_t R = 4, B = 12, H = 32, K = 56;
  static constexpr uint64_t seed = 0;
};

/// Runs `options`. Throws AppError with the exit code and a hint for every
/// failure the user can fix; a failed check is not an error but
/// report.exit_code == kExitCheckFailed (and no output is written).
InferReport run_inference(const InferOptions& options);

}  // namespace fgl::app
