// SegmentMean on the Vulkan device (segment_mean.comp).
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_segment_mean(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &x = a.in.at(0), &lengths = a.in.at(1), &y = a.out.at(0);
  const int64_t segment = op.params().integer("segment"), n = op.params().integer("N");
  const int64_t batch = y.shape.empty() ? 0 : y.shape[0];
  if (x.rank() != 2 || x.shape[1] != n || x.shape[0] != batch * segment || y.rank() != 2 || y.shape[1] != n ||
      lengths.dtype != i32 || lengths.rank() != 1 || lengths.shape[0] != batch)
    vulkan::unsupported(op, "operands other than (batch * segment, N), (batch,) i32 and (batch, N)");
  struct Push {
    vulkan::Start x, lengths, y;
    int32_t batch, segment, n;
  } push{vulkan::start(x), vulkan::start(lengths), vulkan::start(y), vulkan::shader_int(batch, "a batch"),
         vulkan::shader_int(segment, "segment"), vulkan::shader_int(n, "N")};
  list.bind(a.device->pipeline({"segment_mean", {vulkan::float_kind(op, x), vulkan::float_kind(op, y)}, 4, sizeof push}));
  list.bind_buffers({x.binding(), lengths.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(batch * n, 64));
}

}  // namespace iron::ops
