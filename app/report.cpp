#include "report.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "errors.h"
#include "options.h"

namespace fgl::app {
namespace {

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

bool has_p99(const ForwardTiming& t) {
  return t.latency.samples >= timing::kMinSamplesForP99;
}

nlohmann::ordered_json timing_json(const ForwardTiming& t) {
  const auto& l = t.latency;
  return {{"samples", l.samples},
          {"p10_us", l.p10_us},
          {"p50_us", l.p50_us},
          {"p90_us", l.p90_us},
          {"p99_us", has_p99(t) ? nlohmann::ordered_json(l.p99_us) : nullptr},
          {"mean_us", l.mean_us},
          {"spread", timing::spread(l)},
          {"rows_per_s", t.rows_per_s}};
}

// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_length(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80         ? 1
                   : (c >> 5) == 6  ? 2
                   : (c >> 4) == 14 ? 3
                   : (c >> 3) == 30 ? 4
                                    : 0;
  if (n == 0 || i + n > s.size()) {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) {
      return 0;
    }
  }
  return n;
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = utf8_length(text, i);
    if (n == 0 || (c < 0x20 && c != '\n') || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

CheckFailure describe_check_failure(const InferReport& r) {
  int64_t failed = 0, nonfinite = 0;
  for (const auto& b : r.batches) {
    failed += b.passed ? 0 : 1;
    nonfinite += b.nonfinite;
  }
  const std::string what = std::to_string(failed) + " of " +
                           std::to_string(r.batches.size()) +
                           " batch(es) failed the check";
  if (nonfinite > 0) {
    return {what + ": the result holds " + std::to_string(nonfinite) +
                " NaN/inf value(s)",
            "look for NaN/inf in the input and weights, or values too large "
            "for " +
                r.dtype + "; --no-check writes the output anyway"};
  }
  return {what +
              ": the fused op and the reference path differ by more than "
              "atol + rtol * |reference|",
          "see the table on stdout; --atol/--rtol if the dtype warrants it, "
          "--no-check to write the output anyway"};
}

void print_text(const InferReport& r, std::ostream& os) {
  os << (r.demo ? "demo problem (built in, fixed seed)" : r.input)
     << ": R=" << r.R << " H=" << r.H << " K=" << r.K
     << (!r.bias   ? " bias unknown"
         : *r.bias ? " with bias"
                   : " no bias")
     << ", " << r.batches.size() << " batch(es), B=" << r.rows
     << " rows in all, " << r.dtype << " on " << r.device << "\n";
  if (r.tensor_parallel > 0) {
    os << "the op split by heads over " << r.tensor_parallel
       << " GPU(s), partial outputs summed by NCCL; the reference on "
       << r.device << "\n";
  }
  if (!r.model.empty()) {
    os << "model " << r.model << " (" << r.model_format
       << "), checked against proj(cat(x.unbind(0), -1)) over its weights\n";
  }
  char line[160];
  std::snprintf(line, sizeof(line), "  %-16s %8s %12s %12s  %-5s %s\n", "batch",
                "rows", "max_abs_err", "max_rel_err", "check", "route");
  os << line;
  for (const auto& b : r.batches) {
    // Errors are measured only by the check.
    const std::string abs_err = r.checked ? format("%.3g", b.max_abs_err) : "-";
    const std::string rel_err = r.checked ? format("%.3g", b.max_rel_err) : "-";
    std::snprintf(line, sizeof(line), "  %-16s %8lld %12s %12s  %-5s %s",
                  b.name.c_str(), static_cast<long long>(b.rows),
                  abs_err.c_str(), rel_err.c_str(),
                  !r.checked ? "-" : (b.passed ? "pass" : "FAIL"),
                  b.route.empty() ? "-" : b.route.c_str());
    os << line;
    if (b.nonfinite > 0) {
      os << " (" << b.nonfinite << " NaN/inf in the result)";
    }
    os << "\n";
  }
  if (!r.checked) {
    os << "check skipped (--no-check)\n";
  } else {
    os << "check " << (r.passed ? "passed" : "FAILED")
       << ": fused vs reference path, each element within atol + rtol * "
          "|reference| (atol="
       << format("%g", r.atol) << " rtol=" << format("%g", r.rtol) << ")\n";
  }
  if (!r.ranks.empty()) {
    os << "per rank, mean per call of the "
       << (r.fused ? "timed passes" : "checked calls") << " ("
       << r.ranks.front().calls << " calls):\n";
    std::snprintf(line, sizeof(line), "  %-6s %-8s %12s %14s\n", "rank",
                  "device", "partial_us", "all_reduce_us");
    os << line;
    for (const auto& k : r.ranks) {
      std::snprintf(line, sizeof(line), "  %-6d %-8s %12.1f %14.1f\n", k.rank,
                    k.device.c_str(), k.partial_us, k.all_reduce_us);
      os << line;
    }
  }
  if (r.fused) {
    os << "latency of one pass over all batches (" << r.fused->latency.samples
       << " timed after " << r.warmup << " warm-up calls";
    if (r.threads > 0) os << ", " << r.threads << " CPU threads";
    os << "):\n";
    std::snprintf(line, sizeof(line), "  %-10s %10s %10s %10s %10s %12s\n",
                  "path", "p10_us", "p50_us", "p90_us", "p99_us", "rows/s");
    os << line;
    std::vector<std::pair<const char*, ForwardTiming>> forwards = {
        {r.model.empty() ? "fused" : "model", *r.fused}};
    if (r.reference) {
      forwards.emplace_back("reference", *r.reference);
    }
    for (const auto& [name, t] : forwards) {
      const auto& l = t.latency;
      std::snprintf(
          line, sizeof(line), "  %-10s %10.1f %10.1f %10.1f %10s %12.4g\n",
          name, l.p10_us, l.p50_us, l.p90_us,
          has_p99(t) ? format("%.1f", l.p99_us).c_str() : "-", t.rows_per_s);
      os << line;
    }
    if (!has_p99(*r.fused)) {
      os << "  (p99 from " << timing::kMinSamplesForP99
         << " timed calls on: --iters " << timing::kMinSamplesForP99 << ")\n";
    }
    for (const auto& [name, t] : forwards) {
      if (timing::spread(t.latency) > timing::kWideSpread) {
        os << "warning: the " << name << " timings spread widely (p10 "
           << format("%.1f", t.latency.p10_us) << " to p90 "
           << format("%.1f", t.latency.p90_us)
           << " us): the machine is busy or the run too short; compare runs "
              "with more --iters on a quiet machine\n";
      }
    }
    if (r.reference) {
      os << "speed-up (reference p50 / fused p50): "
         << format("%.2f",
                   r.reference->latency.p50_us / r.fused->latency.p50_us)
         << "x\n";
    }
  }
  if (!r.output.empty()) {
    os << "wrote " << r.output << "\n";
  }
  if (r.demo) {
    os << "next: fgl_infer --input x.pt --weights w.pt --output y.pt "
          "(fgl_infer --help for more)\n";
  }
}

void print_json(const InferReport& r, std::ostream& os) {
  nlohmann::ordered_json batches = nlohmann::ordered_json::array();
  // What the check did not measure is null.
  const auto checked = [&](auto value) {
    return r.checked ? nlohmann::ordered_json(value) : nlohmann::ordered_json();
  };
  for (const auto& b : r.batches) {
    batches.push_back(
        {{"name", b.name},
         {"rows", b.rows},
         {"chunks", b.chunks},
         {"route", b.route.empty() ? nlohmann::ordered_json()
                                   : nlohmann::ordered_json(b.route)},
         {"max_abs_err", checked(b.max_abs_err)},
         {"max_rel_err", checked(b.max_rel_err)},
         {"nonfinite", b.nonfinite},
         {"passed", checked(b.passed)}});
  }
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const auto& k : r.ranks) {
    ranks.push_back({{"rank", k.rank},
                     {"device", k.device},
                     {"calls", k.calls},
                     {"partial_us", k.partial_us},
                     {"all_reduce_us", k.all_reduce_us}});
  }
  nlohmann::ordered_json j = {
      {"version", version_text()},
      {"exit_code", r.exit_code},
      {"demo", r.demo},
      {"input", r.input},
      {"input_format", r.input_format},
      {"input_layout", r.input_layout},
      {"weights", r.weights},
      {"weights_prefix", r.weights_prefix},
      {"model", r.model.empty() ? nlohmann::ordered_json()
                                : nlohmann::ordered_json(r.model)},
      {"model_format", r.model_format.empty()
                           ? nlohmann::ordered_json()
                           : nlohmann::ordered_json(r.model_format)},
      {"output", r.output.empty() ? nlohmann::ordered_json()
                                  : nlohmann::ordered_json(r.output)},
      {"device", r.device},
      {"dtype", r.dtype},
      {"R", r.R},
      {"H", r.H},
      {"K", r.K},
      {"bias",
       r.bias ? nlohmann::ordered_json(*r.bias) : nlohmann::ordered_json()},
      {"batch_size", r.batch_size},
      {"tensor_parallel", r.tensor_parallel > 0
                              ? nlohmann::ordered_json(r.tensor_parallel)
                              : nlohmann::ordered_json()},
      {"rows", r.rows},
      {"check",
       {{"enabled", r.checked},
        {"atol", r.atol},
        {"rtol", r.rtol},
        {"passed", checked(r.passed)}}},
      {"batches", batches},
      {"ranks", ranks},
      {"benchmark", nullptr},
  };
  if (r.fused) {
    j["benchmark"] = {
        {"warmup", r.warmup},
        {"threads",
         r.threads > 0 ? nlohmann::ordered_json(r.threads) : nullptr},
        {"fused", timing_json(*r.fused)},
        {"reference", nullptr},
        {"speedup", nullptr}};
    if (r.reference) {
      j["benchmark"]["reference"] = timing_json(*r.reference);
      j["benchmark"]["speedup"] =
          r.reference->latency.p50_us / r.fused->latency.p50_us;
    }
  }
  // Names come from user files: replace invalid UTF-8 rather than throw.
  os << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
     << "\n";
}

void print_json_error(int code, const std::string& error,
                      const std::string& hint, std::ostream& os) {
  os << nlohmann::ordered_json{{"version", version_text()},
                               {"exit_code", code},
                               {"error", error},
                               {"hint", hint}}
            .dump(2, ' ', false,
                  nlohmann::ordered_json::error_handler_t::replace)
     << "\n";
}

}  // namespace fgl::app
