// fgl_bench: times fgl::gather_linear against cat+Linear and permute+Linear
// (CUDA-graph replays on a GPU, steady clock on the CPU), shows each case
// against its H200 roofline floor, and checks accuracy against float64.
// Table on stdout, progress and errors on stderr, records with --json.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "cases.h"
#include "options.h"
#include "report.h"
#include "runner.h"

#ifdef FGL_BENCH_CUDA
#include "graph_timer.h"
#endif

namespace {

using fgl::bench::Options;

// "model name" from /proc/cpuinfo, or "CPU" where there is none.
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) {
      return line.substr(colon + 2);
    }
  }
  return "CPU";
}

std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

fgl::bench::RunInfo run_info(const Options& opt) {
  fgl::bench::RunInfo info;
  info.device = opt.device.str();
  info.tf32 = at::globalContext().allowTF32CuBLAS();
  if (opt.device.is_cpu()) {
    info.device_name =
        cpu_model() + ", " + std::to_string(at::get_num_threads()) + " threads";
    info.timing = "steady_clock";
    return info;
  }
#ifdef FGL_BENCH_CUDA
  info.device_name = fgl::bench::cuda_device_name(opt.device.index());
  info.memory_gbps = fgl::bench::cuda_memory_gbps(opt.device.index());
#endif
  info.timing = "cuda_graph_replay";
  info.has_floor = true;
  return info;
}

void print_preamble(const Options& opt, const fgl::bench::RunInfo& info) {
  std::printf("fgl_bench on %s (%s)\n", info.device.c_str(),
              info.device_name.c_str());
  if (info.memory_gbps > 0) {
    std::printf("memory: %ld GB/s at its peak\n",
                static_cast<long>(info.memory_gbps));
  }
  if (opt.device.is_cpu()) {
    std::printf("timing: steady clock, median of %d calls after %d warm-up\n",
                opt.run.replays, opt.run.warmup);
  } else {
    std::printf(
        "timing: CUDA-graph replays, median of %d (after %d warm-up) of "
        "replay time / calls, >= %ld calls per graph; operand copies rotate "
        "up to %ld MiB\n",
        opt.run.replays, opt.run.warmup,
        static_cast<long>(opt.run.calls_per_graph),
        static_cast<long>(opt.run.rotate_bytes >> 20));
    std::printf(
        "floor: max(bytes / %.2f TB/s, flops / peak, %.2f us launch); peak "
        "fp32 %.0f, TF32 %.0f, bf16/fp16 %.0f TFLOP/s\n",
        fgl::bench::kCopyBytesPerS * 1e-12, fgl::bench::kLaunchFloorUs,
        fgl::bench::kFp32SimtFlopsPerS * 1e-12,
        fgl::bench::kTf32FlopsPerS * 1e-12, fgl::bench::kHalfFlopsPerS * 1e-12);
  }
  const char* forced = opt.route       ? fgl::cuda::route_name(*opt.route)
                       : opt.cpu_route ? fgl::cpu::route_name(*opt.cpu_route)
                                       : nullptr;
  if (forced != nullptr) {
    std::printf(
        "routing: %s forced (the policy's route where it cannot "
        "run; the route column says which ran)\n",
        forced);
  } else {
    std::printf("routing: the policy's\n");
  }
  if (!opt.cases.empty() && !opt.cases.front().bias) {
    std::printf("bias: none (--no-bias)\n");
  }
  std::printf("TF32 in cuBLAS float32 matmuls: %s\n",
              info.tf32 ? "on (--allow-tf32)" : "off");
  if (opt.run.fgl_only) {
    std::printf("computations: fgl alone (--fgl-only)\n");
  }
  std::printf("errors: ||out - ref|| / ||ref||, ref in float64 on the CPU\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    opt = fgl::bench::parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgl_bench: error: %s\n(see fgl_bench --help)\n",
                 error_text(e).c_str());
    return 2;
  }
  if (opt.help) {
    std::printf("%s", opt.usage.c_str());
    return 0;
  }
  if (opt.list) {
    for (const auto& c : opt.cases) {
      std::printf("%s %s\n", fgl::bench::shape_string(c).c_str(),
                  c10::getDtypeNames(c.dtype).first.c_str());
    }
    return 0;
  }
  std::ofstream json_file;
  if (!opt.json_path.empty()) {
    json_file.open(opt.json_path);
    if (!json_file) {
      std::fprintf(stderr, "fgl_bench: error: cannot write --json %s\n",
                   opt.json_path.c_str());
      return 2;
    }
  }
  if (opt.allow_tf32) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setFloat32MatmulPrecision("high");
  }
  opt.run.tf32 = at::globalContext().allowTF32CuBLAS();
  fgl::cuda::force_route(opt.route);
  fgl::cpu::force_route(opt.cpu_route);
  at::manual_seed(0);

  const fgl::bench::RunInfo info = run_info(opt);
  print_preamble(opt, info);
  fgl::bench::print_table_header(stdout);
  nlohmann::json records = nlohmann::json::array();
  int failures = 0;
  for (const auto& c : opt.cases) {
    try {
      const auto result = fgl::bench::run_case(c, opt.device, opt.run);
      fgl::bench::print_table_row(stdout, result, info);
      records.push_back(fgl::bench::case_record(result, info));
    } catch (const std::exception& e) {
      ++failures;
      std::fprintf(stderr, "fgl_bench: case %s %s failed: %s\n",
                   fgl::bench::shape_string(c).c_str(),
                   c10::getDtypeNames(c.dtype).first.c_str(),
                   error_text(e).c_str());
    }
  }
  if (json_file.is_open()) {
    json_file << records.dump(2) << "\n";
    json_file.close();
    if (!json_file) {
      std::fprintf(stderr, "fgl_bench: error: writing %s failed\n",
                   opt.json_path.c_str());
      return 1;
    }
  }
  if (failures > 0) {
    std::fprintf(stderr, "fgl_bench: %d of %zu cases failed\n", failures,
                 opt.cases.size());
    return 1;
  }
  return 0;
}
