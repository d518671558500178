// Logging through spdlog. Not for .cu files (nvcc cannot compile fmt's format strings).
//
// The level comes from EMBER_LOG_LEVEL (trace, debug, info, warn, error, off; default info) and
// can be changed with set_log_level(). Messages go to stderr so stdout stays machine-readable.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace ember {

spdlog::logger& logger();
void set_log_level(std::string_view level);

// Logs `message` once per process for each distinct `key` (e.g. "ignored config key X").
void log_once(std::string_view key, spdlog::level::level_enum level, std::string_view message);

}  // namespace ember

#define EMBER_LOG_TRACE(...) ::ember::logger().trace(__VA_ARGS__)
#define EMBER_LOG_DEBUG(...) ::ember::logger().debug(__VA_ARGS__)
#define EMBER_LOG_INFO(...) ::ember::logger().info(__VA_ARGS__)
#define EMBER_LOG_WARN(...) ::ember::logger().warn(__VA_ARGS__)
#define EMBER_LOG_ERROR(...) ::ember::logger().error(__VA_ARGS__)
