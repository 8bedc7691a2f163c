// The benchmark's problem list and its roofline floors: which shapes and
// dtypes are measured, and the least time the H200 could take for each.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fgl::bench {

/// One problem: x [R, B, H], weight [K, R*H], bias [K] or none, out [B, K].
struct Case {
  int64_t R = 0, B = 0, H = 0, K = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool bias = true;
};

/// "R,B,H,K" (shapes only, no dtype).
std::string shape_string(const Case& c);

/// Parses "R,B,H,K;R,B,H,K" into one case per shape and dtype (shape-major).
/// Throws std::invalid_argument naming the offending entry.
std::vector<Case> parse_cases(const std::string& shapes,
                              const std::vector<c10::ScalarType>& dtypes);

/// Parses "float32,bfloat16,..." (also fp32/bf16/fp16/fp64, float, half,
/// double). Throws std::invalid_argument on an unknown name.
std::vector<c10::ScalarType> parse_dtypes(const std::string& dtypes);

/// `count` shapes drawn over the ranges the decode sweep checks between its
/// table's points: R*H of 32 to 16384 from heads of common and odd sizes
/// (32 to 256: 33, 40, 80, 96, 112 among them), B of 1 to 256 and K of 8 to
/// 32768 log-uniform, half of the K multiples of 8. The same `seed` draws
/// the same shapes on every machine. One case per shape and dtype.
std::vector<Case> random_cases(int count, uint64_t seed,
                               const std::vector<c10::ScalarType>& dtypes);

/// The built-in case list: H200-sized problems for CUDA, smaller ones for
/// the CPU (large GEMMs take seconds on a few cores).
std::vector<Case> default_cases(c10::DeviceType device);

/// Ceilings measured on the H200 (see bench/NOTES.md).
inline constexpr double kCopyBytesPerS = 4.23e12;
inline constexpr double kFp32SimtFlopsPerS = 51e12;
inline constexpr double kTf32FlopsPerS = 396e12;
inline constexpr double kHalfFlopsPerS = 765e12;  // bf16 and fp16
inline constexpr double kFp64FlopsPerS = 67e12;   // datasheet, not measured
inline constexpr double kLaunchFloorUs = 1.15;    // empty-kernel launch

/// Work of one call and the least time it can take on the H200.
struct Floor {
  double bytes = 0;     // x + weight + bias read once, out written once
  double flops = 0;     // 2 * B * K * R * H
  double bytes_us = 0;  // bytes / copy bandwidth
  double flops_us = 0;  // flops / peak rate of the dtype
  double floor_us = 0;  // max(bytes_us, flops_us, launch floor)
};

/// The roofline floor of `c`; float32 uses the TF32 rate when `tf32`.
Floor roofline(const Case& c, bool tf32);

}  // namespace fgl::bench
