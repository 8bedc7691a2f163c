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

ReadProgress::ReadProgress()
    : enabled_(::isatty(STDERR_FILENO)), start_(Clock::now()) {}

ReadProgress::~ReadProgress() {
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

void ReadProgress::update(const std::string& path, uint64_t read,
                          uint64_t size) {
  if (!enabled_) {
    return;
  }
  const auto now = Clock::now();
  if (now - start_ < kQuiet || (drawn_ && now - last_draw_ < kRedraw)) {
    return;
  }
  last_draw_ = now;
  drawn_ = true;
  constexpr uint64_t kMb = uint64_t{1} << 20;
  std::fprintf(stderr, "\r\033[Kreading %s: %llu of %llu MB", path.c_str(),
               static_cast<unsigned long long>(read / kMb),
               static_cast<unsigned long long>(size / kMb));
  std::fflush(stderr);
}

}  // namespace fgl::app
