// fgl::tensor_parallel_gather_linear and TensorParallelRunner over a c10d
// process group of threads whose backend sums the ranks' tensors in rank
// order (the tests' stand-in for NCCL, which runs where there are two GPUs;
// tests/python/test_parallel.py runs Gloo and NCCL process groups).
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "fgl/parallel/nccl_groups.h"
#include "fgl/parallel/tensor_parallel.h"
#include "fgl/parallel/tensor_parallel_runner.h"
#include "test_support.h"

namespace fgl::testing {
namespace {

// What the ranks of one in-process group share: each all-reduce waits for
// every rank's tensor, sums them in rank order, and hands the sum back.
class SharedSum {
 public:
  explicit SharedSum(int size) : inputs_(size), threads_(size) {}

  // The thread of `rank`'s last all-reduce.
  std::thread::id thread_of(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_[rank];
  }

  at::Tensor all_reduce(int rank, const at::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    inputs_[rank] = t;
    threads_[rank] = std::this_thread::get_id();
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
  std::vector<std::thread::id> threads_;
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

// Groups of `world` ranks over one SharedSum.
GroupFactory summing_groups(int world) {
  auto shared = std::make_shared<SharedSum>(world);
  return [shared, world](int rank) { return make_group(rank, world, shared); };
}

// Runs `shapes` through a runner over `devices` and checks each result
// against the float64 reference; x is a permuted (non-contiguous) view.
void expect_runner_matches_reference(const std::vector<c10::Device>& devices,
                                     const GroupFactory& groups,
                                     const std::vector<Shape>& shapes,
                                     c10::ScalarType dtype, bool with_bias) {
  const int world = static_cast<int>(devices.size());
  for (const auto& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "world " << world << " " << s << " "
                                      << dtype << " bias " << with_bias);
    const auto w = random_tensor({s.K, s.R * s.H}, dtype, at::kCPU);
    const std::optional<at::Tensor> b =
        with_bias ? std::optional(random_tensor({s.K}, dtype, at::kCPU))
                  : std::nullopt;
    TensorParallelRunner runner(devices, groups, w, b, s.H);
    EXPECT_EQ(runner.world_size(), world);
    for (const int64_t B : {s.B, s.B + 2}) {
      const auto x =
          random_tensor({B, s.R, s.H}, dtype, at::kCPU).permute({1, 0, 2});
      const auto out = runner(x);
      EXPECT_EQ(out.device(), devices[0]);
      const auto ref = reference_gather_linear(x, w, b);
      const auto scale = reference_gather_linear(
          x.abs(), w.abs(),
          b ? std::optional(b->abs()) : std::optional<at::Tensor>());
      EXPECT_TRUE(matches_reference(out.cpu(), ref, scale));
    }
    for (const auto& t : runner.rank_times()) {
      EXPECT_EQ(t.calls, 2);
      EXPECT_EQ(t.device, devices[t.rank]);
      EXPECT_GE(t.partial_us, 0);
      EXPECT_GE(t.all_reduce_us, 0);
    }
  }
}

TEST(TensorParallelRunner, MatchesTheReference) {
  // Uneven splits, one rank, B = 1, no bias, every dtype.
  const std::vector<Shape> shapes{{5, 1, 8, 6}, {7, 3, 16, 9}};
  for (const int world : {1, 2, 3}) {
    const std::vector<c10::Device> cpus(world, c10::Device(c10::kCPU));
    for (const auto dtype : supported_dtypes()) {
      for (const bool with_bias : {true, false}) {
        expect_runner_matches_reference(cpus, summing_groups(world), shapes,
                                        dtype, with_bias);
      }
    }
  }
}

TEST(TensorParallelRunner, TakesRankZeroOnTheCallingThread) {
  const auto caller = std::this_thread::get_id();
  for (const int world : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    auto shared = std::make_shared<SharedSum>(world);
    std::mutex mutex;
    std::vector<std::thread::id> made_on(world);
    const GroupFactory groups = [&](int rank) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        made_on[rank] = std::this_thread::get_id();
      }
      return make_group(rank, world, shared);
    };
    const auto w = at::randn({6, 4 * 8});
    TensorParallelRunner runner(std::vector<c10::Device>(world, c10::kCPU),
                                groups, w, std::nullopt, 8);
    const auto x = at::randn({4, 3, 8});
    EXPECT_TRUE(at::allclose(runner(x), at::linear(at::cat(x.unbind(0), -1), w),
                             1e-5, 1e-5));
    EXPECT_EQ(made_on[0], caller);
    for (int rank = 1; rank < world; ++rank) {
      EXPECT_NE(made_on[rank], caller) << "rank " << rank;
      EXPECT_NE(made_on[rank], made_on[rank - 1]) << "rank " << rank;
      // The call's all-reduce ran on the thread that made the rank's group.
      EXPECT_EQ(shared->thread_of(rank), made_on[rank]) << "rank " << rank;
    }
    if (world > 1) {
      EXPECT_EQ(shared->thread_of(0), caller);
    }
  }
}

TEST(TensorParallelRunner, TakesCallsFromSeveralThreadsInTurn) {
  const auto w = at::randn({9, 5 * 8});
  const auto b = at::randn({9});
  TensorParallelRunner runner({c10::kCPU, c10::kCPU}, summing_groups(2), w, b,
                              8);
  std::vector<std::thread> callers;
  std::vector<int> wrong(3, 0);
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int call = 0; call < 20; ++call) {
        // Each caller its own B, so a result handed to another shows.
        const auto x = at::randn({5, 1 + c, 8});
        const auto out = runner(x);
        const auto ref = at::linear(at::cat(x.unbind(0), -1), w, b);
        if (out.sizes() != ref.sizes() || !at::allclose(out, ref, 1e-5, 1e-5)) {
          ++wrong[c];
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong, std::vector<int>(3, 0));
  for (const auto& t : runner.rank_times()) EXPECT_EQ(t.calls, 60);
}

TEST(TensorParallelRunner, RejectsAMisshapenXAndGoesOn) {
  const auto w = at::randn({6, 4 * 8});
  TensorParallelRunner runner({c10::kCPU, c10::kCPU}, summing_groups(2), w,
                              std::nullopt, 8);
  try {
    runner(at::randn({4, 2, 9}));
    ADD_FAILURE() << "x with the wrong H was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(4, B, 8)"), std::string::npos)
        << e.what();
  }
  const auto x = at::randn({4, 3, 8});
  EXPECT_TRUE(at::allclose(runner(x), at::linear(at::cat(x.unbind(0), -1), w),
                           1e-5, 1e-5));
}

TEST(TensorParallelRunner, ASetupThatFailsNamesTheRank) {
  const GroupFactory groups = [inner = summing_groups(2)](int rank) {
    if (rank == 1) throw std::runtime_error("no route to GPU 1");
    return inner(rank);
  };
  try {
    TensorParallelRunner runner({c10::kCPU, c10::kCPU}, groups,
                                at::randn({6, 32}), std::nullopt, 8);
    ADD_FAILURE() << "the setup did not fail";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1: no route to GPU 1"),
              std::string::npos)
        << e.what();
  }
  // R below the ranks: no shard for one of them.
  EXPECT_THROW(
      TensorParallelRunner({c10::kCPU, c10::kCPU, c10::kCPU}, summing_groups(3),
                           at::randn({6, 16}), std::nullopt, 8),
      c10::Error);
}

TEST(TensorParallelRunner, OverNcclOnTwoGpus) {
  if (!nccl_available()) {
    EXPECT_THROW(nccl_groups(2, std::chrono::seconds(10)), c10::Error);
    GTEST_SKIP() << "this build has no NCCL";
  }
  if (!at::hasCUDA() || at::getNumGPUs() < 2) {
    GTEST_SKIP() << "needs two CUDA devices";
  }
  const std::vector<c10::Device> gpus{{c10::kCUDA, 0}, {c10::kCUDA, 1}};
  for (const auto dtype : supported_dtypes()) {
    expect_runner_matches_reference(
        gpus, nccl_groups(2, std::chrono::seconds(60)),
        {{5, 1, 8, 6}, {32, 16, 128, 4096}}, dtype, true);
  }
}

}  // namespace
}  // namespace fgl::testing
