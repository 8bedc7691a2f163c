// Measures one case: latency of every computation (CUDA-graph replays on a GPU,
// steady-clock calls in turns on the CPU) and accuracy against a float64
// reference.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "cases.h"
#include "computations.h"
#include "latency.h"

namespace fgl::bench {

struct RunConfig {
  int warmup = 5;                // untimed replays (GPU) or calls (CPU)
  int replays = 50;              // timed replays (GPU) or calls (CPU)
  int64_t calls_per_graph = 20;  // least calls captured into one graph
  // Operand copies rotate until they add up to this many bytes, so the GPU's
  // 50 MB L2 cannot serve the next call from the last one's reads.
  int64_t rotate_bytes = int64_t{200} << 20;
  int64_t max_copies = 4096;
  bool tf32 = false;  // TF32 allowed for cuBLAS (affects the floor)
  // Only the fused op runs (its error still checked against float64), so
  // that a profiler or sanitizer sees no kernel but fgl's.
  bool fgl_only = false;
};

struct CaseResult {
  Case c;
  Floor floor;
  std::array<timing::LatencyStats, kComputations.size()>
      latency;                                           // kComputations order
  std::array<double, kComputations.size()> rel_error{};  // kComputations order
  std::string route;            // fgl's route (fgl::gather_linear_route)
  bool fgl_only = false;        // the other computations did not run
  int64_t copies = 1;           // operand sets rotated through
  int64_t calls_per_graph = 0;  // 0 on the CPU
  // The CPU's calls timed in turns: cat + Linear's time over fgl's, the
  // median over rounds (timing::median_ratio). NaN on a GPU, whose
  // computations are timed one graph after another.
  double paired_speedup = std::numeric_limits<double>::quiet_NaN();
};

/// Times and checks every computation of `c` on `device` (CPU or an indexed
/// CUDA device). Throws c10::Error when one fails.
CaseResult run_case(const Case& c, const c10::Device& device,
                    const RunConfig& config);

}  // namespace fgl::bench
