// A compiled version's image: its plan (graph/plan.hpp) lowered for a device, and the per-call
// work: check and write the words, stage inputs, run, emit carried values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/device.hpp"
#include "graph/arena.hpp"
#include "graph/plan.hpp"
#include "graph/recording.hpp"
#include "iron/graph.hpp"

namespace iron::detail {

/// Carried values a version may have (a device's chain reads them back in one block).
inline constexpr size_t kMaxCarried = 64;

class Image {
 public:
  Image(Arena& arena, const Recording& recording, const std::vector<std::optional<int64_t>>& defaults,
        CompileOptions options);
  ~Image();

  /// Lowers the plan against the arena's addresses, which places (so uploads) every weight it
  /// reads, unless that is done and the arena has not moved since. A call does it first; compile
  /// does not, so that weights are uploaded at the first call or load(), as the spec has it.
  void load();
  /// Validates and writes the given values; fills defaults and values carried from the last run.
  void write_values(std::span<const ValueArg> values);
  void stage_inputs(std::span<const Tensor> tensors);
  void run();
  /// The carried values' next values the Emit step wrote (one per carry item).
  void emit(int64_t* next);
  /// The outputs, cut to their bounds, and the carried values' next values (checked).
  void fill_result(CompiledGraph::Result& result);
  /// What this run's Emit writes into `target` (this version's image or another of the graph):
  /// the carried values of `result`, and for another version the values this run was given.
  void emit_into(Image& target, const CompiledGraph::Result& result);

  /// This version's steps chained on its device (Program::chain), its Emit feeding itself; the
  /// first step's words are the ones a call would write now, checked as a call's are. Null
  /// where the device has no chain, in check mode and with host steps (those need the host
  /// between steps): the run queue steps the version then.
  std::unique_ptr<StepChain> chain(int depth);
  /// A chained step's carried values `next` become this version's, as a call's do
  /// (fill_result, then emit_into itself), checked the same way.
  void chained_step(const int64_t* next, CompiledGraph::Result& result);
  /// A chained step whose words the device refused: the host finds the fault in the words it
  /// would have written for that step and throws it as a call would have.
  [[noreturn]] void refused_step();

  int64_t* words() { return words_.data(); }
  const WordTable& table() const { return plan_.table(); }
  const VersionPlan& plan() const { return plan_; }
  /// Where a buffer of this version is now.
  Location locate(const BufferNode& buffer) { return locate(plan_.place(buffer)); }
  Arena& arena() { return arena_; }
  int64_t scratch_bytes() const { return plan_.scratch_bytes(); }
  size_t commands() const { return program_ ? program_->commands() : 0; }
  const Recording& recording() const { return recording_; }
  /// Slots of the carried values, in carry order.
  const std::vector<int>& carry_slots() const { return plan_.carry_slots(); }
  /// Bytes of this version's own outputs, kept apart from the shared scratch.
  int64_t output_bytes() const { return plan_.output_bytes(); }
  /// The device's clock over this version's runs, across relinks.
  DeviceTime device_time() const;
  void release();

 private:
  Location locate(const Place& place);
  /// Bytes from the first element of `v` this call to the start of its place.
  int64_t byte_offset(const View& v) const {
    const DTypeInfo& i = info(v.dtype);
    return v.offset.get(words_.data()) / i.block * i.bytes;
  }
  /// `bytes` at `offset` past a place's start as the host reads them: the device's memory where
  /// the host reaches it, else a copy made now in `copy`.
  const char* host_bytes(const Place& place, int64_t offset, int64_t bytes, std::vector<char>& copy);
  /// Copies `bytes` at `offset` past a place's start to or from the host.
  void read(const Place& place, int64_t offset, void* target, int64_t bytes);
  void write(const Place& place, int64_t offset, const void* source, int64_t bytes);
  /// Checks the carried values `next` (30 bits) and sets them in `result`.
  void set_carried(const int64_t* next, CompiledGraph::Result& result);
  /// Refuses ids the host staged that fall outside their table, before anything runs.
  void check_host_ids();
  void link();  // (re)lowers against the arena's current addresses
  /// Drops the program, keeping its device time in earlier_.
  void retire_program();
  void check_step(size_t i);
  void run_host(const HostStep& step);

  Arena& arena_;
  const Recording& recording_;
  std::vector<std::optional<int64_t>> defaults_;
  CompileOptions options_;
  VersionPlan plan_;
  std::vector<int64_t> words_;
  std::vector<bool> have_carried_;
  std::vector<bool> given_;  // the values this call was given (not defaults, not carried)
  // Outputs (and inputs returned as outputs) live in memory of this version's own, so that a
  // call of another version, which reuses the shared scratch, leaves them as they were.
  Device& device_;  // the arena's device when this version was compiled: its memory is there
  std::unique_ptr<DeviceBuffer> output_memory_;
  // Outputs as the host sees them, where it cannot address the device's memory: copied back
  // each call, one per output.
  std::vector<std::vector<char>> output_copies_;
  std::vector<char> ids_, emitted_;  // host ids and carried values, where they are copied back
  uint64_t linked_ = 0;
  std::unique_ptr<Program> program_;
  DeviceTime earlier_;  // the runs of programs a relink replaced
};



}  // namespace iron::detail
