#include "fgl/parallel/tensor_parallel_runner.h"

#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
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

// The times of a rank's call: marks between its phases, taken by events on
// the device's current stream (no host wait between the phases) or, on the
// CPU, where the op has finished when it returns, by the host clock.
class PhaseClock {
 public:
  static constexpr int kMarks = 3;  // start, partial product, all-reduce

  explicit PhaseClock(const c10::Device& device) : device_(device) {
    if (!device.is_cpu()) {
      for (int i = 0; i < kMarks; ++i) {
        events_.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
      }
    }
  }

  void mark(int i) {
    if (device_.is_cpu()) {
      host_[i] = Clock::now();
    } else {
      events_[i].record(
          c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
    }
  }

  // Waits for the work before the last mark; then the microseconds between
  // marks i and i + 1.
  void wait() {
    if (!device_.is_cpu()) events_[kMarks - 1].synchronize();
  }
  double us(int i) const {
    return device_.is_cpu() ? microseconds(host_[i + 1] - host_[i])
                            : 1000.0 * events_[i].elapsedTime(events_[i + 1]);
  }

 private:
  c10::Device device_;
  std::vector<c10::Event> events_;
  Clock::time_point host_[kMarks];
};

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

// How long a thread that waits for a round, or for the ranks to finish one,
// checks before it sleeps: waking a sleeping thread cost more than a decode
// call's partial product (bench/NOTES.md, "The runner's hand-offs"), and
// calls in a loop come sooner than this.
constexpr auto kSpin = std::chrono::microseconds(200);

// Waits until `ready()`, which reads atomics set under `lock`'s mutex before
// `cv` is notified: checked without the mutex for kSpin, then asleep on `cv`.
// Returns with the mutex held.
template <typename Ready>
void wait_on(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
             Ready ready) {
  for (const auto until = Clock::now() + kSpin;
       !ready() && Clock::now() < until;) {
    std::this_thread::yield();
  }
  lock.lock();
  cv.wait(lock, ready);
}

// The device a rank's thread makes current: its own, but for the CPU.
std::optional<c10::Device> current_on_thread(const c10::Device& device) {
  return device.is_cpu() ? std::nullopt : std::optional(device);
}

}  // namespace

// Rank 0 runs on the calling thread (its device current there, on that
// thread's current stream), so a call hands work only to the other ranks:
// one rank takes no hand-off at all.
struct TensorParallelRunner::State {
  std::vector<c10::Device> devices;
  GroupFactory make_group;
  int64_t R = 0, H = 0;
  std::vector<at::Tensor> weight_shards;
  std::optional<at::Tensor> bias;  // on devices[0], added by rank 0
  // A rank's group and clock, used on its thread only (rank 0's on the
  // caller's).
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> groups;
  std::vector<PhaseClock> clocks;

  std::mutex calls;  // one call at a time: rank 0 is the caller's thread
  std::mutex mutex;
  std::condition_variable posted, finished;
  std::atomic<int64_t> generation{0};  // rounds posted so far
  std::atomic<bool> stopping{false};
  at::Tensor x;                            // the round's input
  std::atomic<int> done{0};                // other ranks done with it
  at::Tensor result;                       // rank 0's sum, until returned
  std::vector<std::exception_ptr> errors;  // per rank, this round or setup
  std::vector<RankTime> times;             // sums; divided when read
  std::vector<std::thread> threads;        // ranks 1 .. world - 1

  int world() const { return static_cast<int>(devices.size()); }

  // Marks `rank` (not 0) done with the round or the setup.
  void finish(int rank, std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = std::move(error);
    if (++done == world() - 1) finished.notify_all();
  }

  // Waits for the other ranks, records rank 0's `error` and rethrows the
  // first error of the round, if any.
  void wait_for_ranks(std::exception_ptr error) {
    std::unique_lock<std::mutex> lock(mutex, std::defer_lock);
    wait_on(lock, finished, [&] { return done == world() - 1; });
    errors[0] = std::move(error);
    x = at::Tensor();
    for (const auto& e : errors) {
      if (!e) continue;
      const auto round_errors = errors;
      lock.unlock();
      rethrow_first(round_errors);
    }
  }

  // Rank `rank`'s part of a round: the setup's all-reduce, on which NCCL
  // makes its communicators (call_x undefined), or its share of a call.
  void take_part(int rank, const at::Tensor& call_x) {
    const c10::Device& device = devices[rank];
    PhaseClock& clock = clocks[rank];
    if (!call_x.defined()) {
      auto probe = at::zeros({1}, at::TensorOptions().device(device));
      sum_partials(probe, groups[rank]);
      clock.mark(PhaseClock::kMarks - 1);
      clock.wait();
      return;
    }
    clock.mark(0);
    const HeadRange heads = shard_heads(R, world(), rank);
    const auto x_shard = call_x.narrow(0, heads.begin, heads.size()).to(device);
    at::Tensor out = partial_gather_linear(
        x_shard, weight_shards[rank], rank == 0 ? bias : std::nullopt, rank);
    clock.mark(1);
    sum_partials(out, groups[rank]);
    clock.mark(2);
    clock.wait();
    {
      std::lock_guard<std::mutex> lock(mutex);
      RankTime& t = times[rank];
      t.partial_us += clock.us(0);
      t.all_reduce_us += clock.us(1);
      ++t.calls;
    }
    if (rank == 0) result = std::move(out);
  }

  // A round: the other ranks' parts handed to their threads, rank 0's taken
  // here.
  void run_round(const at::Tensor& call_x) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      x = call_x;
      done = 0;
      ++generation;
    }
    posted.notify_all();
    std::exception_ptr error;
    try {
      const c10::OptionalDeviceGuard guard(current_on_thread(devices[0]));
      take_part(0, call_x);
    } catch (...) {
      error = std::current_exception();
    }
    wait_for_ranks(error);
  }

  // Rank `rank`'s thread (not 0): makes its group, then takes its part of
  // each round.
  void serve(int rank) {
    const c10::OptionalDeviceGuard guard(current_on_thread(devices[rank]));
    try {
      groups[rank] = make_group(rank);
      finish(rank, nullptr);
    } catch (...) {
      finish(rank, std::current_exception());
      return;
    }
    int64_t seen = 0;
    for (;;) {
      at::Tensor call_x;
      {
        std::unique_lock<std::mutex> lock(mutex, std::defer_lock);
        wait_on(lock, posted, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        call_x = x;
      }
      std::exception_ptr error;
      try {
        take_part(rank, call_x);
      } catch (...) {
        error = std::current_exception();
      }
      finish(rank, error);
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
  s.make_group = std::move(groups);
  s.H = H;
  s.R = weight.size(1) / H;
  const int world = s.world();
  s.clocks.reserve(world);
  for (int rank = 0; rank < world; ++rank) {
    const HeadRange heads = shard_heads(s.R, world, rank);
    s.weight_shards.push_back(
        weight.narrow(1, heads.begin * H, heads.size() * H)
            .to(s.devices[rank])
            .contiguous());
    s.times.push_back(RankTime{rank, s.devices[rank]});
    s.clocks.emplace_back(s.devices[rank]);
  }
  if (bias) s.bias = bias->to(s.devices[0]);
  s.groups.resize(world);
  s.errors.resize(world);
  // Every rank makes its group at once (NCCL's setup needs them all), the
  // others on their threads; then the setup's all-reduce.
  for (int rank = 1; rank < world; ++rank) {
    s.threads.emplace_back([&s, rank] { s.serve(rank); });
  }
  try {
    std::exception_ptr error;
    try {
      const c10::OptionalDeviceGuard guard(current_on_thread(s.devices[0]));
      s.groups[0] = s.make_group(0);
    } catch (...) {
      error = std::current_exception();
    }
    s.wait_for_ranks(error);
    s.run_round(at::Tensor());
  } catch (...) {
    s.stop();
    throw;
  }
}

TensorParallelRunner::~TensorParallelRunner() { state_->stop(); }

int TensorParallelRunner::world_size() const { return state_->world(); }

at::Tensor TensorParallelRunner::operator()(const at::Tensor& x) {
  State& s = *state_;
  TORCH_CHECK(x.dim() == 3 && x.size(0) == s.R && x.size(2) == s.H,
              "tensor parallel: x must be (R, B, H) = (", s.R, ", B, ", s.H,
              ") for the weight, got ", x.sizes());
  std::lock_guard<std::mutex> call(s.calls);
  s.run_round(x);
  return std::move(s.result);
}

void TensorParallelRunner::reset_rank_times() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (auto& t : state_->times) t = RankTime{t.rank, t.device};
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
