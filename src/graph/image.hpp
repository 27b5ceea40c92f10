// A compiled version's image: the plan (arena offsets, word table) lowered for a device, and
// the per-call work: check and write the words, stage inputs, run, emit carried values.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "graph/arena.hpp"
#include "graph/recording.hpp"
#include "iron/graph.hpp"

namespace iron::detail {

/// Per-call words: the graph's values by slot, then the words derived from them.
class WordTable {
 public:
  explicit WordTable(const std::vector<PerCall>& values);
  /// The word an operand reads for `a` (a constant needs none).
  cpu::WordRef ref(const Affine& a);
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

/// What a device runs: the commands of one version.
class Program {
 public:
  virtual ~Program() = default;
  virtual void run(const int64_t* words) = 0;
  /// Runs command `i` alone (check mode).
  virtual void run_one(size_t i, const int64_t* words) = 0;
  virtual size_t commands() const = 0;
};

class Image {
 public:
  Image(Arena& arena, const Recording& recording, const std::vector<std::optional<int64_t>>& defaults,
        CompileOptions options);
  ~Image();

  /// Validates and writes the given values; fills defaults and values carried from the last run.
  void write_values(std::span<const ValueArg> values);
  void stage_inputs(std::span<const Tensor> tensors);
  void run();
  /// The carried values' next values the Emit step wrote (one per carry item).
  void emit(int64_t* next) const;
  /// The outputs, cut to their bounds, and the carried values' next values (checked).
  void fill_result(CompiledGraph::Result& result);
  /// What this run's Emit writes into `target` (this version's image or another of the graph):
  /// the carried values of `result`, and for another version the values this run was given.
  void emit_into(Image& target, const CompiledGraph::Result& result);

  int64_t* words() { return words_.data(); }
  const WordTable& table() const { return table_; }
  char* address(const BufferNode& buffer);
  Arena& arena() { return arena_; }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  size_t commands() const { return program_ ? program_->commands() : 0; }
  const Recording& recording() const { return recording_; }
  /// Slots of the carried values, in carry order.
  const std::vector<int>& carry_slots() const { return carry_slots_; }
  /// Bytes of this version's own outputs, kept apart from the shared scratch.
  int64_t output_bytes() const { return output_bytes_; }
  void release();

 private:
  void plan();
  /// Refuses ids the host staged that fall outside their table, before anything runs.
  void check_host_ids() const;
  void link();  // (re)lowers against the arena's current addresses
  /// Where each step needs a barrier: the byte ranges it reads and writes against those of the
  /// steps since the last one (buffers that share arena bytes count as the same memory).
  std::vector<bool> barriers();
  cpu::Operand operand(const Handle& h);
  void check_step(size_t i);
  void run_host(const HostStep& step);

  Arena& arena_;
  const Recording& recording_;
  std::vector<std::optional<int64_t>> defaults_;
  CompileOptions options_;
  WordTable table_;
  std::vector<int64_t> words_;
  std::vector<bool> have_carried_;
  std::vector<bool> given_;  // the values this call was given (not defaults, not carried)
  std::vector<int64_t> offsets_;  // scratch offset per buffer id (-1: not in scratch)
  int64_t scratch_bytes_ = 0;
  // Outputs (and inputs returned as outputs) live in memory of this version's own, so that a
  // call of another version, which reuses the shared scratch, leaves them as they were.
  std::vector<int64_t> output_offsets_;  // per buffer id (-1: not an output)
  int64_t output_bytes_ = 0;
  std::unique_ptr<char[], void (*)(void*)> output_memory_{nullptr, nullptr};
  // A gather whose ids the host staged (an input): each id is checked against the table's rows
  // before a run, so that a bad token id is refused before any state changes. Ids a graph makes
  // on the device are in range by construction and cost no check.
  struct HostIds {
    cpu::Operand ids;       // the i32 ids view (its leading bound: how many are read)
    int64_t table_rows;
    std::string table, input;
  };
  std::vector<HostIds> host_ids_;
  uint64_t linked_ = 0;
  std::unique_ptr<Program> program_;
  struct CheckedConstraint {
    cpu::WordRef word;
    int64_t lo, hi;
    const Constraint* source;
  };
  std::vector<CheckedConstraint> constraints_;
  cpu::Operand emitted_;  // what the Emit step wrote: the carried values' next values
  std::vector<int> carry_slots_;
  std::vector<cpu::Operand> outputs_;
};

/// Lowers a recording's steps for the CPU (devices/cpu/program.cpp).
/// `barrier_before[i]`: step i must wait for every earlier step (it touches memory a step since the
/// last barrier wrote, or writes memory one read); steps between two barriers run as one phase.
std::unique_ptr<Program> lower_cpu(const Recording& recording, std::vector<cpu::KernelArgs> args,
                                   const std::vector<bool>& barrier_before, int threads);

}  // namespace iron::detail
