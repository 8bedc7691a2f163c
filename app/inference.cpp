#include "inference.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <sstream>
#include <string>

#include "check.h"
#include "errors.h"
#include "fail.h"
#include "fgl/io/tensor_file.h"
#include "latency.h"
#include "log.h"
#include "model_runner.h"
#include "preflight.h"
#include "progress.h"

namespace fgl::app {
namespace {

using io::TensorFile;

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

// Adds a chunk's route to its batch's: each route once, in the order the
// chunks took them ("stream", or "stream,warp-mma" where the last chunk's
// fewer rows route elsewhere).
void add_route(std::string& routes, const std::string& route) {
  std::istringstream names(routes);
  for (std::string name; std::getline(names, name, ',');) {
    if (name == route) return;
  }
  routes += (routes.empty() ? "" : ",") + route;
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
      // Each chunk asked (outside the timed passes): chunks of as many rows
      // can still route apart, a chunk's base alignment deciding whether
      // the copy engine can read it.
      if (model.route) add_route(batch.route, model.route(x));
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
  if (model.tensor_parallel) model.tensor_parallel->reset_rank_times();
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
  const auto gpus = o.tensor_parallel > 0
                        ? tensor_parallel_devices(o.tensor_parallel)
                        : std::vector<c10::Device>{};
  const c10::Device device = gpus.empty() ? resolve_device(o.device) : gpus[0];
  const bool demo = o.input.empty();
  const Problem problem = demo ? demo_problem() : load_problem(o);
  const TensorFile& input = problem.input;
  check_batches(input);

  const int64_t R = input.tensors[0].size(0), H = input.tensors[0].size(2);
  const auto requested =
      resolve_dtype(o.dtype, input.tensors[0], input.names[0]);
  ModelForwards model =
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
  if (!gpus.empty()) {
    if (R < o.tensor_parallel) {
      throw AppError(
          kExitDataErr,
          "x has R = " + std::to_string(R) + " heads, too few to split over " +
              std::to_string(o.tensor_parallel) +
              " GPUs (each takes at least one)",
          "pass --tensor-parallel " + std::to_string(R) + " or fewer");
    }
    log::info("splitting the op over " + std::to_string(gpus.size()) + " GPUs");
    or_fail(kExitUnavailable,
            "cannot run the op over " + std::to_string(gpus.size()) + " GPUs",
            "check the GPUs (nvidia-smi); NCCL_DEBUG=INFO says why NCCL "
            "failed",
            [&] {
              split_over_gpus(model, problem.weights, H, gpus);
              return 0;
            });
  }
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
  report.device = device.str();
  report.dtype = c10::getDtypeNames(dtype).first;
  report.R = R;
  report.H = H;
  report.K = model.K;
  report.bias = model.bias;
  report.batch_size = o.batch_size;
  report.tensor_parallel = static_cast<int>(gpus.size());
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

  if (model.tensor_parallel) {
    for (const auto& t : model.tensor_parallel->rank_times()) {
      report.ranks.push_back(RankResult{t.rank, t.device.str(), t.partial_us,
                                        t.all_reduce_us, t.calls});
    }
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
