#include "fgl/parallel/tensor_parallel.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "fgl/gather_linear.h"

namespace fgl {

HeadRange shard_heads(int64_t R, int world_size, int rank) {
  TORCH_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
              "shard_heads: rank ", rank, " is not in a group of ", world_size);
  TORCH_CHECK(R >= world_size, "shard_heads: R = ", R,
              " heads cannot be split over ", world_size,
              " ranks (every rank needs one)");
  const int64_t base = R / world_size;
  const int64_t extra = R % world_size;
  HeadRange heads;
  heads.begin = rank * base + std::min<int64_t>(rank, extra);
  heads.end = heads.begin + base + (rank < extra ? 1 : 0);
  return heads;
}

std::pair<at::Tensor, at::Tensor> shard_for_rank(const at::Tensor& x,
                                                 const at::Tensor& weight,
                                                 int world_size, int rank) {
  TORCH_CHECK(x.dim() == 3, "shard_for_rank: x must be (R, B, H), got ",
              x.sizes());
  const int64_t R = x.size(0);
  const int64_t H = x.size(2);
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == R * H,
              "shard_for_rank: weight must be (K, R*H) = (K, ", R * H,
              ") for x ", x.sizes(), ", got ", weight.sizes());
  const HeadRange heads = shard_heads(R, world_size, rank);
  return {x.narrow(0, heads.begin, heads.size()),
          weight.narrow(1, heads.begin * H, heads.size() * H)};
}

at::Tensor partial_gather_linear(const at::Tensor& x_shard,
                                 const at::Tensor& weight_shard,
                                 const std::optional<at::Tensor>& bias,
                                 int rank) {
  try {
    return gather_linear(x_shard, weight_shard,
                         rank == 0 ? bias : std::nullopt);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "tensor_parallel_gather_linear: rank ", rank, ": ",
                e.what_without_backtrace());
  }
}

void sum_partials(at::Tensor& partial,
                  const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  TORCH_CHECK(group, "tensor_parallel_gather_linear: no process group");
  if (group->getSize() == 1) return;  // one rank's partial is the sum
  std::vector<at::Tensor> partials{partial};
  try {
    group->allreduce(partials)->wait();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "tensor_parallel_gather_linear: rank ", group->getRank(),
                ": the all-reduce of the partial outputs ", partial.sizes(),
                " ", partial.scalar_type(),
                " failed (a rank died, timed out, or passed another "
                "shape): ",
                e.what());
  }
}

at::Tensor tensor_parallel_gather_linear(
    const at::Tensor& x_shard, const at::Tensor& weight_shard,
    const std::optional<at::Tensor>& bias,
    const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  TORCH_CHECK(group, "tensor_parallel_gather_linear: no process group");
  at::Tensor out =
      partial_gather_linear(x_shard, weight_shard, bias, group->getRank());
  sum_partials(out, group);
  return out;
}

}  // namespace fgl
