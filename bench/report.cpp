#include "report.h"

#include <cmath>
#include <limits>

namespace fgl::bench {
namespace {

// Units per microsecond: bytes/us * 1e-6 = TB/s, flops/us * 1e-6 = TFLOP/s.
double per_us_to_tera(double amount, double us) {
  return us > 0 ? amount / us * 1e-6 : std::numeric_limits<double>::quiet_NaN();
}

double speedup(const CaseResult& r) {
  const double fused = r.latency[kFusedIndex].p50_us;
  return fused > 0 ? r.latency[kCatIndex].p50_us / fused
                   : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

void print_table_header(std::FILE* out) {
  std::fprintf(out,
               "%-18s %-8s %9s %10s %19s %11s %11s %8s %8s %8s %8s %8s %8s\n",
               "shape (R,B,H,K)", "dtype", "floor us", "fgl us",
               "fgl p10-p90 us", "cat+lin us", "perm+lin us", "speedup",
               "paired", "fgl TB/s", "fgl TF/s", "err fgl", "err cat");
}

void print_table_row(std::FILE* out, const CaseResult& r, const RunInfo& info) {
  char floor[32] = "-";
  if (info.has_floor) {
    std::snprintf(floor, sizeof floor, "%.2f", r.floor.floor_us);
  }
  char paired[32] = "-";
  if (!std::isnan(r.paired_speedup)) {
    std::snprintf(paired, sizeof paired, "%.2fx", r.paired_speedup);
  }
  char spread[48];
  std::snprintf(spread, sizeof spread, "%.2f-%.2f",
                r.latency[kFusedIndex].p10_us, r.latency[kFusedIndex].p90_us);
  const double fused_us = r.latency[kFusedIndex].p50_us;
  std::fprintf(
      out,
      "%-18s %-8s %9s %10.2f %19s %11.2f %11.2f %7.2fx %8s %8.3f %8.3f "
      "%8.1e %8.1e\n",
      shape_string(r.c).c_str(), c10::getDtypeNames(r.c.dtype).first.c_str(),
      floor, fused_us, spread, r.latency[kCatIndex].p50_us,
      r.latency[kPermuteIndex].p50_us, speedup(r), paired,
      per_us_to_tera(r.floor.bytes, fused_us),
      per_us_to_tera(r.floor.flops, fused_us), r.rel_error[kFusedIndex],
      r.rel_error[kCatIndex]);
  std::fflush(out);
}

nlohmann::json case_record(const CaseResult& r, const RunInfo& info) {
  nlohmann::json j;
  j["device"] = info.device;
  j["device_name"] = info.device_name;
  j["timing"] = info.timing;
  j["tf32"] = info.tf32;
  j["R"] = r.c.R;
  j["B"] = r.c.B;
  j["H"] = r.c.H;
  j["K"] = r.c.K;
  j["shape"] = shape_string(r.c);
  j["dtype"] = c10::getDtypeNames(r.c.dtype).first;
  j["bytes"] = r.floor.bytes;
  j["flops"] = r.floor.flops;
  if (info.has_floor) {
    j["bytes_floor_us"] = r.floor.bytes_us;
    j["flops_floor_us"] = r.floor.flops_us;
    j["floor_us"] = r.floor.floor_us;
  } else {
    j["bytes_floor_us"] = nullptr;
    j["flops_floor_us"] = nullptr;
    j["floor_us"] = nullptr;
  }
  for (size_t p = 0; p < kComputations.size(); ++p) {
    const std::string name = computation_name(kComputations[p]);
    const timing::LatencyStats& s = r.latency[p];
    j[name + "_us"] = s.p50_us;
    j[name + "_p10_us"] = s.p10_us;
    j[name + "_p90_us"] = s.p90_us;
    j[name + "_rel_err"] = r.rel_error[p];
  }
  j["samples"] = r.latency[kFusedIndex].samples;
  j["speedup"] = speedup(r);
  if (std::isnan(r.paired_speedup)) {
    j["speedup_paired"] = nullptr;
  } else {
    j["speedup_paired"] = r.paired_speedup;
  }
  j["fgl_tbps"] = per_us_to_tera(r.floor.bytes, r.latency[kFusedIndex].p50_us);
  j["fgl_tflops"] =
      per_us_to_tera(r.floor.flops, r.latency[kFusedIndex].p50_us);
  j["copies"] = r.copies;
  j["calls_per_graph"] = r.calls_per_graph;
  return j;
}

}  // namespace fgl::bench
