#include "test_support.h"

#include <ATen/Context.h>
#include <caffe2/serialize/inline_container.h>

#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>

namespace fgl::testing {
namespace {

// Seeds every generator from the OS once per test program, so each run draws
// fresh data; FGL_TEST_SEED=<n> replays a failing run.
class FreshSeed : public ::testing::Environment {
 public:
  void SetUp() override {
    uint64_t seed = std::random_device{}();
    if (const char* env = std::getenv("FGL_TEST_SEED")) {
      seed = std::strtoull(env, nullptr, 10);
    }
    std::cout << "fgl tests: random seed " << seed
              << " (set FGL_TEST_SEED to replay)\n";
    at::manual_seed(seed);
  }
};
const auto* const kFreshSeed =
    ::testing::AddGlobalTestEnvironment(new FreshSeed);

double rtol_for(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return 1e-12;
    case at::kFloat:
      return 2e-5;  // fp32-accurate; TF32 would land near 1e-3
    case at::kHalf:
      return 2e-3;  // one fp16 rounding of the result is 4.9e-4
    case at::kBFloat16:
      return 1e-2;  // one bf16 rounding of the result is 3.9e-3
    default:
      return 0.0;
  }
}

// `limit(std::numeric_limits<T>{})` for the element type T of `dtype`
// (0 for dtypes the kernels do not take).
template <typename Limit>
double dtype_limit(at::ScalarType dtype, Limit limit) {
  switch (dtype) {
    case at::kDouble:
      return limit(std::numeric_limits<double>{});
    case at::kFloat:
      return limit(std::numeric_limits<float>{});
    case at::kHalf:
      return limit(std::numeric_limits<at::Half>{});
    case at::kBFloat16:
      return limit(std::numeric_limits<at::BFloat16>{});
    default:
      return 0.0;
  }
}

// The spacing of each dtype's subnormals: below its smallest normal value
// rounding errs by up to half of it, however small the value.
double subnormal_spacing(at::ScalarType dtype) {
  return dtype_limit(dtype, [](auto l) {
    return static_cast<double>(decltype(l)::denorm_min());
  });
}

// Machine epsilon of each dtype (the spacing of values at 1).
double eps_for(at::ScalarType dtype) {
  return dtype_limit(dtype, [](auto l) {
    return static_cast<double>(decltype(l)::epsilon());
  });
}

}  // namespace

at::Tensor reference_gather_linear(const at::Tensor& x,
                                   const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias) {
  const auto x64 = x.cpu().to(at::kDouble);
  const auto w64 = weight.cpu().to(at::kDouble);
  std::optional<at::Tensor> b64;
  if (bias.has_value() && bias->defined()) {
    b64 = bias->cpu().to(at::kDouble);
  }
  at::Tensor gathered = x64.size(0) == 0
                            ? at::zeros({x64.size(1), 0}, x64.options())
                            : at::cat(x64.unbind(0), -1);  // [B, R*H]
  return at::linear(gathered, w64, b64);
}

std::vector<char> torch_archive(
    const std::vector<std::pair<std::string, std::string>>& records) {
  std::vector<char> zip;
  caffe2::serialize::PyTorchStreamWriter writer(
      [&](const void* data, size_t n) {
        const auto* bytes = static_cast<const char*>(data);
        zip.insert(zip.end(), bytes, bytes + n);
        return n;
      });
  for (const auto& [name, bytes] : records) {
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return zip;
}

at::Tensor random_tensor(at::IntArrayRef sizes, at::ScalarType dtype,
                         const at::Device& device) {
  return at::randn(sizes, at::TensorOptions().dtype(at::kDouble))
      .to(dtype)
      .to(device);
}

::testing::AssertionResult matches_reference(const at::Tensor& out,
                                             const at::Tensor& ref,
                                             const at::Tensor& ref_abs) {
  if (out.sizes() != ref.sizes()) {
    return ::testing::AssertionFailure()
           << "shape " << out.sizes() << " != reference " << ref.sizes();
  }
  if (ref.numel() == 0) {
    return ::testing::AssertionSuccess();
  }
  const double rtol = rtol_for(out.scalar_type());
  const auto out64 = out.cpu().to(at::kDouble);
  const double rms = ref.pow(2).mean().sqrt().item<double>();
  const auto err = (out64 - ref).abs();
  // A result among the subnormals (a single product drawn near zero) is
  // rounded to their absolute spacing.
  auto bound = rtol * (ref.abs() + rms) + subnormal_spacing(out.scalar_type());
  if (ref_abs.defined()) {
    bound = bound + 4 * eps_for(out.scalar_type()) * ref_abs;
  }
  // `err <= bound` is false for NaN, so an unwritten poisoned element fails.
  const bool ok = (err <= bound).all().item<bool>();
  if (ok) {
    return ::testing::AssertionSuccess();
  }
  const auto worst = (err / (ref.abs() + rms)).nan_to_num(1e300).max();
  return ::testing::AssertionFailure()
         << "max scaled error " << worst.item<double>() << " > rtol " << rtol
         << " (" << out.scalar_type() << ", " << out.sizes() << "), NaN count "
         << out64.isnan().sum().item<int64_t>();
}

std::vector<at::Device> available_devices() {
  std::vector<at::Device> devices{at::kCPU};
  if (at::hasCUDA()) {
    for (size_t i = 0; i < at::getNumGPUs(); ++i) {
      devices.emplace_back(at::kCUDA, static_cast<c10::DeviceIndex>(i));
    }
  }
  return devices;
}

std::vector<at::ScalarType> supported_dtypes() {
  return {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
}

}  // namespace fgl::testing
