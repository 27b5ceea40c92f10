// iron.Conversation: models::Conversation from Python, over an iron.Engine. A turn is the
// conversation's begin_turn() and end_turn() around a stream the Python reader takes as it
// takes an iron.Stream (threads: waits with the GIL released; asyncio: the stream's eventfd).
// The reader that sees the stream's end ends the turn; a turn whose reader let go of it (or
// cancelled it) is ended by the conversation's next use, its answer kept as far as it got.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "engine.hpp"
#include "wakeup.hpp"
#include "iron/models/conversation.hpp"

namespace iron::python {
namespace {

using namespace std::chrono_literals;

// A turn as Python reads it; shared by its Python object and the conversation, so that either
// may end it.
struct TurnState {
  std::shared_ptr<models::Stream> stream;
  std::vector<int32_t> ids;                // taken so far
  std::optional<models::TurnStats> stats;  // once ended
  std::exception_ptr failure;              // what ending it raised, for its reader
  std::atomic<bool> dropped{false};        // its Python object is gone: no one reads it
};

// The conversation and the turn in progress. Its lock is only ever taken with the GIL released
// (a holder may wait for the engine meanwhile), so two Python threads take turns here.
struct Core {
  // The engine before the conversation over it: it goes last.
  std::shared_ptr<models::Engine> engine;
  models::Conversation conversation;
  std::mutex mutex;
  std::shared_ptr<TurnState> turn;

  Core(std::shared_ptr<models::Engine> e, const std::string& system)
      : engine(std::move(e)), conversation(*engine, system) {}

  // Under the lock: ends `t`, the turn in progress, keeping what ending it raised for its reader.
  void end(TurnState& t) {
    try {
      t.stats = conversation.end_turn(t.ids);
    } catch (...) {
      t.failure = std::current_exception();
    }
    turn.reset();
  }
  // Under the lock, before the conversation is read: a turn no one reads any more (dropped or
  // cancelled) is ended, so its answer shows as far as it got.
  void settle_left() {
    if (!turn || (!turn->dropped && !turn->stream->cancelled())) return;
    turn->stream->cancel();
    end(*turn);
  }
  // Under the lock, before the conversation is changed: as settle_left(), and a turn still
  // being read is a value error naming `what` would have changed.
  void settle(const char* what) {
    settle_left();
    if (turn) value_error(std::string("a turn is in progress: read its answer to the end or cancel() it before ") + what);
  }
};

struct PyConversation {
  PyEngine* owner;  // kept alive by the binding (keep_alive): says whether the engine was closed
  std::shared_ptr<Core> core;
};

struct PyTurn {
  std::shared_ptr<Core> core;
  std::shared_ptr<TurnState> state;
  std::shared_ptr<Wakeup> wakeup;
  // As an iron.Stream: letting go of a turn cancels its answer (the conversation keeps it as
  // far as it got, at its next use).
  ~PyTurn() {
    state->dropped = true;
    state->stream->cancel();
  }
  // Takes what is ready within `timeout` (GIL released); true while more may come. The reader
  // that sees the end ends the turn (unless the conversation did first), and raises what failed.
  bool take(std::string& text, std::chrono::milliseconds timeout) {
    bool more;
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(core->mutex);
      more = state->stream->take(text, &state->ids, core->turn == state ? timeout : 0ms);
      if (!more && core->turn == state) core->end(*state);
    }
    if (!more && state->failure) std::rethrow_exception(state->failure);
    return more;
  }
};

nb::list messages_list(const std::vector<models::ConversationMessage>& messages) {
  nb::list out;
  for (const models::ConversationMessage& m : messages) {
    nb::dict d;
    d["role"] = m.role;
    d["content"] = m.content;
    if (!m.ids.empty()) d["ids"] = m.ids;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_conversation(nb::module_& m) {
  nb::module_ em = nb::borrow<nb::module_>(m.attr("engine"));  // bind_engine's
  nb::class_<PyTurn>(em, "Turn")
      .def("next_piece", [](PyTurn& t) -> std::optional<std::string> {
        // As Stream.next_piece: a tenth of a second at a time, so that Ctrl-C reaches Python.
        for (;;) {
          std::string text;
          const bool more = t.take(text, 100ms);
          if (!text.empty()) return text;
          if (!more) return std::nullopt;
          if (PyErr_CheckSignals() != 0) throw nb::python_error();
        }
      })
      .def("poll", [](PyTurn& t) {
        t.wakeup->clear();
        std::string text;
        const bool more = t.take(text, 0ms);
        return nb::make_tuple(text, !more);
      })
      .def("fileno", [](PyTurn& t) { return t.wakeup->fileno(); })
      .def("cancel", [](PyTurn& t) { t.state->stream->cancel(); })
      .def_prop_ro("finish_reason", [](const PyTurn& t) -> std::optional<std::string> {
        const std::string f = t.state->stream->finish();
        if (f.empty()) return std::nullopt;
        return f;
      })
      .def_prop_ro("tokens", [](const PyTurn& t) {
        // Under the lock: a reader on another thread may be taking more into them.
        nb::gil_scoped_release release;
        std::lock_guard lock(t.core->mutex);
        return t.state->ids;
      })
      .def_prop_ro("prompt_tokens", [](const PyTurn& t) { return t.state->stream->prompt_tokens(); })
      .def_prop_ro("stats", [](const PyTurn& t) -> nb::object {
        // Read under the lock: the conversation may be ending the turn on another thread.
        std::optional<models::TurnStats> s;
        {
          nb::gil_scoped_release release;
          std::lock_guard lock(t.core->mutex);
          s = t.state->stats;
        }
        if (!s) return nb::none();
        nb::dict d;
        d["prefilled"] = s->prefilled;
        d["cached"] = s->cached;
        d["generated"] = s->generated;
        d["answer_seconds"] = s->answer_seconds;
        d["dropped_messages"] = s->dropped_messages;
        d["stop"] = s->stop;
        return d;
      });

  nb::class_<PyConversation>(em, "Conversation")
      .def_static("open", [](PyEngine& e, const std::string& system) {
        std::shared_ptr<models::Engine> engine = e.get();
        return new PyConversation{&e, std::make_shared<Core>(std::move(engine), system)};
      }, nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("say", [](PyConversation& c, const std::string& user, std::optional<int64_t> max_tokens,
                     double temperature, int64_t top_k, double top_p, std::optional<uint64_t> seed,
                     bool wait) -> nb::object {
        c.owner->get();  // a closed engine takes no more turns
        if (max_tokens && *max_tokens < 0)
          value_error("max_tokens is a count >= 0 or None, got " + std::to_string(*max_tokens));
        models::TurnOptions o;
        o.max_tokens = max_tokens ? *max_tokens : -1;
        o.sampling = Sampling{temperature, top_k, top_p, seed ? *seed : fresh_seed()};
        auto wakeup = std::make_shared<Wakeup>();
        o.on_news = [wakeup] { wakeup->signal(); };
        auto state = std::make_shared<TurnState>();
        {
          nb::gil_scoped_release release;
          std::lock_guard lock(c.core->mutex);
          c.core->settle("the next turn");
          state->stream = c.core->conversation.begin_turn(user, o, wait);
          if (state->stream) c.core->turn = state;
        }
        if (!state->stream) return nb::none();  // the engine's queue is full
        return nb::cast(new PyTurn{c.core, state, wakeup}, nb::rv_policy::take_ownership);
      })
      .def("messages", [](PyConversation& c) {
        std::vector<models::ConversationMessage> messages;
        {
          nb::gil_scoped_release release;
          std::lock_guard lock(c.core->mutex);
          c.core->settle_left();
          messages = c.core->conversation.messages();
        }
        return messages_list(messages);
      })
      .def("cached_tokens", [](PyConversation& c) {
        nb::gil_scoped_release release;
        std::lock_guard lock(c.core->mutex);
        c.core->settle_left();
        return c.core->conversation.cached_tokens();
      })
      .def("set_system", [](PyConversation& c, const std::string& system) {
        nb::gil_scoped_release release;
        std::lock_guard lock(c.core->mutex);
        c.core->settle("changing the system message");
        c.core->conversation.set_system(system);
      })
      .def("clear", [](PyConversation& c) {
        nb::gil_scoped_release release;
        std::lock_guard lock(c.core->mutex);
        c.core->settle("clearing the conversation");
        c.core->conversation.clear();
      })
      .def("to_json", [](PyConversation& c) {
        nb::gil_scoped_release release;
        std::lock_guard lock(c.core->mutex);
        c.core->settle_left();
        // Indented as `iron chat`'s /save writes it, so either reads the other's files.
        return c.core->conversation.to_json().dump(1) + "\n";
      })
      .def("load_json", [](PyConversation& c, const std::string& text) {
        nb::gil_scoped_release release;
        // Untrusted text: a parse error is a ValueError, as conversation_from_json's checks are.
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) value_error("conversation: the text is not JSON");
        std::lock_guard lock(c.core->mutex);
        c.core->settle("loading another conversation");
        c.core->conversation.load_json(j);
      });
}

}  // namespace iron::python
