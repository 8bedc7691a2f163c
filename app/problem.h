// What fgl_infer runs on: x's batches and the linear layer's weights, read
// from the user's files (checked against --max-input-bytes) or made up for
// the built-in demo.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>

#include "fgl/io/tensor_file.h"
#include "fgl/models/weights.h"
#include "options.h"
#include "progress.h"

namespace fgl::app {

/// The built-in problem a bare `fgl_infer` runs: the seed shape, fixed seed.
struct DemoShape {
  static constexpr int64_t R = 4, B = 12, H = 32, K = 56;
  static constexpr uint64_t seed = 0;
};

struct Problem {
  io::TensorFile input;
  models::LinearWeights weights;  // empty with --model: it brings its own
};

/// The demo: x (R, B, H) and a GatherLinear's weights from DemoShape.
Problem demo_problem();

/// --input, and --weights unless a --model brings them.
Problem load_problem(const InferOptions& options);

/// Every batch is (R, B, H) with the first batch's R and H.
void check_batches(const io::TensorFile& input);

/// --dtype, or (auto, empty) batch `batch`'s own, which must be floating.
c10::ScalarType resolve_dtype(const std::optional<c10::ScalarType>& requested,
                              const at::Tensor& x, const std::string& batch);

/// Shows the progress of long file reads while it lives (progress.h).
class ShowingReadProgress {
 public:
  ShowingReadProgress();
  ~ShowingReadProgress();
  ShowingReadProgress(const ShowingReadProgress&) = delete;
  ShowingReadProgress& operator=(const ShowingReadProgress&) = delete;

 private:
  ReadProgress progress_;
};

}  // namespace fgl::app
