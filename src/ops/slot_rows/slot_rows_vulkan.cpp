// SlotRows on the Vulkan device (slot_rows.comp).
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_slot_rows(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &slots = a.in.at(0), &positions = a.in.at(1), &rows = a.out.at(0);
  for (const vulkan::Operand* o : {&slots, &positions, &rows})
    if (o->dtype != i32 || o->rank() != 1 || o->shape[0] != rows.shape.at(0))
      vulkan::unsupported(op, "operands other than (B,) i32 alike");
  struct Push {
    vulkan::Start slots, positions, rows;
    int32_t batch, count, slot_rows;
  } push{vulkan::start(slots), vulkan::start(positions), vulkan::start(rows),
         vulkan::shader_int(rows.shape[0], "a batch"), vulkan::shader_int(op.params().integer("slots"), "slots"),
         vulkan::shader_int(op.params().integer("slot_rows"), "slot_rows")};
  list.bind(a.device->pipeline({"slot_rows", {}, 4, sizeof push}));
  list.bind_buffers({slots.binding(), positions.binding(), rows.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(rows.shape[0], 64));
}

}  // namespace iron::ops
