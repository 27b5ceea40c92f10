#include "graph/arena.hpp"

#include <algorithm>

#include "iron/error.hpp"

namespace iron {

void Arena::set_device(detail::Device& device) {
  if (&device == device_) return;
  if (!empty())
    value_error("this graph's memory is on the " + device_->name() + " device; release() it before compiling for " +
                device.name());
  device_ = &device;
}

void Arena::reserve_scratch(int64_t bytes) {
  if (scratch_ && bytes <= scratch_->bytes()) return;
  const int64_t rounded = (std::max<int64_t>(bytes, 64) + 4095) / 4096 * 4096;
  scratch_.reset();  // the old scratch goes first: the two need not fit at once
  scratch_ = device_->allocate(rounded, "the arena's scratch");
  ++generation_;
}

detail::DeviceBuffer& Arena::place(const std::shared_ptr<Resident>& resident) {
  for (const Placed& p : placed_)
    if (p.resident == resident.get()) return *p.buffer;
  Resident& r = *resident;
  std::unique_ptr<detail::DeviceBuffer> buffer;
  if (r.is_state) {
    try {
      buffer = device_->allocate_state(r);
    } catch (const OutOfMemory& e) {
      // Named as the graph holds it: which layer's cache, its shape and type.
      const auto named = names_.find(&r);
      out_of_memory(e.bytes(), "the state " + (named == names_.end() ? r.path : named->second) + " " +
                                   to_string(r.shape) + " " + std::string(iron::name(r.dtype)));
    }
    state_bytes_ += buffer->bytes();
  } else {
    if (!r.tensor.defined() || r.tensor.data() == nullptr)
      value_error(r.path + " was never loaded: call load_state_dict first");
    buffer = device_->upload(r);
    ++uploads_;
    // Counted by the path the graph holds it at ("layers.0.w"), not its own name ("w"): two
    // layers' weights are two entries.
    const auto named = names_.find(&r);
    const std::string& path = named == names_.end() ? r.path : named->second;
    auto counted = std::find_if(uploads_by_weight_.begin(), uploads_by_weight_.end(),
                                [&](const auto& u) { return u.first == path; });
    if (counted == uploads_by_weight_.end()) uploads_by_weight_.emplace_back(path, 1);
    else ++counted->second;
  }
  placed_.push_back({resident.get(), resident, std::move(buffer)});
  return *placed_.back().buffer;
}

void Arena::release() {
  scratch_.reset();
  for (Placed& p : placed_)
    if (p.resident->is_state) p.resident->tensor = Tensor();
  placed_.clear();
  state_bytes_ = 0;
  ++generation_;
}

}  // namespace iron
