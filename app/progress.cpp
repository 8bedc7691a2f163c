#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace fgl::app {

Progress::Progress(std::string what, int64_t total)
    : what_(std::move(what)),
      total_(total),
      enabled_(total >= kMinSteps && ::isatty(STDERR_FILENO)) {}

Progress::~Progress() {
  if (enabled_ && done_ > 0) {
    std::fputc('\n', stderr);
  }
}

void Progress::step(const std::string& label) {
  ++done_;
  if (!enabled_) {
    return;
  }
  // \r and the erase-line escape redraw one line in place.
  std::fprintf(stderr, "\r\033[K%s [%lld/%lld] %3d%% %s", what_.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_),
               static_cast<int>(100 * done_ / total_), label.c_str());
  std::fflush(stderr);
}

}  // namespace fgl::app
