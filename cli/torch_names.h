// The names users type for dtypes and devices on fgl_infer's and fgl_bench's
// command lines (PyTorch's own, and its usual aliases), parsed into c10
// types in one place.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace fgl::cli {

/// The dtypes parse_dtype takes, as help texts and errors list them.
constexpr const char* kDtypeNames =
    "float32, float16, bfloat16, float64 (also fp32, float, fp16, half, bf16, "
    "fp64, double)";

/// float32, FP16, bf16, double, ... (any case) to its type; nullopt for any
/// other name.
std::optional<c10::ScalarType> parse_dtype(const std::string& name);

/// The devices parse_device takes, as help texts and errors list them.
constexpr const char* kDeviceNames = "cpu, cuda or cuda:N";

/// cpu, cuda (cuda:0) or cuda:N; nullopt for any other name. Whether the
/// device exists is the caller's question.
std::optional<c10::Device> parse_device(const std::string& name);

}  // namespace fgl::cli
