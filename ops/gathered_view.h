// The gathered [B, R*H] matrix as a view of x, where x's strides already
// place head r's h values right after head r-1's: a batch-major [B, R, H]
// buffer permuted to [R, B, H] (the attention output projection's usual
// input), or any contiguous x with B == 1 (decode). There one GEMM reads x
// in place, with no concatenation and no per-slice passes.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace fgl::detail {

/// x [R, B, H] as a [B, R*H] view of the same memory, or nullopt when its
/// strides allow none (e.g. a contiguous x with B > 1).
std::optional<at::Tensor> gathered_view(const at::Tensor& x);

/// Whether gathered_view(x) has a value, without building a tensor (the
/// routing policies ask on every call).
bool has_gathered_view(const at::Tensor& x);

}  // namespace fgl::detail
