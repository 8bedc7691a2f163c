// One-line progress indicators on stderr: for runs over many batches, and
// for file reads that take long. They draw only when stderr is a terminal,
// so logs and pipes stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fgl::app {

class Progress {
 public:
  /// Runs with fewer steps than this finish too fast to need a bar.
  static constexpr int64_t kMinSteps = 4;

  Progress(std::string what, int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Counts one step and redraws "what [done/total] label".
  void step(const std::string& label);

 private:
  std::string what_;
  int64_t total_;
  int64_t done_ = 0;
  bool enabled_;
};

/// Draws "reading PATH: N of M MB" while files are read, once a read has
/// run for a second (short reads draw nothing), and clears the line when it
/// goes.
class ReadProgress {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kQuiet = std::chrono::seconds(1);
  static constexpr Clock::duration kRedraw = std::chrono::milliseconds(100);

  ReadProgress();
  ~ReadProgress();
  ReadProgress(const ReadProgress&) = delete;
  ReadProgress& operator=(const ReadProgress&) = delete;

  /// `read` of the `size` bytes of `path` have been read.
  void update(const std::string& path, uint64_t read, uint64_t size);

 private:
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_draw_;
};

}  // namespace fgl::app
