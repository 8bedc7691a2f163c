// Tensor-parallel gather_linear from one process: rank 0 on the calling
// thread and a thread for each other rank, each with its device current and
// its own process group (NCCL over the GPUs of one machine: nccl_groups.h),
// the weight sharded across the ranks once.
// Each call shards x by heads, runs every rank's partial product and sums
// the partials with one all-reduce; rank 0's result is returned.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

namespace fgl {

/// Makes rank `rank`'s process group; called on that rank's thread (rank
/// 0's: the one that makes the runner), with its device current, every rank
/// at once (NCCL's setup needs them all).
using GroupFactory =
    std::function<c10::intrusive_ptr<c10d::ProcessGroup>(int rank)>;

/// Mean time a rank spent per call since the runner started (or
/// reset_rank_times): its partial product (x's shard moved to its device
/// included) and its all-reduce, as its device ran them.
struct RankTime {
  int rank = 0;
  c10::Device device = c10::Device(c10::kCPU);
  double partial_us = 0;
  double all_reduce_us = 0;
  int64_t calls = 0;
};

class TensorParallelRunner {
 public:
  /// Rank p runs on devices[p]. weight (K, R*H) and bias (K) are sharded and
  /// copied to the ranks' devices now, and the groups run one all-reduce
  /// (NCCL makes its communicators on the first); R must be at least
  /// devices.size(). Throws c10::Error naming the rank whose setup failed.
  TensorParallelRunner(std::vector<c10::Device> devices, GroupFactory groups,
                       const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, int64_t H);
  ~TensorParallelRunner();
  TensorParallelRunner(const TensorParallelRunner&) = delete;
  TensorParallelRunner& operator=(const TensorParallelRunner&) = delete;

  int world_size() const;

  /// linear(cat(x.unbind(0), -1), weight, bias) for x (R, B, H) on any
  /// device, on devices[0], complete when it returns. Rank 0 runs on this
  /// thread, on its current stream of devices[0]; calls from several
  /// threads take turns. Throws c10::Error naming the first rank that
  /// failed.
  at::Tensor operator()(const at::Tensor& x);

  std::vector<RankTime> rank_times() const;
  void reset_rank_times();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fgl
