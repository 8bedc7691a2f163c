// The whole fgl_infer run behind main: load x and the weights (or make the
// demo problem), batch, run the fused and reference forwards, check, time and
// write the results.
#pragma once

#include "options.h"
#include "problem.h"
#include "report.h"

namespace fgl::app {

/// Runs `options`. Throws AppError with the exit code and a hint for every
/// failure the user can fix; a failed check is not an error but
/// report.exit_code == kExitCheckFailed (and no output is written).
InferReport run_inference(const InferOptions& options);

}  // namespace fgl::app
