#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace fgl::app::log {

bool init(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    return false;
  }
  spdlog::drop("fgl_infer");  // init may run more than once in a process
  auto logger = spdlog::stderr_color_mt("fgl_infer");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return true;
}

void debug(const std::string& message) { spdlog::debug(message); }
void info(const std::string& message) { spdlog::info(message); }
void warn(const std::string& message) { spdlog::warn(message); }

}  // namespace fgl::app::log
