#include "options.h"

#include <torch/version.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cxxopts.hpp>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

#include "errors.h"
#include "log.h"
#include "torch_names.h"

namespace fgl::app {
namespace {

constexpr const char* kExamples = R"(
Examples:
  fgl_infer                                  run the built-in demo problem
  fgl_infer --input x.pt --weights w.pt      run and check every batch of x.pt
  fgl_infer --input x.pt --weights ckpt.pt --weights-prefix encoder.out_proj \
            --output y.pt                    weights from a bigger state_dict
  fgl_infer --input x.pt --weights w.pt --device cuda --dtype bfloat16 \
            --warmup 10 --iters 200          benchmark fused vs reference
  fgl_infer --input x.pt --weights w.pt --json > summary.json
  fgl_infer --input x.pt --model model.pt    run a TorchScript model, checked
                                             against its proj weights
  fgl_infer --input x.pt --model model.pt2   run an AOTInductor package
  fgl_infer --input x.pt --weights w.pt --tensor-parallel 2 --iters 100
                                             the op over two GPUs, timed

Input files hold a tensor (R, B, H), a list or tuple of them, or a dict
name -> tensor; each is a batch. Written by Python torch.save, C++ torch::save,
torch.jit.save of a module whose attributes are tensors, or safetensors; the
format is detected. Weight files: nn.Linear(R*H, K).state_dict() (keys weight,
bias), a bigger state_dict (--weights-prefix), or C++
torch::save(GatherLinear). Tensor files are read as data, never run: a
TorchScript archive's attributes are read without its code. Files, zip
expansions, tensors and results over --max-input-bytes (default 16 GiB) are
refused.
--output is written in the input's structure, read it with torch.load; a
name ending in .safetensors writes safetensors.
--model takes a TorchScript file or an AOTInductor package (.pt2) whose
forward takes x (R, B, H), e.g. from examples/export_model.py, checked against
its layer proj (or --weights-prefix). Model files are code: load only files
you trust.

)";

[[noreturn]] void usage_error(const std::string& what) {
  throw AppError(kExitUsage, what, "run fgl_infer --help for the options");
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A whole number or a real number given to `option`, named in the error.
template <typename T>
T parse_number(const std::string& text, const char* option) {
  size_t used = 0;
  T value{};
  try {
    if constexpr (std::is_floating_point_v<T>) {
      value = static_cast<T>(std::stod(text, &used));
    } else {
      const long long v = std::stoll(text, &used);
      if (v < std::numeric_limits<T>::min() ||
          v > std::numeric_limits<T>::max()) {
        used = 0;
      }
      value = static_cast<T>(v);
    }
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    usage_error(std::string(option) + " expects " +
                (std::is_floating_point_v<T> ? "a number" : "a whole number") +
                ", got '" + text + "'");
  }
  return value;
}

// A byte count: digits with an optional binary unit, K/KB/KiB to T/TB/TiB
// (any case; 1G = 2^30 bytes).
int64_t parse_bytes(const std::string& text, const char* option) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    usage_error(std::string(option) + " expects a byte count such as 4096, " +
                "512M or 16G, got '" + text + "'");
  }
  static const std::map<std::string, int> shifts{
      {"", 0},    {"k", 10},   {"kb", 10}, {"kib", 10}, {"m", 20},
      {"mb", 20}, {"mib", 20}, {"g", 30},  {"gb", 30},  {"gib", 30},
      {"t", 40},  {"tb", 40},  {"tib", 40}};
  const auto unit = shifts.find(lowercase(text.substr(used)));
  if (unit == shifts.end()) {
    usage_error(std::string(option) + ": unknown unit in '" + text +
                "'; use K, M, G or T (binary: 1G = 2^30 bytes)");
  }
  if (value > 0 && value > (INT64_MAX >> unit->second)) {
    usage_error(std::string(option) + " " + text + " is too large");
  }
  return value > 0 ? value << unit->second : value;
}

// "auto" (empty) or a name `parse` knows (`names` lists them) for `option`.
template <typename Parse>
auto parse_auto(const std::string& name, const char* option, Parse parse,
                const char* names) -> decltype(parse(name)) {
  if (name == "auto") return std::nullopt;
  const auto value = parse(name);
  if (!value) {
    usage_error("unknown " + std::string(option) + " '" + name +
                "'; expected auto, " + names);
  }
  return value;
}

log::Level parse_level_option(const std::string& name) {
  const auto level = log::parse_level(lowercase(name));
  if (!level) {
    usage_error("unknown --log-level '" + name + "'; expected " +
                log::level_names());
  }
  return *level;
}

// "Exit codes: 0 ok, 1 check failed, ...", from errors.h, in lines of at
// most 80 columns.
std::string exit_codes_text() {
  std::string text = "Exit codes:";
  size_t line_start = 0;
  for (const auto& c : kExitCodes) {
    const std::string item = std::to_string(c.code) + " " + c.meaning +
                             (&c == std::end(kExitCodes) - 1 ? "." : ",");
    if (text.size() - line_start + 1 + item.size() > 80) {
      text += "\n";
      line_start = text.size();
    } else {
      text += " ";
    }
    text += item;
  }
  return text + "\n";
}

void validate(const InferOptions& o) {
  if (!o.model.empty() && !o.weights.empty()) {
    usage_error(
        "--model and --weights are mutually exclusive: the model brings its "
        "own weights");
  }
  if (!o.model.empty()) {
    if (o.input.empty()) {
      usage_error("--model needs --input (the x tensors to run on)");
    }
  } else if (o.input.empty() != o.weights.empty()) {
    usage_error(o.input.empty()
                    ? "--weights needs --input (the x tensors to run on)"
                    : "--input needs --weights (the linear layer to apply)");
  }
  if (o.input.empty() && !o.weights_prefix.empty()) {
    usage_error("--weights-prefix needs --weights or --model");
  }
  // "-" is not standard input or output here: tensor files are read at
  // offsets (zip, safetensors) and written atomically, neither of which a
  // pipe allows.
  for (const auto& [option, path] :
       {std::pair<const char*, const std::string&>{"--input", o.input},
        {"--weights", o.weights},
        {"--model", o.model},
        {"--output", o.output}}) {
    if (path == "-") {
      usage_error(std::string(option) +
                  " - (standard input or output) is not supported: name a "
                  "file");
    }
  }
  if (o.batch_size < 0 || o.warmup < 0 || o.iters < 0) {
    usage_error("--batch-size, --warmup and --iters must be >= 0");
  }
  if (o.max_input_bytes <= 0) {
    usage_error("--max-input-bytes must be > 0");
  }
  if ((o.atol && *o.atol < 0) || (o.rtol && *o.rtol < 0)) {
    usage_error("--atol and --rtol must be >= 0");
  }
  if (o.tensor_parallel > 0) {
    if (!o.model.empty()) {
      usage_error(
          "--tensor-parallel splits the fused op over --weights; a --model "
          "runs as it was saved");
    }
    if (o.device && (!o.device->is_cuda() || o.device->index() > 0)) {
      usage_error("--tensor-parallel runs on cuda:0 .. N-1: drop --device " +
                  o.device->str() + " or pass --device cuda");
    }
  }
  if (!o.check && (o.atol || o.rtol)) {
    usage_error(
        "--atol/--rtol set the check's tolerance; drop them or "
        "--no-check");
  }
}

}  // namespace

std::string version_text() {
  std::ostringstream os;
  os << "fgl_infer " << FGL_VERSION << " (libtorch " << TORCH_VERSION << ")";
  return os.str();
}

Command parse_command_line(int argc, const char* const* argv) {
  cxxopts::Options spec(
      "fgl_infer",
      "Batched inference of linear(cat(x.unbind(0), -1), weight, bias) with "
      "the fused\nfgl::gather_linear op, checked against the unfused path.\n"
      "With no --input/--weights a built-in demo problem runs.");
  spec.custom_help("[--input FILE (--weights FILE | --model FILE)] [options]");
  const InferOptions defaults;
  // clang-format off
  spec.add_options()
    ("input", "x tensors (R, B, H): a tensor, list, tuple or dict of them",
     cxxopts::value<std::string>(), "FILE")
    ("weights", "linear weights (K, R*H) and optional bias (K)",
     cxxopts::value<std::string>(), "FILE")
    ("model", "TorchScript model or AOTInductor package (.pt2) taking x",
     cxxopts::value<std::string>(), "FILE")
    ("weights-prefix", "prefix of weight/bias in a bigger state_dict, or "
     "of the linear layer a --model is checked against (default proj)",
     cxxopts::value<std::string>(), "PREFIX")
    ("output", "write results (B, K), structured like the input",
     cxxopts::value<std::string>(), "FILE")
    ("batch-size", "split batches along B into chunks of N rows (0: whole "
     "batches)",
     cxxopts::value<std::string>()->default_value(
         std::to_string(defaults.batch_size)), "N")
    ("no-check", "skip the comparison with the reference path")
    ("atol", "absolute tolerance of the check (default: by dtype); an "
     "element passes when |fused - reference| <= atol + rtol * |reference|",
     cxxopts::value<std::string>(), "X")
    ("rtol", "relative tolerance of the check (default: by dtype)",
     cxxopts::value<std::string>(), "X")
    ("device", std::string("auto, ") + cli::kDeviceNames,
     cxxopts::value<std::string>()->default_value("auto"), "DEV")
    ("dtype", std::string("auto (the input's), ") + cli::kDtypeNames,
     cxxopts::value<std::string>()->default_value("auto"), "T")
    ("tensor-parallel", "split the op by heads over N GPUs (cuda:0 .. "
     "N-1), partial outputs summed by NCCL; checked against one GPU",
     cxxopts::value<std::string>(), "N")
    ("warmup", "untimed calls before timing (benchmark mode)",
     cxxopts::value<std::string>()->default_value(
         std::to_string(defaults.warmup)), "N")
    ("iters", "timed calls of each path; > 0 turns on benchmark mode",
     cxxopts::value<std::string>()->default_value(
         std::to_string(defaults.iters)), "N")
    ("json", "print one JSON summary on stdout")
    ("log-level", "stderr log level: " + log::level_names(),
     cxxopts::value<std::string>()->default_value(
         log::level_name(defaults.log_level)), "LEVEL")
    ("max-input-bytes", "refuse files, zip expansions, tensors and results "
     "larger than N bytes (K, M, G, T: binary units; default 16G)",
     cxxopts::value<std::string>(), "N")
    ("version", "print the version")
    ("h,help", "print this help");
  // clang-format on

  Command command;
  try {
    const auto args = spec.parse(argc, argv);
    if (!args.unmatched().empty()) {
      usage_error("unexpected argument '" + args.unmatched().front() + "'");
    }
    if (args.count("help")) {
      command.kind = Command::Kind::kHelp;
      command.text = spec.help() + kExamples + exit_codes_text();
      return command;
    }
    if (args.count("version")) {
      command.kind = Command::Kind::kVersion;
      command.text = version_text();
      return command;
    }
    auto& o = command.options;
    auto set = [&](const char* name, auto& field) {
      if (args.count(name)) {
        field = args[name].as<std::decay_t<decltype(field)>>();
      }
    };
    set("input", o.input);
    set("weights", o.weights);
    set("weights-prefix", o.weights_prefix);
    set("model", o.model);
    set("output", o.output);
    const auto text = [&](const char* name) {
      return args[name].as<std::string>();
    };
    o.batch_size = parse_number<int64_t>(text("batch-size"), "--batch-size");
    o.check = args.count("no-check") == 0;
    if (args.count("atol")) {
      o.atol = parse_number<double>(text("atol"), "--atol");
    }
    if (args.count("rtol")) {
      o.rtol = parse_number<double>(text("rtol"), "--rtol");
    }
    o.device = parse_auto(text("device"), "--device", cli::parse_device,
                          cli::kDeviceNames);
    o.dtype = parse_auto(text("dtype"), "--dtype", cli::parse_dtype,
                         cli::kDtypeNames);
    if (args.count("tensor-parallel")) {
      o.tensor_parallel =
          parse_number<int>(text("tensor-parallel"), "--tensor-parallel");
      if (o.tensor_parallel < 1) {
        usage_error("--tensor-parallel expects at least 1 GPU, got " +
                    text("tensor-parallel"));
      }
    }
    o.warmup = parse_number<int>(text("warmup"), "--warmup");
    o.iters = parse_number<int>(text("iters"), "--iters");
    if (args.count("warmup") && o.iters == 0) {
      usage_error("--warmup applies to benchmark mode: give --iters N too");
    }
    o.json = args.count("json") > 0;
    o.log_level = parse_level_option(text("log-level"));
    if (args.count("max-input-bytes")) {
      o.max_input_bytes = parse_bytes(args["max-input-bytes"].as<std::string>(),
                                      "--max-input-bytes");
    }
  } catch (const cxxopts::exceptions::exception& e) {
    usage_error(e.what());
  }
  validate(command.options);
  return command;
}

}  // namespace fgl::app
