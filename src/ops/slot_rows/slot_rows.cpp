// SlotRows: where each row of a batched decode sits in a KV cache of `slots` regions of
// `slot_rows` rows: rows[b] = slots[b] * slot_rows + positions[b], as (B,) i32, from the per-call
// inputs slots (B,) i32 and positions (B,) i32. The result picks the cache rows a scatter writes
// (Copy into cache[rows]). A slot or position outside its range gives -1, a row no scatter writes
// (the graph also checks graph inputs on the host before a run: functional::slot_rows).
#include "ops/op.hpp"

namespace iron::ops {

namespace {
const Declaration kSlotRows{"SlotRows", nullptr, {{"slots", std::nullopt}, {"slot_rows", std::nullopt}}, {}};

int64_t slot_row(int64_t slot, int64_t position, int64_t slots, int64_t slot_rows) {
  if (slot < 0 || slot >= slots || position < 0 || position >= slot_rows) return -1;
  return slot * slot_rows + position;
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const cpu::KernelArgs& a, int64_t slots, int64_t slot_rows)
      : slots_(a.in.at(0)), positions_(a.in.at(1)), y_(a.out.at(0)), count_(slots), slot_rows_(slot_rows) {
    for (const cpu::Operand* o : {&slots_, &positions_, &y_})
      if (o->dtype != i32 || o->rank() != 1 || o->shape[0] != y_.shape.at(0))
        value_error("SlotRows: slots, positions and rows are (B,) i32 alike, got " + to_string(slots_.shape) + ", " +
                    to_string(positions_.shape) + " and " + to_string(y_.shape));
  }
  bool parallel() const override { return false; }
  void run(const int64_t* w, int, int) const override {
    const int32_t* slot = slots_.data<int32_t>(w);
    const int32_t* position = positions_.data<int32_t>(w);
    int32_t* y = y_.data<int32_t>(w);
    for (int64_t b = 0; b < y_.shape[0]; ++b) y[b] = int32_t(slot_row(slot[b], position[b], count_, slot_rows_));
  }

 private:
  cpu::Operand slots_, positions_, y_;
  int64_t count_, slot_rows_;
};

struct SlotRows : Operator {
  SlotRows(Fields p, Fields t) : Operator(kSlotRows, std::move(p), std::move(t)) {
    slots_ = params_.integer("slots");
    slot_rows_ = params_.integer("slot_rows");
    if (slots_ <= 0 || slot_rows_ <= 0 || slots_ * slot_rows_ >= (int64_t(1) << 31))
      value_error("SlotRows: slots and slot_rows are positive and their product fits i32: " + params_.str());
  }
  void reference(const RefCall& c) const override {
    for (int64_t b = 0; b < c.out[0].shape.at(0); ++b)
      c.out[0].data[b] =
          float(slot_row(int64_t(c.in[0].data[b]), int64_t(c.in[1].data[b]), slots_, slot_rows_));
  }
  Tolerance tolerance(Precision) const override { return {0, 0}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(a, slots_, slot_rows_);
  }
  int64_t slots_, slot_rows_;
};
}  // namespace

// Records its dispatches on Vulkan (slot_rows_vulkan.cpp).
void record_slot_rows(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry slot_rows_entry() { return entry<SlotRows>(kSlotRows, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_slot_rows)); }

}  // namespace iron::ops
