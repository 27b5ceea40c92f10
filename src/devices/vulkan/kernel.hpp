// What an operator's Vulkan kernel is given: its operands as views of whole device buffers, the
// per-call words buffer, and a command list to record its dispatches into, once. What changes
// per call (offsets, bounds, positions) is read by the shaders from the words buffer; what does
// not goes into push constants and specialization constants, so nothing is recorded again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/vulkan/commands.hpp"
#include "devices/vulkan/device.hpp"
#include "graph/plan.hpp"
#include "iron/operator.hpp"

namespace iron::vulkan {

using WordRef = detail::WordRef;

/// A word as shaders read it (devices/vulkan/shaders/words.glsl): a constant when >= 0, else
/// per-call word -(w + 1) of the words buffer.
int32_t shader_word(const WordRef& w);

/// A view as a shader reads it: its buffer bound whole, and where the view starts in it.
struct Operand : detail::ViewLayout {
  const Buffer* buffer = nullptr;
  int64_t base = 0;  // elements from the buffer's first byte to the view's place
  std::shared_ptr<Operand> ids;

  int rank() const { return int(shape.size()); }
  Binding binding() const { return {buffer, 0, buffer->size()}; }
};

struct KernelArgs {
  std::vector<Operand> in, out;
  std::vector<WordRef> scalars;
  Precision precision = Precision::highest;
  Device* device = nullptr;
  const Buffer* words = nullptr;  // the per-call words (i32), bound last by every shader
};

/// Records one step's dispatches (the barrier before the step is the lowering's). Throws
/// iron::Error naming the operator and what it has no shader for.
using KernelRecorder = void (*)(const Operator& op, const KernelArgs& args, CommandList& list);

/// The recorder of operator `name`, or null where the Vulkan device has none
/// (each operator's entry names its recorder: src/ops/catalog.cpp).
KernelRecorder find_kernel(std::string_view name);

/// An error naming `op`: the Vulkan device has no shader for what it was asked.
[[noreturn]] void unsupported(const Operator& op, const std::string& what);

/// Bytes of a buffer holding `bytes`: whole 16-byte units, at least one. Shaders read narrow
/// kinds (f16, quantised blocks) as 32-bit words, and a binding covers only whole words.
inline size_t padded_bytes(int64_t bytes) { return size_t((std::max<int64_t>(bytes, 1) + 15) / 16 * 16); }
/// `v` (an element count or offset) as a shader's int; an error naming `what` past 2^31 - 1.
int32_t shader_int(int64_t v, const char* what);
/// Workgroups of `local` invocations for a grid-stride loop over `n` items (at most 65535).
uint32_t groups(int64_t n, uint32_t local);
/// The words buffer's binding.
inline Binding words_binding(const KernelArgs& a) { return {a.words, 0, a.words->size()}; }
/// The kind shaders/elements.glsl reads and writes `o` as (0 f32, 1 f16, 2 bf16), as a
/// specialization constant; unsupported(op, ...) for any other dtype.
uint32_t float_kind(const Operator& op, const Operand& o);
/// Environment variable `name` set to 1 (true) or 0 (false); nothing otherwise: a test's way to
/// take a path this device would not.
std::optional<bool> environment_choice(const char* name);
/// Whether environment variable `name` is set to 0 (a test's way to take the path of a device
/// without an optional feature).
bool disabled_by_environment(const char* name);
/// The kind load.glsl reads `t` as (0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1, 6 i32, 7 q5_0,
/// 8 q5_1, 9 q4_k, 10 q5_k, 11 q6_k), or -1.
int32_t load_kind(DType t);
/// An operand's first element as two push-constant ints: its base, and its offset word.
struct Start {
  int32_t base, offset;
};
Start start(const Operand& o);
/// The word of an operand's valid rows (its first axis's bound; 1 for a scalar).
int32_t rows_word(const Operand& o);

}  // namespace iron::vulkan
