// A graph's carried values looped on the device: `first` runs once from the host, then `body`
// (a version that takes no tensor) runs step after step, each run's Emit writing the next run's
// per-call values, with up to `depth` runs ahead of the host; the host only waits. On a device
// that chains steps itself (Vulkan: each step makes its words from the last one's carried values
// on the device) the host submits them there directly; elsewhere (the CPU) the graph's run queue
// steps them, built on what any user can call: emit_to(), start() and Run::wait().
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <string_view>

#include "iron/graph.hpp"

namespace iron {

class CarriedLoop {
 public:
  /// Programs first's Emit to feed body, and body's to feed itself.
  CarriedLoop(CompiledGraph& first, CompiledGraph& body, int depth = 2);
  CarriedLoop(const CarriedLoop&) = delete;
  CarriedLoop& operator=(const CarriedLoop&) = delete;

  /// Runs `first` on `tensors` and `values`, and waits for it; returns first's result.
  const CompiledGraph::Result& start(std::span<const Tensor> tensors, std::span<const ValueArg> values = {});
  const CompiledGraph::Result& start(std::initializer_list<Tensor> tensors, std::initializer_list<ValueArg> values = {}) {
    return start(std::span<const Tensor>(tensors.begin(), tensors.size()),
          std::span<const ValueArg>(values.begin(), values.size()));
  }

  /// Steps of `body`, each index yielded once that run is complete. Ending the iteration early
  /// (leaving the loop, destroying the range) drops the runs in flight the device has not begun
  /// (Run::cancel) and waits out the one running: the steps left unread cost nothing more.
  class Steps {
   public:
    class iterator {
     public:
      int64_t operator*() const { return k_; }
      iterator& operator++();
      bool operator!=(const iterator& other) const { return k_ != other.k_; }

     private:
      friend class Steps;
      iterator(Steps* s, int64_t k) : steps_(s), k_(k) {}
      Steps* steps_;
      int64_t k_;
    };
    Steps(CarriedLoop& loop, int64_t count);
    ~Steps();
    Steps(const Steps&) = delete;
    Steps& operator=(const Steps&) = delete;
    iterator begin();
    iterator end() { return iterator(this, count_); }
    /// What carried value `name` became in the step last yielded: a decode loop's next token,
    /// read from memory the host maps while later steps run.
    int64_t carried(std::string_view name) const;
    /// Whether the device chains the steps itself (Vulkan), rather than the run queue.
    bool chained() const { return chain_ != nullptr; }

   private:
    /// Starts runs until `depth` are in flight or every step is started.
    void top_up();
    /// Waits for the oldest step in flight; throws what stopped it.
    void wait_oldest();
    int in_flight() const;
    CarriedLoop& loop_;
    int64_t count_;
    int64_t started_ = 0;
    std::deque<Run> in_flight_;                // the run queue's steps
    std::unique_ptr<detail::StepChain> chain_;  // or the device's own (null where it has none)
    std::exception_ptr failure_;                // the chain's first words were refused
  };

  /// `count` steps of body (after start()).
  Steps steps(int64_t count) { return Steps(*this, count); }
  /// start(), then `count` steps.
  Steps run(int64_t count, std::span<const Tensor> tensors, std::span<const ValueArg> values = {}) {
    start(tensors, values);
    return Steps(*this, count);
  }
  Steps run(int64_t count, std::initializer_list<Tensor> tensors, std::initializer_list<ValueArg> values = {}) {
    start(tensors, values);
    return Steps(*this, count);
  }

  int depth() const { return depth_; }

 private:
  CompiledGraph& first_;
  CompiledGraph& body_;
  int depth_;
  bool started_ = false;
};

}  // namespace iron
