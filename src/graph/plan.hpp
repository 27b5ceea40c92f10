// A compiled version's plan, the same for every device: the words each call writes, where each
// buffer lives in the graph's memory (as a region and an offset, not an address), each step's
// operands as views of those places, and where a step must wait for the ones before it. A
// device lowers the plan into its commands (devices/cpu/lower.cpp); the image (graph/image.hpp)
// runs them, call by call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/recording.hpp"

namespace iron::detail {

/// A constant, or the index of a word written each call.
struct WordRef {
  int index = -1;
  int64_t constant = 0;
  int64_t get(const int64_t* words) const { return index < 0 ? constant : words[index]; }
  bool per_call() const { return index >= 0; }
};

/// Per-call words: the graph's values by slot, then the words derived from them.
class WordTable {
 public:
  explicit WordTable(const std::vector<PerCall>& values);
  /// The word an operand reads for `a` (a constant needs none).
  WordRef ref(const Affine& a);
  void evaluate(int64_t* words) const;
  int size() const { return int(derived_.size()) + values_; }
  int values() const { return values_; }
  /// Whether slot `s` is read by anything (directly or through a derived word).
  bool reads(int slot) const { return slot < int(read_.size()) && read_[size_t(slot)]; }
  const std::vector<Affine>& derived() const { return derived_; }

 private:
  int values_;
  std::vector<Affine> derived_;
  std::vector<bool> read_;
};

/// Where a buffer's bytes live in a graph's memory.
struct Place {
  enum class Region : uint8_t {
    scratch,   // the arena's scratch, shared by every version (inputs and intermediates)
    output,    // this version's own memory for its outputs, kept until its next call
    resident,  // a weight or a state, placed once per graph
  };
  Region region = Region::scratch;
  int64_t offset = 0;                  // bytes into the scratch or the version's outputs
  std::shared_ptr<Resident> resident;  // Region::resident
  int64_t bytes = 0;
  /// Whether the two share a byte of memory.
  bool overlaps(const Place& o) const;
};

/// How a view walks its buffer: what a step's operand is on every device, less where the
/// buffer is (a place in the plan, an address on the CPU, a bound buffer on Vulkan).
struct ViewLayout {
  DType dtype = f32;
  Shape shape;
  Shape strides;               // in elements, per axis
  WordRef offset;              // in elements, from the buffer's (or place's) first byte
  std::vector<WordRef> valid;  // leading entries of each axis valid this call
  // Rows gathered by fixed ids (a Copy from a gather view); per-call ids are the operand's own.
  std::vector<int64_t> fixed_rows;
  int64_t table_rows = 0;  // rows of the table a gather reads
};

/// A view of a buffer as a step reads or writes it, before any device resolves an address.
struct View : ViewLayout {
  Place place;
  std::shared_ptr<View> ids;  // rows gathered by per-call ids
};

/// A step's operands and scalars, and whether it waits for the steps before it: it reads what
/// one of them wrote, or writes what one of them reads or writes, since the last wait.
struct StepPlan {
  std::vector<View> in, out;
  std::vector<WordRef> scalars;
  Precision precision = Precision::highest;
  bool barrier_before = false;

  /// A device's kernel arguments (its own `Args`, with in, out, scalars and precision) for this
  /// step, each operand made by `operand(view)`: how every device's lowering starts a kernel.
  template <class Args, class ToOperand>
  Args kernel_args(ToOperand&& operand) const {
    Args a;
    for (const View& v : in) a.in.push_back(operand(v));
    for (const View& v : out) a.out.push_back(operand(v));
    a.scalars = scalars;
    a.precision = precision;
    return a;
  }
};

/// Ids the host staged for a gather: each is checked against the table's rows before a run.
struct HostIds {
  View ids;  // the i32 ids (its leading bound: how many are read)
  int64_t table_rows;
  std::string table, input;
  std::string what;  // set for a limit on an input's values (IdLimit): what they index
};

/// A bound on the words each call must meet.
struct CheckedConstraint {
  WordRef word;
  int64_t lo, hi;
  const Constraint* source;
};

class VersionPlan {
 public:
  explicit VersionPlan(const Recording& recording);

  const Recording& recording() const { return recording_; }
  const WordTable& table() const { return table_; }
  const Place& place(const BufferNode& b) const { return places_.at(size_t(b.id)); }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  int64_t output_bytes() const { return output_bytes_; }
  const std::vector<StepPlan>& steps() const { return steps_; }
  const std::vector<View>& outputs() const { return outputs_; }
  /// What the Emit step writes: the carried values' next values (none without carried values).
  const std::optional<View>& emitted() const { return emitted_; }
  const std::vector<HostIds>& host_ids() const { return host_ids_; }
  const std::vector<CheckedConstraint>& constraints() const { return constraints_; }
  /// Slots of the carried values, in carry order.
  const std::vector<int>& carry_slots() const { return carry_slots_; }

 private:
  void place_buffers();
  View make_view(const Handle& h);
  void mark_barriers();

  const Recording& recording_;
  WordTable table_;
  std::vector<Place> places_;  // per buffer id
  int64_t scratch_bytes_ = 0, output_bytes_ = 0;
  std::vector<StepPlan> steps_;
  std::vector<View> outputs_;
  std::optional<View> emitted_;
  std::vector<HostIds> host_ids_;
  std::vector<CheckedConstraint> constraints_;
  std::vector<int> carry_slots_;
};

}  // namespace iron::detail
