// fgl::gather_linear tensor-parallel, split the way Megatron-LM's
// row-parallel linear splits a projection: rank p of a process group holds
// the heads r in [r_p, r_{p+1}) of x and the matching weight columns
// W[:, r_p*H : r_{p+1}*H]; each runs the op on its shard (the bias on rank 0
// only) and one all-reduce sums the partial outputs. R is the shard
// dimension, so no rank builds a concatenation either. The group is c10d's
// (ProcessGroupNCCL on GPUs, or any backend that sums the dtype).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

namespace fgl {

/// Heads [begin, end) of x's R.
struct HeadRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// The heads `rank` of `world_size` holds: contiguous, the first
/// R % world_size ranks one more than the others. Throws c10::Error when
/// rank is not in the group or R < world_size.
HeadRange shard_heads(int64_t R, int world_size, int rank);

/// `rank`'s shard of x (R, B, H) and of weight (K, R*H): views, no copies.
std::pair<at::Tensor, at::Tensor> shard_for_rank(const at::Tensor& x,
                                                 const at::Tensor& weight,
                                                 int world_size, int rank);

/// linear(cat(x.unbind(0), -1), weight, bias) from this rank's shards
/// (shard_for_rank), summed over `group` by one all-reduce: every rank gets
/// the (B, K) result. Every rank passes the same bias (or none); rank 0 adds
/// it. Errors (c10::Error) say which rank raised them; a rank that dies
/// makes the others fail when the group's timeout runs out.
at::Tensor tensor_parallel_gather_linear(
    const at::Tensor& x_shard, const at::Tensor& weight_shard,
    const std::optional<at::Tensor>& bias,
    const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// tensor_parallel_gather_linear's two halves, for callers that time or
/// overlap them: `rank`'s partial output (the bias on rank 0 only) ...
at::Tensor partial_gather_linear(const at::Tensor& x_shard,
                                 const at::Tensor& weight_shard,
                                 const std::optional<at::Tensor>& bias,
                                 int rank);

/// ... and the partials summed in place over `group` (one all-reduce),
/// waited for on the current stream.
void sum_partials(at::Tensor& partial,
                  const c10::intrusive_ptr<c10d::ProcessGroup>& group);

}  // namespace fgl
