#include "iron/carried_loop.hpp"

#include <algorithm>

#include "graph/image.hpp"
#include "graph/recording.hpp"
#include "graph/run_queue.hpp"
#include "iron/error.hpp"

namespace iron {

CarriedLoop::CarriedLoop(CompiledGraph& first, CompiledGraph& body, int depth)
    : first_(first), body_(body), depth_(depth) {
  for (CompiledGraph* version : {&first, &body})
    if (!version->has_carry())
      value_error(version->recording().graph +
                  ": a version loops only with carried values; this one returns no iron::carry (so has no Emit)");
  if (&first.graph() != &body.graph()) value_error("first and body are versions of one graph");
  for (const Handle& h : body.recording().inputs)
    if (h.defined()) {
      std::string names;
      for (size_t i = 0; i < body.recording().inputs.size(); ++i)
        if (body.recording().inputs[i].defined()) names += (names.empty() ? "" : ", ") + body.recording().input_names[i];
      value_error(body.recording().graph + ": the looped version takes no tensor, got [" + names + "]");
    }
  if (depth < 1) value_error("depth is at least 1, got " + std::to_string(depth));
  first.emit_to(body);
  body.emit_to(body);
}

const CompiledGraph::Result& CarriedLoop::start(std::span<const Tensor> tensors, std::span<const ValueArg> values) {
  // first's Emit writes body's values: the carried ones, and those first was given.
  const CompiledGraph::Result& r = first_(tensors, values);
  started_ = true;
  return r;
}

CarriedLoop::Steps::Steps(CarriedLoop& loop, int64_t count) : loop_(loop), count_(count) {
  if (!loop.started_) value_error("CarriedLoop: start() runs first before any step");
  if (count < 0) value_error("CarriedLoop: a negative step count " + std::to_string(count));
  Graph& graph = *loop.body_.graph_;
  if (graph.chain_) value_error("CarriedLoop: another loop's steps of this graph are still running");
  if (count > 0) {
    graph.settle();
    try {
      chain_ = loop.body_.image().chain(loop.depth_);
    } catch (const Error&) {
      // The first step's words are bad: its wait throws it, as where the run queue steps it.
      failure_ = std::current_exception();
      return;
    }
  }
  top_up();
  if (chain_) graph.chain_ = chain_.get();  // only once nothing here can throw
}

int CarriedLoop::Steps::in_flight() const { return chain_ ? chain_->in_flight() : int(in_flight_.size()); }

void CarriedLoop::Steps::top_up() {
  // On the run queue, a run's carried values stay in its slot until kRunSlots more are pushed:
  // fewer than that in flight keeps the oldest's until the host has read them.
  const int depth = chain_ ? chain_->depth() : std::min(loop_.depth_, int(detail::kRunSlots / 2));
  while (started_ < count_ && in_flight() < depth) {
    // A chain's commands name the arena's buffers as they are: the graph refuses compiles and
    // releases while it lives (Graph::settle), so they stay put.
    if (chain_) {
      chain_->submit();
    } else {
      in_flight_.push_back(loop_.body_.start());
    }
    ++started_;
  }
}

void CarriedLoop::Steps::wait_oldest() {
  if (failure_) std::rethrow_exception(failure_);
  if (!chain_) {
    in_flight_.front().wait();
    return;
  }
  detail::Image& image = loop_.body_.image();
  int64_t next[detail::kMaxCarried];
  const bool held = chain_->wait(next);
  // The last step done, nothing is in flight: the graph is the host's again.
  if (started_ == count_ && chain_->in_flight() == 0) loop_.body_.graph_->chain_ = nullptr;
  if (!held) image.refused_step();
  image.chained_step(next, loop_.body_.result_);
}

int64_t CarriedLoop::Steps::carried(std::string_view name) const {
  if (!chain_) {
    if (in_flight_.empty()) value_error("CarriedLoop: carried() outside the loop's steps");
    return in_flight_.front().carried_value(name);
  }
  return loop_.body_.result_.carried_value(name);
}

CarriedLoop::Steps::~Steps() {
  if (chain_) {
    // The device runs every step submitted (it cannot drop one): each that completes leaves its
    // carried values to the version, as the last run a queue ran does.
    loop_.body_.graph_->chain_ = nullptr;
    try {
      detail::Image& image = loop_.body_.image();
      int64_t next[detail::kMaxCarried];
      while (chain_->in_flight() > 0 && chain_->wait(next)) image.chained_step(next, loop_.body_.result_);
    } catch (const std::exception&) {
    }
    return;  // chain_'s destructor waits out any step left
  }
  // Closing early drops the runs in flight the device has not begun (their steps are not
  // wanted: a decode that met its end of sequence) and waits out the one running; a failure
  // among them was the host's to see at its step, and a destructor does not throw.
  if (!in_flight_.empty()) in_flight_.front().cancel();
  for (Run& run : in_flight_) try {
      run.wait();
    } catch (const std::exception&) {
    }
}

CarriedLoop::Steps::iterator CarriedLoop::Steps::begin() {
  if (count_ == 0) return end();
  wait_oldest();
  return iterator(this, 0);
}

CarriedLoop::Steps::iterator& CarriedLoop::Steps::iterator::operator++() {
  ++k_;
  // Step k - 1 was waited for and yielded.
  if (!steps_->chain_) steps_->in_flight_.pop_front();
  steps_->top_up();
  if (k_ < steps_->count_) steps_->wait_oldest();
  return *this;
}

}  // namespace iron
