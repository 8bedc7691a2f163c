#include "cases.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "torch_names.h"

namespace fgl::bench {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) {
    part.erase(
        std::remove_if(part.begin(), part.end(),
                       [](unsigned char ch) { return std::isspace(ch); }),
        part.end());
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

int64_t parse_size(const std::string& s, const std::string& entry) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || v < 1) {
    throw std::invalid_argument("--shapes entry \"" + entry +
                                "\": sizes must be positive integers, got \"" +
                                s + "\"");
  }
  return v;
}

}  // namespace

std::string shape_string(const Case& c) {
  return std::to_string(c.R) + "," + std::to_string(c.B) + "," +
         std::to_string(c.H) + "," + std::to_string(c.K);
}

std::vector<Case> parse_cases(const std::string& shapes,
                              const std::vector<c10::ScalarType>& dtypes) {
  std::vector<Case> cases;
  for (const auto& entry : split(shapes, ';')) {
    const auto sizes = split(entry, ',');
    if (sizes.size() != 4) {
      throw std::invalid_argument("--shapes entry \"" + entry +
                                  "\": expected R,B,H,K (4 sizes), got " +
                                  std::to_string(sizes.size()));
    }
    for (const auto dtype : dtypes) {
      cases.push_back({parse_size(sizes[0], entry), parse_size(sizes[1], entry),
                       parse_size(sizes[2], entry), parse_size(sizes[3], entry),
                       dtype});
    }
  }
  if (cases.empty()) {
    throw std::invalid_argument("--shapes \"" + shapes + "\" names no shape");
  }
  return cases;
}

std::vector<Case> random_cases(int count, uint64_t seed,
                               const std::vector<c10::ScalarType>& dtypes) {
  constexpr std::array<int64_t, 11> kHeads = {1,  2,  3,  4,  6, 8,
                                              12, 16, 24, 32, 64};
  constexpr std::array<int64_t, 9> kHeadSizes = {32, 33,  40,  64, 80,
                                                 96, 112, 128, 256};
  constexpr int64_t kMaxContraction = 16384;
  constexpr double kMaxRows = 256, kMinColumns = 8, kMaxColumns = 32768;
  // The generator's own bits, not std's distributions, whose results differ
  // between standard libraries.
  std::mt19937_64 bits(seed);
  const auto uniform = [&] { return (bits() >> 11) * 0x1.0p-53; };
  const auto pick = [&](const auto& values) {
    return values[bits() % values.size()];
  };
  const auto log_uniform = [&](double lo, double hi) {
    return static_cast<int64_t>(
        std::llround(std::exp(std::log(lo) + uniform() * std::log(hi / lo))));
  };
  std::vector<Case> cases;
  for (int drawn = 0; drawn < count;) {
    const int64_t R = pick(kHeads);
    const int64_t H = pick(kHeadSizes);
    if (R * H > kMaxContraction) continue;
    const int64_t B = log_uniform(1, kMaxRows);
    int64_t K = log_uniform(kMinColumns, kMaxColumns);
    if (bits() % 2 == 0) K = (K + 7) / 8 * 8;
    for (const auto dtype : dtypes) cases.push_back({R, B, H, K, dtype});
    ++drawn;
  }
  return cases;
}

std::vector<c10::ScalarType> parse_dtypes(const std::string& dtypes) {
  std::vector<c10::ScalarType> out;
  for (const auto& name : split(dtypes, ',')) {
    const auto dtype = cli::parse_dtype(name);
    if (!dtype) {
      throw std::invalid_argument("--dtypes: unknown dtype \"" + name +
                                  "\" (expected " + cli::kDtypeNames + ")");
    }
    out.push_back(*dtype);
  }
  if (out.empty()) {
    throw std::invalid_argument("--dtypes \"" + dtypes + "\" names no dtype");
  }
  return out;
}

std::vector<Case> default_cases(c10::DeviceType device) {
  using c10::kBFloat16;
  using c10::kFloat;
  using c10::kHalf;
  if (device == c10::DeviceType::CPU) {
    return {{4, 12, 32, 56, kFloat},
            {16, 64, 64, 1024, kFloat},
            {16, 64, 64, 1024, kBFloat16},
            {8, 512, 64, 512, kFloat}};
  }
  return {{4, 12, 32, 56, kFloat},
          {32, 16, 128, 4096, kFloat},
          {32, 16, 128, 4096, kBFloat16},
          {32, 1, 128, 4096, kFloat},  // B = 1: decode
          {32, 1, 128, 4096, kBFloat16},
          {32, 4096, 128, 4096, kFloat},
          {32, 4096, 128, 4096, kBFloat16},
          {8, 65536, 64, 512, kBFloat16},
          {7, 33, 33, 1000, kFloat},  // sizes that tile nothing evenly
          {5, 300, 17, 130, kHalf}};
}

Floor roofline(const Case& c, bool tf32) {
  const double elem = static_cast<double>(c10::elementSize(c.dtype));
  const double R = c.R, B = c.B, H = c.H, K = c.K;
  Floor f;
  f.bytes = elem * (R * B * H + K * R * H + (c.bias ? K : 0) + B * K);
  f.flops = 2.0 * B * K * R * H;
  double peak = kFp32SimtFlopsPerS;
  if (c.dtype == c10::kFloat && tf32) peak = kTf32FlopsPerS;
  if (c.dtype == c10::kHalf || c.dtype == c10::kBFloat16) peak = kHalfFlopsPerS;
  if (c.dtype == c10::kDouble) peak = kFp64FlopsPerS;
  f.bytes_us = f.bytes / kCopyBytesPerS * 1e6;
  f.flops_us = f.flops / peak * 1e6;
  f.floor_us = std::max({f.bytes_us, f.flops_us, kLaunchFloorUs});
  return f;
}

}  // namespace fgl::bench
