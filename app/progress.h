// A one-line progress indicator on stderr for runs over many batches. It
// draws only when stderr is a terminal, so logs and pipes stay clean.
#pragma once

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

}  // namespace fgl::app
