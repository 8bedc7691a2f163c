#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace fgl::app::log {

namespace {

struct LevelName {
  Level level;
  const char* name;
  spdlog::level::level_enum spdlog_level;
};

constexpr LevelName kLevelNames[] = {
    {Level::kTrace, "trace", spdlog::level::trace},
    {Level::kDebug, "debug", spdlog::level::debug},
    {Level::kInfo, "info", spdlog::level::info},
    {Level::kWarn, "warn", spdlog::level::warn},
    {Level::kError, "error", spdlog::level::err},
    {Level::kOff, "off", spdlog::level::off}};

}  // namespace

const char* level_name(Level level) {
  for (const auto& l : kLevelNames) {
    if (l.level == level) return l.name;
  }
  return "?";
}

std::string level_names() {
  std::string names;
  for (const auto& l : kLevelNames) {
    names += (names.empty() ? "" : ", ") + std::string(l.name);
  }
  return names;
}

std::optional<Level> parse_level(const std::string& name) {
  const std::string known = name == "warning" ? "warn" : name;
  for (const auto& l : kLevelNames) {
    if (known == l.name) return l.level;
  }
  return std::nullopt;
}

void init(Level level) {
  spdlog::drop("fgl_infer");  // init may run more than once in a process
  auto logger = spdlog::stderr_color_mt("fgl_infer");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  for (const auto& l : kLevelNames) {
    if (l.level == level) logger->set_level(l.spdlog_level);
  }
  spdlog::set_default_logger(logger);
}

void debug(const std::string& message) { spdlog::debug(message); }
void info(const std::string& message) { spdlog::info(message); }
void warn(const std::string& message) { spdlog::warn(message); }

}  // namespace fgl::app::log
