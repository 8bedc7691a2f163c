#include "problem.h"

#include <ATen/ATen.h>

#include <sstream>

#include "errors.h"
#include "fail.h"
#include "fgl/io/input_file.h"
#include "fgl/models/gather_linear_module.h"
#include "log.h"
#include "preflight.h"

namespace fgl::app {
namespace {

using io::TensorFile;
using models::GatherLinear;
using models::LinearWeights;

template <typename T>
std::string str(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

// --max-input-bytes bounds what the files make the run hold, not only what
// they store: an expanded view (stride 0) of a few stored bytes stands for
// as many bytes as its shape says once the run materialises it.
void require_within_limit(const std::string& what, at::IntArrayRef sizes,
                          c10::ScalarType dtype, int64_t max_bytes) {
  int64_t bytes = c10::elementSize(dtype);
  bool overflow = false;
  for (const int64_t d : sizes) {
    overflow = overflow || __builtin_mul_overflow(bytes, d, &bytes);
  }
  if (overflow || bytes > max_bytes) {
    throw AppError(
        kExitDataErr,
        what + " " + str(sizes) + " " + c10::toString(dtype) + " takes " +
            (overflow ? std::string("more than 2^63") : std::to_string(bytes)) +
            " bytes once materialised, more than the limit of " +
            std::to_string(max_bytes),
        "raise --max-input-bytes if the data is meant to be this "
        "large");
  }
}

void require_problem_within_limit(const Problem& p, int64_t max_bytes) {
  int64_t rows = 0;
  for (size_t i = 0; i < p.input.tensors.size(); ++i) {
    const auto& x = p.input.tensors[i];
    require_within_limit("input batch '" + p.input.names[i] + "'", x.sizes(),
                         x.scalar_type(), max_bytes);
    rows += x.dim() == 3 ? x.size(1) : 0;
  }
  if (!p.weights.weight.defined()) return;  // a model: its own weights
  const auto& w = p.weights.weight;
  require_within_limit("weight", w.sizes(), w.scalar_type(), max_bytes);
  require_within_limit("the results", {rows, w.size(0)}, w.scalar_type(),
                       max_bytes);
}

}  // namespace

ShowingReadProgress::ShowingReadProgress() {
  io::set_read_observer(
      [this](const std::string& path, uint64_t read, uint64_t size) {
        progress_.update(path, read, size);
      });
}

ShowingReadProgress::~ShowingReadProgress() { io::set_read_observer(nullptr); }

Problem demo_problem() {
  at::manual_seed(DemoShape::seed);
  using D = DemoShape;
  GatherLinear demo(D::R, D::H, D::K);
  Problem p;
  p.input.layout = io::Layout::kTensor;
  p.input.names = {"demo"};
  p.input.tensors = {at::randn({D::R, D::B, D::H})};
  p.weights = LinearWeights{
      demo->proj->weight.detach(), demo->proj->bias.detach(), "", {}};
  return p;
}

Problem load_problem(const InferOptions& o) {
  require_readable_file(o.input, "input", o.max_input_bytes);
  if (!o.model.empty()) {
    require_readable_file(o.model, "model", o.max_input_bytes);
  } else {
    require_readable_file(o.weights, "weights", o.max_input_bytes);
  }
  Problem p;
  p.input =
      or_fail(kExitDataErr, "cannot read input " + o.input,
              "--input must be a torch.save / torch::save / TorchScript "
              "/ safetensors file holding a tensor (R, B, H), or a "
              "list, tuple or dict of them",
              [&] {
                const ShowingReadProgress shown;
                return io::read_tensor_file(o.input, false, o.max_input_bytes);
              });
  for (const auto& entry : p.input.skipped) {
    log::debug("input entry " + entry + " skipped");
  }
  log::info("read " + std::to_string(p.input.tensors.size()) +
            " batch(es) from " + o.input + " (" +
            io::to_string(p.input.format) + ", " +
            io::to_string(p.input.layout) + ")");
  if (!o.model.empty()) {
    require_problem_within_limit(p, o.max_input_bytes);
    return p;  // the model brings its weights
  }
  p.weights = or_fail(
      kExitDataErr, "cannot read weights " + o.weights,
      "--weights must hold an nn.Linear(R*H, K) state_dict (weight, bias), "
      "a bigger state_dict with --weights-prefix, a C++ "
      "torch::save(GatherLinear), or a safetensors file with those keys",
      [&] {
        const ShowingReadProgress shown;
        return models::read_weights(o.weights, o.weights_prefix,
                                    o.max_input_bytes);
      });
  for (const auto& entry : p.weights.skipped) {
    log::debug("weights entry " + entry + " skipped");
  }
  log::info("weights " + p.weights.prefix + "weight " +
            str(p.weights.weight.sizes()) +
            (p.weights.bias ? " with bias" : " without bias") + " from " +
            o.weights);
  require_problem_within_limit(p, o.max_input_bytes);
  return p;
}

// Every batch must be (R, B, H) with the first batch's R and H.
void check_batches(const TensorFile& input) {
  const auto& first = input.tensors[0];
  for (size_t i = 0; i < input.tensors.size(); ++i) {
    const auto& x = input.tensors[i];
    if (x.dim() != 3) {
      throw AppError(kExitDataErr,
                     "input batch '" + input.names[i] +
                         "' must be 3-D (R, B, H), got shape " + str(x.sizes()),
                     "if it is already concatenated as (B, R*H), use "
                     "x.view(B, R, H).transpose(0, 1) before saving");
    }
    if (x.size(0) != first.size(0) || x.size(2) != first.size(2)) {
      throw AppError(kExitDataErr,
                     "input batch '" + input.names[i] + "' has shape " +
                         str(x.sizes()) + " but batch '" + input.names[0] +
                         "' has R=" + std::to_string(first.size(0)) +
                         " H=" + std::to_string(first.size(2)) +
                         "; every batch must share R and H",
                     "run batches of different shapes in separate calls");
    }
  }
}

c10::ScalarType resolve_dtype(const std::optional<c10::ScalarType>& requested,
                              const at::Tensor& x, const std::string& batch) {
  if (requested) return *requested;
  if (!at::isFloatingType(x.scalar_type())) {
    throw AppError(kExitDataErr,
                   "input batch '" + batch + "' holds " + str(x.scalar_type()) +
                       " values, not floating point",
                   "pass --dtype float32 (or another float type) to convert");
  }
  return x.scalar_type();
}

}  // namespace fgl::app
