#include "report.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace fgl::bench {
namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// Units per microsecond: bytes/us * 1e-6 = TB/s, flops/us * 1e-6 = TFLOP/s.
double per_us_to_tera(double amount, double us) {
  return us > 0 ? amount / us * 1e-6 : kNotMeasured;
}

// A computation's median us; NaN where it did not run (--fgl-only).
double median_us(const CaseResult& r, size_t p) {
  return p < computations_run(r.fgl_only) ? r.latency[p].p50_us : kNotMeasured;
}

double speedup(const CaseResult& r) {
  const double fused = r.latency[kFusedIndex].p50_us;
  return fused > 0 ? median_us(r, kCatIndex) / fused : kNotMeasured;
}

// `v` in printf's `format`, "-" where it is NaN (not measured).
std::string text_or_dash(double v, const char* format) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// A number as JSON: null where it is NaN (not measured).
nlohmann::json number_or_null(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
}

}  // namespace

void print_table_header(std::FILE* out) {
  std::fprintf(out,
               "%-18s %-8s %-16s %9s %10s %19s %11s %11s %8s %8s %8s %8s "
               "%8s %8s\n",
               "shape (R,B,H,K)", "dtype", "route", "floor us", "fgl us",
               "fgl p10-p90 us", "cat+lin us", "perm+lin us", "speedup",
               "paired", "fgl TB/s", "fgl TF/s", "err fgl", "err cat");
}

void print_table_row(std::FILE* out, const CaseResult& r, const RunInfo& info) {
  char spread[48];
  std::snprintf(spread, sizeof spread, "%.2f-%.2f",
                r.latency[kFusedIndex].p10_us, r.latency[kFusedIndex].p90_us);
  const double fused_us = r.latency[kFusedIndex].p50_us;
  std::fprintf(
      out,
      "%-18s %-8s %-16s %9s %10.2f %19s %11s %11s %8s %8s %8.3f %8.3f "
      "%8.1e %8s\n",
      shape_string(r.c).c_str(), c10::getDtypeNames(r.c.dtype).first.c_str(),
      r.route.c_str(),
      text_or_dash(info.has_floor ? r.floor.floor_us : kNotMeasured, "%.2f")
          .c_str(),
      fused_us, spread, text_or_dash(median_us(r, kCatIndex), "%.2f").c_str(),
      text_or_dash(median_us(r, kPermuteIndex), "%.2f").c_str(),
      text_or_dash(speedup(r), "%.2fx").c_str(),
      text_or_dash(r.paired_speedup, "%.2fx").c_str(),
      per_us_to_tera(r.floor.bytes, fused_us),
      per_us_to_tera(r.floor.flops, fused_us), r.rel_error[kFusedIndex],
      text_or_dash(r.rel_error[kCatIndex], "%.1e").c_str());
  std::fflush(out);
}

nlohmann::json case_record(const CaseResult& r, const RunInfo& info) {
  nlohmann::json j;
  j["device"] = info.device;
  j["device_name"] = info.device_name;
  j["timing"] = info.timing;
  j["tf32"] = info.tf32;
  if (info.memory_gbps > 0) {
    j["memory_gbps"] = info.memory_gbps;
  } else {
    j["memory_gbps"] = nullptr;
  }
  j["R"] = r.c.R;
  j["B"] = r.c.B;
  j["H"] = r.c.H;
  j["K"] = r.c.K;
  j["shape"] = shape_string(r.c);
  j["dtype"] = c10::getDtypeNames(r.c.dtype).first;
  j["bias"] = r.c.bias;
  j["route"] = r.route;
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
    const bool ran = p < computations_run(r.fgl_only);
    const timing::LatencyStats& s = r.latency[p];
    j[name + "_us"] = ran ? nlohmann::json(s.p50_us) : nullptr;
    j[name + "_p10_us"] = ran ? nlohmann::json(s.p10_us) : nullptr;
    j[name + "_p90_us"] = ran ? nlohmann::json(s.p90_us) : nullptr;
    j[name + "_rel_err"] = number_or_null(r.rel_error[p]);
  }
  j["samples"] = r.latency[kFusedIndex].samples;
  j["speedup"] = number_or_null(speedup(r));
  j["speedup_paired"] = number_or_null(r.paired_speedup);
  j["fgl_tbps"] = per_us_to_tera(r.floor.bytes, r.latency[kFusedIndex].p50_us);
  j["fgl_tflops"] =
      per_us_to_tera(r.floor.flops, r.latency[kFusedIndex].p50_us);
  j["copies"] = r.copies;
  j["calls_per_graph"] = r.calls_per_graph;
  return j;
}

}  // namespace fgl::bench
