#include "latency_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace fgl::timing {

LatencyStats summarize(std::vector<double> samples_us) {
  LatencyStats s;
  s.samples = static_cast<int64_t>(samples_us.size());
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  const auto rank = [&](double q) {
    const auto i = static_cast<size_t>(
        std::ceil(q * static_cast<double>(samples_us.size())) - 1);
    return samples_us[std::min(i, samples_us.size() - 1)];
  };
  s.min_us = samples_us.front();
  s.p10_us = rank(0.10);
  s.p50_us = rank(0.50);
  s.p90_us = rank(0.90);
  s.p99_us = rank(0.99);
  s.mean_us = std::accumulate(samples_us.begin(), samples_us.end(), 0.0) /
              static_cast<double>(samples_us.size());
  return s;
}

double spread(const LatencyStats& s) {
  return s.p50_us > 0 ? (s.p90_us - s.p10_us) / s.p50_us : 0;
}

double median_ratio(const std::vector<double>& numerators,
                    const std::vector<double>& denominators) {
  std::vector<double> ratios;
  const size_t n = std::min(numerators.size(), denominators.size());
  for (size_t i = 0; i < n; ++i) {
    if (denominators[i] > 0) ratios.push_back(numerators[i] / denominators[i]);
  }
  return ratios.empty() ? std::numeric_limits<double>::quiet_NaN()
                        : summarize(std::move(ratios)).p50_us;
}

}  // namespace fgl::timing
