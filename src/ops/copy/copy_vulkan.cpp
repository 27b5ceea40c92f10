// Copy, Gather and Transpose on the Vulkan device (copy.comp).
#include <span>
#include <vector>

#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_copy(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &src = a.in.at(0), &dst = a.out.at(0);
  const int32_t source = vulkan::load_kind(src.dtype);
  if (source < 0) vulkan::unsupported(op, "a source of " + std::string(name(src.dtype)));
  const int32_t target = vulkan::load_kind(dst.dtype);
  if (dst.dtype != f32 && dst.dtype != f16 && dst.dtype != bf16 && dst.dtype != DType::q8_0 && dst.dtype != i32)
    vulkan::unsupported(op, "a destination of " + std::string(name(dst.dtype)));
  if (dst.dtype == i32 && src.dtype != i32) vulkan::unsupported(op, "a cast to i32");
  if (src.rank() != dst.rank() || src.rank() > 4) vulkan::unsupported(op, "views of rank " + std::to_string(src.rank()));
  if (dst.dtype == DType::q8_0) {
    // Whole blocks only, as the CPU's kernel takes them: the last axis contiguous and whole
    // blocks long, every row starting on a block (a per-call offset is a window's start times
    // a row stride that is a multiple of a block).
    bool whole = dst.rank() > 0 && dst.strides.back() == 1 && dst.shape.back() % 32 == 0 && !src.ids &&
                 (dst.offset.per_call() || dst.offset.constant % 32 == 0) && dst.base % 32 == 0;
    for (int axis = 0; axis + 1 < dst.rank(); ++axis) whole = whole && dst.strides[size_t(axis)] % 32 == 0;
    if (!whole) vulkan::unsupported(op, "a q8_0 destination that is not whole rows of blocks");
  }
  // Rows gathered by fixed ids (known when the plan is made): the ids go to a buffer of the
  // recording's own, and the shader gathers through it as through per-call ids.
  const vulkan::Buffer* fixed = nullptr;
  if (!src.fixed_rows.empty()) {
    std::vector<int32_t> rows;
    for (int64_t r : src.fixed_rows) rows.push_back(vulkan::shader_int(r, "a gathered row"));
    vulkan::Buffer b = a.device->create_buffer(vulkan::padded_bytes(int64_t(rows.size() * 4)), vulkan::MemoryKind::device,
                                               "rows a Copy gathers");
    a.device->upload(b, 0, std::as_bytes(std::span(rows)));
    fixed = &list.keep(std::move(b));
  }
  const bool gathered = src.ids || fixed;
  if (dst.ids && (dst.ids->dtype != i32 || dst.rank() == 0))
    vulkan::unsupported(op, "a scatter by ids of " + std::string(name(dst.ids->dtype)));
  struct Push {
    vulkan::Start src, dst, ids;
    int32_t table_rows;
    vulkan::Start dst_ids;
    int32_t dst_table_rows;
    int32_t src_valid[4], dst_valid[4], src_stride[4], dst_stride[4];
  } push{vulkan::start(src),
         vulkan::start(dst),
         src.ids ? vulkan::start(*src.ids) : vulkan::Start{0, 0},  // fixed rows: from the buffer's start
         vulkan::shader_int(src.table_rows, "a table's rows"),
         dst.ids ? vulkan::start(*dst.ids) : vulkan::Start{0, 0},
         vulkan::shader_int(dst.table_rows, "a table's rows"),
         {}, {}, {}, {}};
  // A scalar copy is a copy of one element on one axis.
  const int rank = std::max(1, src.rank());
  for (int i = 0; i < 4; ++i) {
    const bool axis = i < src.rank();
    push.src_valid[i] = axis ? vulkan::shader_word(src.valid[size_t(i)]) : 1;
    push.dst_valid[i] = axis ? vulkan::shader_word(dst.valid[size_t(i)]) : 1;
    push.src_stride[i] = axis ? vulkan::shader_int(src.strides[size_t(i)], "a stride") : 0;
    push.dst_stride[i] = axis ? vulkan::shader_int(dst.strides[size_t(i)], "a stride") : 0;
  }
  list.bind(a.device->pipeline(
      {"copy", {uint32_t(source), uint32_t(target), uint32_t(rank), gathered ? 1u : 0u, dst.ids ? 1u : 0u}, 5, sizeof push}));
  const vulkan::Binding ids = src.ids ? src.ids->binding() : fixed ? vulkan::Binding{fixed, 0, fixed->size()} : src.binding();
  list.bind_buffers({src.binding(), dst.binding(), ids,
                     dst.ids ? dst.ids->binding() : src.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(std::max<int64_t>(1, element_count(dst.shape)), 64));
}

}  // namespace iron::ops
