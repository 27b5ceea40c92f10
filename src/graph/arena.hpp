// The arena: the memory one graph's versions share on its device. Scratch (sized to the largest
// version), states (placed once, zero at first) and weights (uploaded once each).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/device.hpp"
#include "graph/recording.hpp"

namespace iron {

class Arena {
 public:
  explicit Arena(detail::Device& device) : device_(&device) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  detail::Device& device() const { return *device_; }
  /// Moves the arena to another device; only while nothing is placed (after release()).
  void set_device(detail::Device& device);
  /// Whether anything is placed (scratch, a state or a weight).
  bool empty() const { return !scratch_ && placed_.empty(); }

  /// Grows the scratch region to at least `bytes`; a growth moves it (generation() changes) and
  /// every version relinks before its next call.
  void reserve_scratch(int64_t bytes);
  detail::DeviceBuffer* scratch() { return scratch_.get(); }
  int64_t scratch_bytes() const { return scratch_ ? scratch_->bytes() : 0; }
  uint64_t generation() const { return generation_; }

  /// Where a resident lives: a state is allocated (zeroed) on first use; a weight is uploaded on
  /// first use. On the CPU an upload of a weight already in its dtype is its mapped memory. A
  /// state that does not fit is an OutOfMemory naming it by its path.
  detail::DeviceBuffer& place(const std::shared_ptr<Resident>& resident);
  /// The path the graph holds `resident` under ("layers.3.k_cache", where the resident itself
  /// knows "k_cache"), for messages; the graph names its residents as it compiles.
  void name(const Resident* resident, const std::string& path) { names_[resident] = path; }
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
    std::unique_ptr<detail::DeviceBuffer> buffer;
  };
  detail::Device* device_;
  std::unique_ptr<detail::DeviceBuffer> scratch_;
  uint64_t generation_ = 1;
  std::vector<Placed> placed_;
  int64_t uploads_ = 0;
  std::vector<std::pair<std::string, int64_t>> uploads_by_weight_;
  int64_t state_bytes_ = 0;
  std::map<const Resident*, std::string> names_;
};

}  // namespace iron
