// Stop strings over streamed text: text that could still grow into a stop string is held back,
// so a stop string that spans tokens never reaches the reader, not even in part. The engine
// (engine.hpp) runs every stream's text through one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace iron::models {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  /// Adds `text`; returns what can be sent now: everything before the first stop string once one
  /// is complete (then stopped() and nothing more), else all but the longest tail that begins a
  /// stop string.
  std::string push(std::string_view text);
  /// The end of the text: what was held back (no stop string can complete any more).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace iron::models
