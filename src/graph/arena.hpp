// The arena: the memory one graph's versions share. Scratch (sized to the largest version),
// states (placed once, zero at first) and weights (uploaded once each).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/recording.hpp"

namespace iron {

class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// Grows the scratch region to at least `bytes`; a growth moves it (generation() changes) and
  /// every version relinks before its next call.
  void reserve_scratch(int64_t bytes);
  char* scratch() { return scratch_.get(); }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  uint64_t generation() const { return generation_; }

  /// Where a resident lives: a state is allocated (zeroed) on first use; a weight is uploaded on
  /// first use. On the CPU an upload of a weight already in its dtype is its mapped memory.
  char* place(const std::shared_ptr<Resident>& resident);
  /// Weights uploaded so far (each once per graph, whichever version asked first).
  int64_t uploads() const { return uploads_; }
  /// Each weight uploaded so far, by path, and how often (again only after a release()).
  const std::vector<std::pair<std::string, int64_t>>& uploads_by_weight() const { return uploads_by_weight_; }
  int64_t state_bytes() const { return state_bytes_; }
  void release();

 private:
  struct Placed {
    Resident* resident;
    std::shared_ptr<Resident> keep;
    char* address;
  };
  std::unique_ptr<char[], void (*)(void*)> scratch_{nullptr, nullptr};
  int64_t scratch_bytes_ = 0;
  uint64_t generation_ = 1;
  std::vector<Placed> placed_;
  int64_t uploads_ = 0;
  std::vector<std::pair<std::string, int64_t>> uploads_by_weight_;
  int64_t state_bytes_ = 0;
};

}  // namespace iron
