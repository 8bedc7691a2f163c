// Logging to stderr through spdlog, so stdout carries only results.
// NOTE: Debian's spdlog is built on the system fmt, which clashes with the
// newer fmt bundled in libtorch's headers; only log.cpp includes spdlog, and
// it includes no torch header.
#pragma once

#include <string>

namespace fgl::app::log {

/// Level names accepted by --log-level.
constexpr const char* kLevels = "trace, debug, info, warn, error, off";

/// Sends logs to stderr at `level`; false when `level` is not in kLevels.
bool init(const std::string& level);

void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);

}  // namespace fgl::app::log
