// What iron.Engine's bindings (engine.cpp) share with those over an engine (conversation.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "iron/error.hpp"
#include "iron/models/engine.hpp"

namespace iron::python {

// The engine is shared with the calls using it (a submit waiting for a place, a generate(), a
// conversation), so that close() on another thread never destroys it under them: it cancels
// what is in flight, and the last user lets it go. The runner outlives every engine over it.
struct PyEngine {
  std::shared_ptr<models::LlamaRunner> runner;
  std::shared_ptr<models::Engine> engine;
  std::shared_ptr<models::Engine> get() const {
    std::shared_ptr<models::Engine> e = engine;
    if (!e) value_error("the engine is closed");
    return e;
  }
};

/// A seed for a request that names none, so that two requests at a temperature differ (as a
/// server's). Called under the GIL.
uint64_t fresh_seed();

}  // namespace iron::python
