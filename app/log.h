// Logging to stderr through spdlog, so stdout carries only results.
// NOTE: Debian's spdlog is built on the system fmt, which clashes with the
// newer fmt bundled in libtorch's headers; only log.cpp includes spdlog, and
// it includes no torch header.
#pragma once

#include <optional>
#include <string>

namespace fgl::app::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// "info", ...: the name --log-level takes for `level`.
const char* level_name(Level level);

/// The level names --log-level takes, "trace, debug, ..., off".
std::string level_names();

/// A level by its lowercase name ("warning" is warn); nullopt otherwise.
std::optional<Level> parse_level(const std::string& name);

/// Sends logs to stderr at `level`.
void init(Level level);

void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);

}  // namespace fgl::app::log
