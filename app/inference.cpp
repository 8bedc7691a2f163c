#include "inference.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>
#include <unistd.h>

#include <sstream>
#include <utility>

#include "check.h"
#include "errors.h"
#include "fail.h"
#include "fgl/io/input_file.h"
#include "fgl/io/paths.h"
#include "fgl/io/tensor_file.h"
#include "fgl/models/gather_linear_module.h"
#include "fgl/models/weights.h"
#include "latency.h"
#include "log.h"
#include "model_runner.h"
#include "progress.h"

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

void require_readable_file(const std::string& path, const char* what,
                           int64_t max_bytes) {
  if (!io::path_exists(path)) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " does not exist",
                   "check the path; fgl_infer --help lists what it reads");
  }
  if (io::is_directory(path)) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is a directory",
                   "pass the tensor file inside it, not the directory");
  }
  if (!io::is_regular_file(path)) {
    // A FIFO or a device would block or never end.
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is not a regular file",
                   "pass a tensor file, not a pipe, socket or device");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw AppError(kExitNoInput,
                   std::string(what) + " " + path + " is not readable",
                   "check the file's permissions");
  }
  const int64_t size = io::file_size(path);
  if (size > max_bytes) {
    throw AppError(
        kExitDataErr,
        std::string(what) + " " + path + " has " + std::to_string(size) +
            " bytes, more than the limit of " + std::to_string(max_bytes),
        "raise --max-input-bytes if the file is meant to be this "
        "large");
  }
}

// Fails before any work when the output can obviously not be created, or
// would replace something that is not a results file: a link, device node
// or FIFO, or one of the run's own input files.
void require_creatable_output(const InferOptions& o) {
  const std::string& path = o.output;
  const std::string dir = io::parent_directory(path);
  const std::string hint =
      "choose an --output path in an existing, writable directory";
  if (io::is_directory(path)) {
    throw AppError(kExitCantCreate, "output " + path + " is a directory",
                   "give a file name, e.g. --output " + path + "/y.pt");
  }
  if (io::is_special_file(path)) {
    throw AppError(kExitCantCreate,
                   "output " + path +
                       " exists and is not a regular file (a link, device "
                       "node, FIFO or socket)",
                   "give a new file name or a regular file to replace");
  }
  for (const auto& [option, input] :
       {std::pair{"--input", &o.input}, std::pair{"--weights", &o.weights},
        std::pair{"--model", &o.model}}) {
    if (!input->empty() && io::same_file(path, *input)) {
      throw AppError(
          kExitUsage,
          "--output " + path + " is the same file as " + option + " " + *input,
          "write the results to another file");
    }
  }
  if (!io::is_directory(dir)) {
    throw AppError(kExitCantCreate,
                   "cannot create output " + path + ": " + dir +
                       " is not an existing directory",
                   hint);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw AppError(kExitCantCreate,
                   "cannot create output " + path + ": directory " + dir +
                       " is not writable",
                   hint);
  }
}

c10::Device resolve_device(const std::string& name) {
  const int64_t gpus = at::hasCUDA() ? at::getNumGPUs() : 0;
  if (name == "auto") {
    return gpus > 0 ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  }
  const auto device =
      or_fail(kExitUsage, "--device " + name + " is not a device name",
              "use auto, cpu, cuda or cuda:N",
              [&] { return c10::Device(name == "cuda" ? "cuda:0" : name); });
  if (device.is_cuda() && device.index() >= gpus) {
    throw AppError(kExitUnavailable,
                   "--device " + name + " requested but this machine has " +
                       (gpus == 0 ? "no usable CUDA GPU"
                                  : std::to_string(gpus) + " GPU(s)"),
                   gpus == 0 ? "use --device cpu (or auto)"
                             : "use --device cuda:0 .. cuda:" +
                                   std::to_string(gpus - 1) + " or auto");
  }
  return device;
}

c10::ScalarType resolve_dtype(const std::string& name, const at::Tensor& x,
                              const std::string& batch) {
  if (name == "float32") return at::kFloat;
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float64") return at::kDouble;
  if (!at::isFloatingType(x.scalar_type())) {
    throw AppError(kExitDataErr,
                   "input batch '" + batch + "' holds " + str(x.scalar_type()) +
                       " values, not floating point",
                   "pass --dtype float32 (or another float type) to convert");
  }
  return x.scalar_type();
}

struct Problem {
  TensorFile input;
  LinearWeights weights;
};

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

// Shows the progress of long file reads while it lives (progress.h).
class ShowingReadProgress {
 public:
  ShowingReadProgress() {
    io::set_read_observer(
        [this](const std::string& path, uint64_t read, uint64_t size) {
          progress_.update(path, read, size);
        });
  }
  ~ShowingReadProgress() { io::set_read_observer(nullptr); }

 private:
  ReadProgress progress_;
};

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

fgl::app::ForwardTiming to_timing(const timing::LatencyStats& s, int64_t rows) {
  ForwardTiming t;
  t.latency = s;
  t.rows_per_s = s.p50_us > 0 ? rows / (s.p50_us * 1e-6) : 0;
  return t;
}

// Every batch split along B into calls of at most `batch_size` rows, on the
// device in the run's dtype: made once, so that timing sees only the op.
using Chunks = std::vector<std::vector<at::Tensor>>;

Chunks make_chunks(const TensorFile& input, const c10::Device& device,
                   c10::ScalarType dtype, int64_t batch_size) {
  Chunks chunks;
  for (const auto& tensor : input.tensors) {
    const auto x = tensor.to(device, dtype);
    chunks.push_back(batch_size > 0 && x.size(1) > batch_size
                         ? x.split(batch_size, /*dim=*/1)
                         : std::vector<at::Tensor>{x});
  }
  return chunks;
}

// Runs every chunk through the fused forward, checked against the reference
// forward when `check`; returns each batch's result with its rows joined again.
std::vector<at::Tensor> run_batches(const ModelForwards& model,
                                    const Chunks& chunks,
                                    const std::vector<std::string>& names,
                                    bool check, const Tolerance& tolerance,
                                    InferReport& report) {
  int64_t calls = 0;
  for (const auto& batch : chunks) {
    calls += static_cast<int64_t>(batch.size());
  }
  log::debug("running " + std::to_string(calls) + " call(s) on " +
             report.device);
  Progress progress("fgl_infer", calls);
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < chunks.size(); ++i) {
    BatchResult batch;
    batch.name = names[i];
    ErrorStats errors;
    std::vector<at::Tensor> outs;
    for (const auto& x : chunks[i]) {
      outs.push_back(model.run(x));
      if (check) {
        errors.merge(compare(outs.back(), model.reference(x), tolerance));
      }
      batch.rows += x.size(1);
      ++batch.chunks;
      progress.step(batch.name);
    }
    batch.max_abs_err = errors.max_abs_err;
    batch.max_rel_err = errors.max_rel_err;
    batch.nonfinite = errors.nonfinite;
    batch.passed = errors.passed;
    report.rows += batch.rows;
    report.passed = report.passed && batch.passed;
    report.batches.push_back(batch);
    results.push_back(outs.size() == 1 ? outs[0] : at::cat(outs, 0));
  }
  return results;
}

// Latency of one pass over all chunks, for each forward.
void benchmark(const ModelForwards& model, const Chunks& chunks,
               const c10::Device& device, int warmup, int iters,
               InferReport& report) {
  log::info("timing " + std::to_string(iters) +
            " passes of each forward after " + std::to_string(warmup) +
            " warm-up passes");
  auto time_forward = [&](bool fused) {
    Progress progress(fused ? "timing fused" : "timing reference",
                      warmup + iters);
    const auto stats = timing::time_calls(
        [&] {
          for (const auto& batch : chunks) {
            for (const auto& x : batch) {
              fused ? model.run(x) : model.reference(x);
            }
          }
        },
        device, warmup, iters,
        [&](int calls) { progress.step(calls <= warmup ? "warm-up" : ""); });
    return to_timing(stats, report.rows);
  };
  report.warmup = warmup;
  report.threads = device.is_cpu() ? at::get_num_threads() : 0;
  report.fused = time_forward(true);
  if (model.reference) {
    report.reference = time_forward(false);
  }
}

}  // namespace

InferReport run_inference(const InferOptions& o) {
  c10::InferenceMode inference_mode;
  if (!o.output.empty()) {
    require_creatable_output(o);
  }
  const c10::Device device = resolve_device(o.device);
  const bool demo = o.input.empty();
  const Problem problem = demo ? demo_problem() : load_problem(o);
  const TensorFile& input = problem.input;
  check_batches(input);

  const int64_t R = input.tensors[0].size(0), H = input.tensors[0].size(2);
  const auto requested =
      resolve_dtype(o.dtype, input.tensors[0], input.names[0]);
  const ModelForwards model =
      !o.model.empty()
          ? [&] {
              const ShowingReadProgress shown;
              return load_model(o, device, requested, R, H);
            }()
          : or_fail(kExitDataErr,
                    "input " + o.input + " does not fit weights " + o.weights,
                    "x must be (R, B, H) and the weight (K, R*H); check that "
                    "both files come from the same layer",
                    [&] {
                      return weights_forwards(problem.weights, R, H, device,
                                              requested);
                    });
  const auto dtype = model.dtype;

  InferReport report;
  report.demo = demo;
  report.input = o.input;
  report.input_format = demo ? "demo" : to_string(input.format);
  report.input_layout = to_string(input.layout);
  report.weights = o.weights;
  report.weights_prefix = problem.weights.prefix;
  report.model = o.model;
  report.model_format = model.format;
  report.device = str(device);
  report.dtype = c10::getDtypeNames(dtype).first;
  report.R = R;
  report.H = H;
  report.K = model.K;
  report.bias = model.bias;
  report.batch_size = o.batch_size;
  report.checked = o.check;
  const Tolerance defaults = default_tolerance(dtype);
  const Tolerance tolerance{o.atol.value_or(defaults.atol),
                            o.rtol.value_or(defaults.rtol)};
  report.atol = tolerance.atol;
  report.rtol = tolerance.rtol;

  const Chunks chunks = make_chunks(input, device, dtype, o.batch_size);
  const auto results =
      run_batches(model, chunks, input.names, o.check, tolerance, report);
  // A model that exposes no weights tells K by its output.
  if (report.K == 0 && !results.empty() && results.front().dim() == 2) {
    report.K = results.front().size(1);
  }
  if (o.iters > 0) {
    benchmark(model, chunks, device, o.warmup, o.iters, report);
  }

  if (!report.passed) {
    report.exit_code = kExitCheckFailed;
    if (!o.output.empty()) {
      log::warn("not writing " + o.output + ": the check failed");
    }
    return report;
  }
  if (!o.output.empty()) {
    or_fail(kExitCantCreate, "cannot write output " + o.output,
            "choose an --output path in a writable directory with free "
            "space",
            [&] {
              io::write_tensor_file(o.output, input.layout, input.names,
                                    results);
              return 0;
            });
    report.output = o.output;
  }
  return report;
}

}  // namespace fgl::app
