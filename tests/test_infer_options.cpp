// fgl_infer's library without the binary: command-line validation and the
// demo run.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "inference.h"
#include "options.h"
#include "report.h"

namespace fgl::app {
namespace {

Command parse(std::vector<const char*> args) {
  args.insert(args.begin(), "fgl_infer");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

// Expects a usage error whose message contains `part`.
void expect_usage_error(std::vector<const char*> args,
                        const std::string& part) {
  try {
    parse(args);
    ADD_FAILURE() << "no error for " << part;
  } catch (const AppError& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(InferOptions, Defaults) {
  const auto command = parse({});
  EXPECT_EQ(command.kind, Command::Kind::kRun);
  EXPECT_TRUE(command.options.input.empty());
  EXPECT_TRUE(command.options.check);
  EXPECT_FALSE(command.options.device.has_value());  // auto
  EXPECT_FALSE(command.options.dtype.has_value());   // auto: the input's
  EXPECT_EQ(command.options.log_level, log::Level::kInfo);
  EXPECT_EQ(command.options.iters, 0);
}

TEST(InferOptions, MaxInputBytes) {
  EXPECT_EQ(parse({}).options.max_input_bytes, int64_t{16} << 30);
  EXPECT_EQ(parse({"--max-input-bytes", "4096"}).options.max_input_bytes, 4096);
  expect_usage_error({"--input", "-", "--weights", "w.pt"},
                     "--input - (standard input or output) is not supported");
  expect_usage_error({"--input", "x.pt", "--weights", "-"},
                     "--weights - (standard input");
  expect_usage_error({"--input", "x.pt", "--weights", "w.pt", "--output", "-"},
                     "--output - (standard input or output) is not supported");
  expect_usage_error({"--max-input-bytes", "0"}, "must be > 0");
  expect_usage_error({"--max-input-bytes=-5"}, "must be > 0");
  // Binary units, any case.
  EXPECT_EQ(parse({"--max-input-bytes", "1G"}).options.max_input_bytes,
            int64_t{1} << 30);
  EXPECT_EQ(parse({"--max-input-bytes", "512mib"}).options.max_input_bytes,
            int64_t{512} << 20);
  EXPECT_EQ(parse({"--max-input-bytes", "3K"}).options.max_input_bytes, 3072);
  expect_usage_error({"--max-input-bytes", "1Q"},
                     "--max-input-bytes: unknown unit in '1Q'");
  expect_usage_error({"--max-input-bytes", "lots"},
                     "--max-input-bytes expects a byte count");
  expect_usage_error({"--max-input-bytes", "9999999999T"}, "is too large");
}

TEST(InferOptions, AcceptsTheNamesPyTorchUsersType) {
  const std::pair<const char*, c10::ScalarType> dtypes[] = {
      {"fp32", c10::kFloat},    {"float", c10::kFloat},
      {"half", c10::kHalf},     {"fp16", c10::kHalf},
      {"bf16", c10::kBFloat16}, {"BFloat16", c10::kBFloat16},
      {"double", c10::kDouble}, {"fp64", c10::kDouble},
      {"float16", c10::kHalf},  {"FLOAT32", c10::kFloat}};
  for (const auto& [typed, type] : dtypes) {
    EXPECT_EQ(parse({"--dtype", typed}).options.dtype, type) << typed;
  }
  EXPECT_EQ(parse({"--log-level", "warning"}).options.log_level,
            log::Level::kWarn);
  EXPECT_EQ(parse({"--log-level", "WARN"}).options.log_level,
            log::Level::kWarn);
  EXPECT_EQ(parse({"--log-level", "Debug"}).options.log_level,
            log::Level::kDebug);
  EXPECT_EQ(parse({"--device", "cuda"}).options.device,
            c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(parse({"--device", "cpu"}).options.device, c10::Device(c10::kCPU));
  expect_usage_error({"--device", "gpu"}, "unknown --device 'gpu'");
  expect_usage_error({"--device", "cuda:"}, "unknown --device 'cuda:'");
  expect_usage_error({"--device", "cuda:1x"}, "unknown --device 'cuda:1x'");
  expect_usage_error({"--device", "cuda:999"}, "unknown --device 'cuda:999'");
  expect_usage_error({"--device", "mps"}, "unknown --device 'mps'");
}

TEST(InferOptions, ParsesEverything) {
  const auto o =
      parse({"--input",          "x.pt",        "--weights", "w.pt",
             "--weights-prefix", "enc",         "--output",  "y.pt",
             "--batch-size",     "7",           "--atol",    "0.5",
             "--device",         "cuda:1",      "--dtype",   "bfloat16",
             "--warmup",         "2",           "--iters",   "9",
             "--json",           "--log-level", "debug"})
          .options;
  EXPECT_EQ(o.weights_prefix, "enc");
  EXPECT_EQ(o.batch_size, 7);
  EXPECT_EQ(o.atol.value_or(-1), 0.5);
  EXPECT_FALSE(o.rtol.has_value());
  EXPECT_EQ(o.device, c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(o.dtype, c10::kBFloat16);
  EXPECT_EQ(o.log_level, log::Level::kDebug);
  EXPECT_EQ(o.iters, 9);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.tensor_parallel, 0);
  EXPECT_EQ(parse({"--tensor-parallel", "2", "--device", "cuda"})
                .options.tensor_parallel,
            2);
}

TEST(InferOptions, HelpAndVersion) {
  const auto help = parse({"--help"});
  EXPECT_EQ(help.kind, Command::Kind::kHelp);
  EXPECT_NE(help.text.find("Examples:"), std::string::npos);
  // Generated from the constants the program uses.
  for (const char* part :
       {"Exit codes: 0 ok, 1 check failed, 64 usage", "73 cannot create output",
        "error, off", "bf16", "cuda:N"}) {
    EXPECT_NE(help.text.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(parse({"--version"}).kind, Command::Kind::kVersion);
}

TEST(InferOptions, UsageErrors) {
  expect_usage_error({"--dtype", "float8"}, "unknown --dtype 'float8'");
  expect_usage_error({"--device", "tpu"}, "unknown --device 'tpu'");
  expect_usage_error({"--log-level", "loud"}, "unknown --log-level");
  expect_usage_error({"--input", "x.pt"}, "--input needs --weights");
  expect_usage_error({"--weights", "w.pt"}, "--weights needs --input");
  expect_usage_error({"--batch-size", "-1"}, ">= 0");
  expect_usage_error({"--iters", "many"},
                     "--iters expects a whole number, got 'many'");
  expect_usage_error({"--batch-size", "abc"},
                     "--batch-size expects a whole number, got 'abc'");
  expect_usage_error({"--batch-size", "3x"}, "--batch-size");
  expect_usage_error({"--iters", "99999999999"}, "--iters");
  expect_usage_error({"--atol", "tight"}, "--atol expects a number");
  expect_usage_error({"--warmup", "3"}, "--warmup applies to benchmark mode");
  expect_usage_error({"--bogus"}, "bogus");
  expect_usage_error({"stray"}, "unexpected argument 'stray'");
  expect_usage_error({"--no-check", "--atol", "1"}, "--no-check");
  expect_usage_error({"--tensor-parallel", "0"},
                     "--tensor-parallel expects at least 1 GPU, got 0");
  expect_usage_error({"--tensor-parallel", "two"},
                     "--tensor-parallel expects a whole number");
  expect_usage_error({"--tensor-parallel", "2", "--device", "cpu"},
                     "drop --device cpu");
  expect_usage_error({"--tensor-parallel", "2", "--device", "cuda:1"},
                     "runs on cuda:0 .. N-1");
  expect_usage_error(
      {"--tensor-parallel", "2", "--input", "x.pt", "--model", "m.pt"},
      "a --model runs as it was saved");
}

TEST(InferRun, DemoPassesItsCheck) {
  InferOptions options;
  options.device = c10::Device(c10::kCPU);
  const auto report = run_inference(options);
  EXPECT_TRUE(report.demo);
  EXPECT_EQ(report.R, DemoShape::R);
  EXPECT_EQ(report.H, DemoShape::H);
  EXPECT_EQ(report.K, DemoShape::K);
  EXPECT_EQ(report.rows, DemoShape::B);
  EXPECT_TRUE(report.checked);
  EXPECT_TRUE(report.passed);
  EXPECT_EQ(report.exit_code, kExitOk);
  ASSERT_EQ(report.batches.size(), 1u);
  EXPECT_GT(report.batches[0].max_abs_err, -1.0);
  EXPECT_LT(report.batches[0].max_abs_err, 1e-4);
}

TEST(InferRun, BatchSizeSplitsAlongB) {
  InferOptions options;
  options.device = c10::Device(c10::kCPU);
  options.batch_size = 5;
  const auto report = run_inference(options);
  ASSERT_EQ(report.batches.size(), 1u);
  EXPECT_EQ(report.batches[0].chunks, 3);  // 12 rows = 5 + 5 + 2
  EXPECT_EQ(report.batches[0].rows, DemoShape::B);
}

TEST(InferRun, MissingCudaIsUnavailable) {
  InferOptions options;
  options.device = c10::Device(c10::kCUDA, 64);
  try {
    run_inference(options);
    ADD_FAILURE() << "cuda:64 accepted";
  } catch (const AppError& e) {
    EXPECT_EQ(e.code(), kExitUnavailable);
    EXPECT_NE(std::string(e.what()).find("--device cuda:64"),
              std::string::npos);
  }
}

TEST(InferRun, TensorParallelNeedsItsGpus) {
  const int64_t gpus = at::hasCUDA() ? at::getNumGPUs() : 0;
  InferOptions options;
  options.tensor_parallel = static_cast<int>(gpus) + 1;
  try {
    run_inference(options);
    ADD_FAILURE() << "more GPUs than the machine has were accepted";
  } catch (const AppError& e) {
    EXPECT_EQ(e.code(), kExitUnavailable);
    EXPECT_NE(std::string(e.what()).find("needs that many GPUs"),
              std::string::npos)
        << e.what();
  }
}

TEST(InferRun, TensorParallelMatchesOneGpu) {
  if (!at::hasCUDA() || at::getNumGPUs() < 2) {
    GTEST_SKIP() << "needs two CUDA devices";
  }
  InferOptions options;  // the demo: R = 4 heads over two GPUs
  options.tensor_parallel = 2;
  options.iters = 3;
  const auto report = run_inference(options);
  EXPECT_TRUE(report.passed);
  EXPECT_EQ(report.exit_code, kExitOk);
  EXPECT_EQ(report.device, "cuda:0");
  EXPECT_EQ(report.tensor_parallel, 2);
  ASSERT_EQ(report.ranks.size(), 2u);
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(report.ranks[p].rank, p);
    EXPECT_EQ(report.ranks[p].device, "cuda:" + std::to_string(p));
    EXPECT_GT(report.ranks[p].calls, 3);
    EXPECT_GT(report.ranks[p].partial_us, 0);
    EXPECT_GT(report.ranks[p].all_reduce_us, 0);
  }
  std::ostringstream json;
  print_json(report, json);
  EXPECT_NE(json.str().find("\"tensor_parallel\": 2"), std::string::npos);
  EXPECT_NE(json.str().find("\"all_reduce_us\""), std::string::npos);
}

}  // namespace
}  // namespace fgl::app
