#include "options.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cxxopts.hpp>
#include <stdexcept>
#include <type_traits>

#include "torch_names.h"

namespace fgl::bench {
namespace {

c10::Device parse_device(const std::string& name) {
  const auto device = cli::parse_device(name);
  if (!device) {
    throw std::invalid_argument(std::string("--device: expected ") +
                                cli::kDeviceNames + ", got \"" + name + "\"");
  }
  if (device->is_cpu()) return *device;
#ifndef FGL_BENCH_CUDA
  throw std::invalid_argument("--device " + name +
                              ": fgl_bench was built without CUDA "
                              "(FGL_ENABLE_CUDA=OFF)");
#else
  if (!at::hasCUDA()) {
    throw std::invalid_argument("--device " + name +
                                ": no CUDA device is visible to this process");
  }
  const int count = static_cast<int>(at::getNumGPUs());
  const int index = device->index();
  if (index >= count) {
    throw std::invalid_argument("--device " + name + ": only " +
                                std::to_string(count) +
                                " CUDA device(s) visible");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
#endif
}

c10::Device default_device() {
#ifdef FGL_BENCH_CUDA
  if (at::hasCUDA()) return c10::Device(c10::kCUDA, 0);
#endif
  return c10::Device(c10::kCPU);
}

int positive(const cxxopts::ParseResult& r, const std::string& name) {
  const int v = r[name].as<int>();
  if (v < 1) {
    throw std::invalid_argument("--" + name + " must be at least 1, got " +
                                std::to_string(v));
  }
  return v;
}

// "policy, warp-dot, stream, ...": the names --route takes for a backend
// whose routes are `routes`.
template <typename Routes>
std::string route_names(const Routes& routes) {
  std::string names = "policy";
  for (const auto route : routes) {
    names += std::string(", ") + route_name(route);
  }
  return names;
}

// The route named `name` among `routes`; nullopt for "policy".
template <typename Routes>
auto parse_route(const std::string& name, const Routes& routes)
    -> std::optional<std::decay_t<decltype(routes[0])>> {
  if (name == "policy") return std::nullopt;
  for (const auto route : routes) {
    if (name == route_name(route)) return route;
  }
  throw std::invalid_argument("--route: expected " + route_names(routes) +
                              ", got \"" + name + "\"");
}

}  // namespace

Options parse_options(int argc, const char* const* argv) {
  cxxopts::Options spec(
      "fgl_bench",
      "Times fgl::gather_linear against cat+Linear and permute+Linear and "
      "checks their accuracy against a float64 reference.");
  // clang-format off
  spec.add_options()
    ("device", "cpu, cuda or cuda:N (default: cuda if present, else cpu)",
     cxxopts::value<std::string>(), "DEV")
    ("shapes", "cases as \"R,B,H,K;R,B,H,K\" (default: built-in list)",
     cxxopts::value<std::string>(), "LIST")
    ("random", "N shapes drawn at random over the decode sweep's ranges "
     "instead of --shapes (R*H 32-16384, B 1-256, K 8-32768)",
     cxxopts::value<int>(), "N")
    ("seed", "the seed of --random's draw: the same seed, the same shapes",
     cxxopts::value<uint64_t>()->default_value("1"), "S")
    ("dtypes", "dtypes of the --shapes or --random cases, e.g. "
     "float32,bfloat16 (default float32; otherwise: filters the built-in "
     "list)", cxxopts::value<std::string>(), "LIST")
    ("list", "print the cases (R,B,H,K dtype, one a line) and exit")
    ("replays", "timed graph replays (CUDA; default 50, --quick 20) or "
     "calls (CPU; default 20, --quick 3)", cxxopts::value<int>(), "N")
    ("warmup", "untimed graph replays (CUDA; default 5, --quick 2) or "
     "calls (CPU; default 3, --quick 1)", cxxopts::value<int>(), "N")
    ("calls-per-graph", "least calls captured into one CUDA graph",
     cxxopts::value<int>()->default_value("20"), "N")
    ("rotate-mib", "MiB of operand copies the calls of a graph rotate "
     "through (CUDA; past the GPU's L2; less only where the times do not "
     "matter, e.g. under compute-sanitizer)",
     cxxopts::value<int>()->default_value("200"), "N")
    ("json", "also write the results as a JSON array to FILE",
     cxxopts::value<std::string>(), "FILE")
    ("quick", "fewer replays/calls (smoke tests)")
    ("route", "route of the op on --device (where it cannot run, the "
     "policy's): CUDA " + route_names(cuda::kRoutes) + "; CPU " +
     route_names(cpu::kRoutes),
     cxxopts::value<std::string>()->default_value("policy"), "ROUTE")
    ("allow-tf32", "allow TF32 in cuBLAS float32 matmuls "
     "(float32 matmul precision \"high\")")
    ("no-bias", "cases without a bias (as attention's output projections "
     "often are)")
    ("fgl-only", "run the fused op alone, for a profiler or sanitizer to "
     "see no other kernel (its error is still checked against float64)")
    ("h,help", "print this help");
  // clang-format on

  Options opt;
  opt.usage = spec.help();
  cxxopts::ParseResult r;
  try {
    r = spec.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  if (!r.unmatched().empty()) {
    throw std::invalid_argument("unexpected argument \"" + r.unmatched()[0] +
                                "\"");
  }
  if (r.count("help")) {
    opt.help = true;
    return opt;
  }
  opt.quick = r.count("quick") > 0;
  opt.list = r.count("list") > 0;
  opt.allow_tf32 = r.count("allow-tf32") > 0;
  opt.run.fgl_only = r.count("fgl-only") > 0;
  if (r.count("json")) opt.json_path = r["json"].as<std::string>();
  opt.device = r.count("device") ? parse_device(r["device"].as<std::string>())
                                 : default_device();
  const auto& route = r["route"].as<std::string>();
  if (opt.device.is_cpu()) {
    opt.cpu_route = parse_route(route, cpu::kRoutes);
  } else {
    opt.route = parse_route(route, cuda::kRoutes);
  }

  const bool cpu = opt.device.is_cpu();
  opt.run.warmup = cpu ? (opt.quick ? 1 : 3) : (opt.quick ? 2 : 5);
  opt.run.replays = cpu ? (opt.quick ? 3 : 20) : (opt.quick ? 20 : 50);
  if (r.count("replays")) opt.run.replays = positive(r, "replays");
  if (r.count("warmup")) opt.run.warmup = positive(r, "warmup");
  opt.run.calls_per_graph = positive(r, "calls-per-graph");
  opt.run.rotate_bytes = int64_t{positive(r, "rotate-mib")} << 20;

  if (r.count("shapes") && r.count("random")) {
    throw std::invalid_argument("give --shapes or --random, not both");
  }
  if (r.count("seed") && !r.count("random")) {
    throw std::invalid_argument(
        "--seed draws --random's shapes; give --random");
  }
  if (r.count("shapes") || r.count("random")) {
    const auto dtypes = parse_dtypes(
        r.count("dtypes") ? r["dtypes"].as<std::string>() : "float32");
    opt.cases = r.count("shapes")
                    ? parse_cases(r["shapes"].as<std::string>(), dtypes)
                    : random_cases(positive(r, "random"),
                                   r["seed"].as<uint64_t>(), dtypes);
  } else {
    opt.cases = default_cases(opt.device.type());
    if (r.count("dtypes")) {
      const auto dtypes = parse_dtypes(r["dtypes"].as<std::string>());
      const auto unwanted = [&](const Case& c) {
        return std::find(dtypes.begin(), dtypes.end(), c.dtype) == dtypes.end();
      };
      opt.cases.erase(
          std::remove_if(opt.cases.begin(), opt.cases.end(), unwanted),
          opt.cases.end());
      if (opt.cases.empty()) {
        throw std::invalid_argument(
            "--dtypes " + r["dtypes"].as<std::string>() +
            ": no built-in case has these dtypes; give --shapes");
      }
    }
  }
  if (r.count("no-bias")) {
    for (Case& c : opt.cases) c.bias = false;
  }
  return opt;
}

}  // namespace fgl::bench
