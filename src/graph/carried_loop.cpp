#include "iron/carried_loop.hpp"

#include "graph/recording.hpp"
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
  top_up();
}

void CarriedLoop::Steps::top_up() {
  while (started_ < count_ && int64_t(in_flight_.size()) < loop_.depth_) {
    in_flight_.push_back(loop_.body_.start());
    ++started_;
  }
}

CarriedLoop::Steps::~Steps() {
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
  in_flight_.front().wait();
  return iterator(this, 0);
}

CarriedLoop::Steps::iterator& CarriedLoop::Steps::iterator::operator++() {
  ++k_;
  steps_->in_flight_.pop_front();  // step k - 1 was waited for and yielded
  steps_->top_up();
  if (k_ < steps_->count_) steps_->in_flight_.front().wait();
  return *this;
}

}  // namespace iron
