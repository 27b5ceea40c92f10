#include "graph/arena.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "iron/error.hpp"

namespace iron {

void Arena::reserve_scratch(int64_t bytes) {
  if (bytes <= scratch_bytes_ && scratch_) return;
  int64_t rounded = (std::max<int64_t>(bytes, 64) + 4095) / 4096 * 4096;
  void* memory = std::aligned_alloc(4096, size_t(rounded));
  if (!memory) value_error("cannot allocate an arena of " + std::to_string(rounded) + " bytes");
  std::memset(memory, 0, size_t(rounded));
  scratch_ = {static_cast<char*>(memory), std::free};
  scratch_bytes_ = rounded;
  ++generation_;
}

char* Arena::place(const std::shared_ptr<Resident>& resident) {
  for (const Placed& p : placed_)
    if (p.resident == resident.get()) return p.address;
  Resident& r = *resident;
  if (r.is_state) {
    if (!r.tensor.defined() || r.tensor.numel() != element_count(r.shape))
      r.tensor = Tensor::zeros(r.shape, r.dtype);
    state_bytes_ += r.tensor.nbytes();
  } else {
    if (!r.tensor.defined() || r.tensor.data() == nullptr)
      value_error(r.path + " was never loaded: call load_state_dict first");
    ++uploads_;
    auto counted = std::find_if(uploads_by_weight_.begin(), uploads_by_weight_.end(),
                                [&](const auto& u) { return u.first == r.path; });
    if (counted == uploads_by_weight_.end()) uploads_by_weight_.emplace_back(r.path, 1);
    else ++counted->second;
  }
  // A state is written by the device; a weight is only read, so its (possibly mapped, read-only)
  // memory serves as it is.
  char* address = static_cast<char*>(const_cast<void*>(r.tensor.data()));
  placed_.push_back({resident.get(), resident, address});
  return address;
}

void Arena::release() {
  scratch_.reset();
  scratch_bytes_ = 0;
  for (Placed& p : placed_)
    if (p.resident->is_state) p.resident->tensor = Tensor();
  placed_.clear();
  state_bytes_ = 0;
  ++generation_;
}

}  // namespace iron
