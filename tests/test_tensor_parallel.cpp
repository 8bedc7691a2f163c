// fgl::tensor_parallel_gather_linear over a c10d process group of threads,
// whose backend sums the ranks' tensors in rank order (the tests' stand-in
// for NCCL; tests/python/test_parallel.py runs Gloo process groups).
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "fgl/parallel/tensor_parallel.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

// What the ranks of one in-process group share: each all-reduce waits for
// every rank's tensor, sums them in rank order, and hands the sum back.
class SharedSum {
 public:
  explicit SharedSum(int size) : inputs_(size) {}

  at::Tensor all_reduce(int rank, const at::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    inputs_[rank] = t;
    if (++arrived_ == static_cast<int>(inputs_.size())) {
      sum_ = inputs_[0].clone();
      for (size_t r = 1; r < inputs_.size(); ++r) sum_.add_(inputs_[r]);
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    return sum_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<at::Tensor> inputs_;
  at::Tensor sum_;
  int arrived_ = 0;
  int64_t round_ = 0;
};

class SummingBackend : public c10d::Backend {
 public:
  SummingBackend(int rank, int size, std::shared_ptr<SharedSum> shared)
      : Backend(rank, size), shared_(std::move(shared)) {}

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& /*options*/) override {
    for (auto& t : tensors) t.copy_(shared_->all_reduce(getRank(), t));
    return c10::make_intrusive<Done>();
  }

 private:
  // The sum is in place when allreduce returns.
  class Done : public c10d::Work {
   public:
    bool isCompleted() override { return true; }
    bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  };

  std::shared_ptr<SharedSum> shared_;
};

c10::intrusive_ptr<c10d::ProcessGroup> make_group(
    int rank, int size, const std::shared_ptr<SharedSum>& shared) {
  auto group = c10::make_intrusive<c10d::ProcessGroup>(
      c10::make_intrusive<c10d::HashStore>(), rank, size);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::CUSTOM,
                    c10::make_intrusive<SummingBackend>(rank, size, shared));
  return group;
}

TEST(TensorParallel, ShardHeadsAreContiguousAndCoverR) {
  const int64_t R = 7;
  const int world = 3;
  const int64_t want[][2] = {{0, 3}, {3, 5}, {5, 7}};
  for (int rank = 0; rank < world; ++rank) {
    const HeadRange heads = shard_heads(R, world, rank);
    EXPECT_EQ(heads.begin, want[rank][0]);
    EXPECT_EQ(heads.end, want[rank][1]);
  }
  EXPECT_THROW(shard_heads(4, 2, 2), c10::Error);
  EXPECT_THROW(shard_heads(2, 3, 0), c10::Error);
  EXPECT_THROW(shard_for_rank(at::randn({2, 3, 4}), at::randn({5, 9}), 2, 0),
               c10::Error);
}

TEST(TensorParallel, SumsOverRanksMatchTheReference) {
  // Uneven splits, one rank, B = 1, no bias, every dtype.
  const std::vector<Shape> shapes{{5, 4, 8, 6}, {7, 1, 16, 9}, {3, 2, 8, 4}};
  for (const int world : {1, 2, 3}) {
    for (const auto& s : shapes) {
      for (const auto dtype : supported_dtypes()) {
        for (const bool with_bias : {true, false}) {
          SCOPED_TRACE(::testing::Message()
                       << "world " << world << " " << s << " " << dtype
                       << " bias " << with_bias);
          const auto x = random_tensor({s.R, s.B, s.H}, dtype, at::kCPU);
          const auto w = random_tensor({s.K, s.R * s.H}, dtype, at::kCPU);
          const std::optional<at::Tensor> b =
              with_bias ? std::optional(random_tensor({s.K}, dtype, at::kCPU))
                        : std::nullopt;
          auto shared = std::make_shared<SharedSum>(world);
          std::vector<at::Tensor> outs(world);
          std::vector<std::thread> ranks;
          for (int rank = 0; rank < world; ++rank) {
            ranks.emplace_back([&, rank] {
              const auto [xs, ws] = shard_for_rank(x, w, world, rank);
              outs[rank] = tensor_parallel_gather_linear(
                  xs, ws, b, make_group(rank, world, shared));
            });
          }
          for (auto& t : ranks) t.join();
          const auto ref = reference_gather_linear(x, w, b);
          const auto scale = reference_gather_linear(
              x.abs(), w.abs(),
              b ? std::optional(b->abs()) : std::optional<at::Tensor>());
          for (int rank = 0; rank < world; ++rank) {
            EXPECT_TRUE(matches_reference(outs[rank], ref, scale));
            EXPECT_TRUE(at::equal(outs[rank], outs[0]));
          }
        }
      }
    }
  }
}

TEST(TensorParallel, ErrorsNameTheRank) {
  auto shared = std::make_shared<SharedSum>(1);
  try {
    tensor_parallel_gather_linear(at::randn({2, 3, 4}), at::randn({5, 9}),
                                  std::nullopt, make_group(0, 1, shared));
    ADD_FAILURE() << "a misshapen weight was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: "), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fgl::testing
