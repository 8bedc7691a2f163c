#include "fgl/parallel/tensor_parallel_runner.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "fgl/parallel/tensor_parallel.h"

namespace fgl {
namespace {

using Clock = std::chrono::steady_clock;

double microseconds(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Waits until the work queued on `device` is done (a no-op on the CPU, where
// the op has finished when it returns).
void synchronize(const c10::Device& device) {
  if (!device.is_cpu()) {
    c10::impl::getDeviceGuardImpl(device.type())
        ->synchronizeDevice(device.index());
  }
}

// The first error, in rank order, with the rank named when its message
// does not already (errors from tensor_parallel.h do).
[[noreturn]] void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (size_t rank = 0; rank < errors.size(); ++rank) {
    if (!errors[rank]) continue;
    try {
      std::rethrow_exception(errors[rank]);
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      const std::string named = "rank " + std::to_string(rank) + ": ";
      TORCH_CHECK(what.find(named) != std::string::npos,
                  "tensor parallel: ", named, what);
      throw;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "tensor parallel: rank ", rank, ": ", e.what());
    }
  }
  TORCH_CHECK(false, "tensor parallel: no rank failed");
}

}  // namespace

struct TensorParallelRunner::State {
  std::vector<c10::Device> devices;
  GroupFactory groups;
  int64_t R = 0, H = 0;
  std::vector<at::Tensor> weight_shards;
  std::optional<at::Tensor> bias;  // on devices[0], added by rank 0

  std::mutex mutex;
  std::condition_variable posted, finished;
  int64_t generation = 0;  // calls posted so far
  bool stopping = false;
  at::Tensor x;                            // the call's input
  int done = 0;                            // ranks done with the call
  std::vector<at::Tensor> results;         // each rank's summed output
  std::vector<std::exception_ptr> errors;  // per rank, this call or setup
  std::vector<RankTime> times;             // sums; divided when read
  std::vector<std::thread> threads;

  int world() const { return static_cast<int>(devices.size()); }

  // Marks `rank` done with the call or the setup.
  void finish(int rank, std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = std::move(error);
    if (++done == world()) finished.notify_all();
  }

  void wait_for_ranks(std::unique_lock<std::mutex>& lock) {
    finished.wait(lock, [&] { return done == world(); });
  }

  void serve(int rank) {
    const c10::Device device = devices[rank];
    c10::OptionalDeviceGuard guard;
    if (!device.is_cpu()) guard.reset_device(device);
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    try {
      group = groups(rank);
      finish(rank, nullptr);
    } catch (...) {
      finish(rank, std::current_exception());
      return;
    }
    int64_t seen = 0;
    for (;;) {
      at::Tensor call_x;
      {
        std::unique_lock<std::mutex> lock(mutex);
        posted.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        call_x = x;
      }
      try {
        const auto start = Clock::now();
        const HeadRange heads = shard_heads(R, world(), rank);
        const auto x_shard =
            call_x.narrow(0, heads.begin, heads.size()).to(device);
        at::Tensor out =
            partial_gather_linear(x_shard, weight_shards[rank],
                                  rank == 0 ? bias : std::nullopt, rank);
        synchronize(device);
        const auto partial_done = Clock::now();
        sum_partials(out, group);
        synchronize(device);
        const auto summed = Clock::now();
        RankTime& t = times[rank];
        t.partial_us += microseconds(partial_done - start);
        t.all_reduce_us += microseconds(summed - partial_done);
        ++t.calls;
        results[rank] = std::move(out);
        finish(rank, nullptr);
      } catch (...) {
        finish(rank, std::current_exception());
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    posted.notify_all();
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

TensorParallelRunner::TensorParallelRunner(
    std::vector<c10::Device> devices, GroupFactory groups,
    const at::Tensor& weight, const std::optional<at::Tensor>& bias, int64_t H)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  TORCH_CHECK(!devices.empty(), "tensor parallel: no devices");
  TORCH_CHECK(weight.dim() == 2 && H > 0 && weight.size(1) % H == 0,
              "tensor parallel: weight must be (K, R*H) for H = ", H, ", got ",
              weight.sizes());
  s.devices = std::move(devices);
  s.groups = std::move(groups);
  s.H = H;
  s.R = weight.size(1) / H;
  const int world = s.world();
  for (int rank = 0; rank < world; ++rank) {
    const HeadRange heads = shard_heads(s.R, world, rank);
    s.weight_shards.push_back(
        weight.narrow(1, heads.begin * H, heads.size() * H)
            .to(s.devices[rank])
            .contiguous());
    s.times.push_back(RankTime{rank, s.devices[rank]});
  }
  if (bias) s.bias = bias->to(s.devices[0]);
  s.results.resize(world);
  s.errors.resize(world);
  // Every rank makes its group at once, on its own thread.
  for (int rank = 0; rank < world; ++rank) {
    s.threads.emplace_back([&s, rank] { s.serve(rank); });
  }
  std::unique_lock<std::mutex> lock(s.mutex);
  s.wait_for_ranks(lock);
  for (const auto& e : s.errors) {
    if (!e) continue;
    lock.unlock();
    const auto errors = s.errors;
    s.stop();
    rethrow_first(errors);
  }
}

TensorParallelRunner::~TensorParallelRunner() { state_->stop(); }

int TensorParallelRunner::world_size() const { return state_->world(); }

at::Tensor TensorParallelRunner::operator()(const at::Tensor& x) {
  State& s = *state_;
  TORCH_CHECK(x.dim() == 3 && x.size(0) == s.R && x.size(2) == s.H,
              "tensor parallel: x must be (R, B, H) = (", s.R, ", B, ", s.H,
              ") for the weight, got ", x.sizes());
  std::unique_lock<std::mutex> lock(s.mutex);
  s.x = x;
  s.done = 0;
  ++s.generation;
  s.posted.notify_all();
  s.wait_for_ranks(lock);
  s.x = at::Tensor();
  for (const auto& e : s.errors) {
    if (e) rethrow_first(s.errors);
  }
  return s.results[0];
}

std::vector<RankTime> TensorParallelRunner::rank_times() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<RankTime> means = state_->times;
  for (auto& t : means) {
    if (t.calls > 0) {
      t.partial_us /= t.calls;
      t.all_reduce_us /= t.calls;
    }
  }
  return means;
}

}  // namespace fgl
