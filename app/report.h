// What a run of fgl_infer found, and its two renderings: a table for people
// and one JSON object for programs (--json). Both go to stdout.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "latency_stats.h"

namespace fgl::app {

struct BatchResult {
  std::string name;
  int64_t rows = 0;  // B
  int64_t chunks = 0;
  // The fused op's route for the batch's chunks (one name, or each chunk's
  // in order where they differ); empty where a model or several GPUs ran.
  std::string route;
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t nonfinite = 0;  // NaN/inf elements of the fused result
  bool passed = true;
};

/// One rank of a --tensor-parallel run: mean time per call of its partial
/// product (x's shard moved to its GPU included) and of its all-reduce.
struct RankResult {
  int rank = 0;
  std::string device;
  double partial_us = 0;
  double all_reduce_us = 0;
  int64_t calls = 0;
};

/// Latency of one pass over every batch (fgl::timing::time_calls).
struct ForwardTiming {
  timing::LatencyStats latency;
  double rows_per_s = 0;  // at p50
};

struct InferReport {
  bool demo = false;
  std::string input, input_format, input_layout;
  std::string weights, weights_prefix;
  std::string model, model_format;  // --model; empty: the fused op
  std::string output;               // empty: not written
  std::string device, dtype;
  int64_t R = 0, H = 0, K = 0;
  std::optional<bool> bias;  // unknown for a model without weights
  int64_t batch_size = 0;
  int64_t rows = 0;
  bool checked = false;
  double atol = 0, rtol = 0;
  bool passed = true;
  std::vector<BatchResult> batches;
  int warmup = 0;
  int threads = 0;          // CPU threads of the op (benchmark mode on the CPU)
  int tensor_parallel = 0;  // GPUs the op ran on; 0: one device
  std::vector<RankResult> ranks;                  // --tensor-parallel only
  std::optional<ForwardTiming> fused, reference;  // benchmark mode only
  int exit_code = 0;
};

/// What went wrong with a failed check, and what to do next.
struct CheckFailure {
  std::string what, hint;
};
CheckFailure describe_check_failure(const InferReport& report);

void print_text(const InferReport& report, std::ostream& os);
void print_json(const InferReport& report, std::ostream& os);
/// {"exit_code": code, "error": ..., "hint": ...} for --json runs that fail.
void print_json_error(int code, const std::string& error,
                      const std::string& hint, std::ostream& os);

}  // namespace fgl::app
