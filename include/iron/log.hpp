// Messages IRON writes about its work (a new version compiled, a plan's size). Quiet unless the
// level allows: IRON_LOG=info (or debug) in the environment, or set_log_level().
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace iron {

enum class LogLevel { debug, info, warning, error, off };

void set_log_level(LogLevel level);
LogLevel log_level();
/// Where messages go (stderr by default); tests capture them here.
void set_log_sink(std::function<void(LogLevel, std::string_view)> sink);
void log(LogLevel level, const std::string& message);

}  // namespace iron
