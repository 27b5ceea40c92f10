// iron.Engine: the library's serving engine (models::Engine) from Python. The engine's own thread
// runs the model and never takes the GIL; a reader waits for tokens with the GIL released, or
// (asyncio) on an eventfd the engine's thread writes when its stream has news.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "engine.hpp"
#include "wakeup.hpp"

namespace iron::python {
namespace {

using namespace std::chrono_literals;

struct PyStream {
  std::shared_ptr<models::Stream> stream;
  std::shared_ptr<Wakeup> wakeup;
  // Every token taken so far. A reader on one thread may take more (the GIL released) while
  // another reads `tokens`: the lock keeps the two apart.
  std::vector<int32_t> ids;
  std::mutex ids_mutex;
  // Leaving a stream (a loop broken out of, the object dropped) cancels its sequence: its slot
  // frees at the engine's next step.
  ~PyStream() {
    if (stream) stream->cancel();
  }
  // Takes what is ready within `timeout` (GIL released); true while more may come. The end of a
  // failed stream raises what failed.
  bool take(std::string& text, std::chrono::milliseconds timeout) {
    bool more;
    {
      nb::gil_scoped_release release;
      std::vector<int32_t> taken;
      more = stream->take(text, &taken, timeout);  // may wait: not under the lock
      std::lock_guard lock(ids_mutex);
      ids.insert(ids.end(), taken.begin(), taken.end());
    }
    if (!more && stream->failure()) std::rethrow_exception(stream->failure());
    return more;
  }
};

// One prompt from Python: a str (a text prompt), a list of ints (token ids) or a list of
// {"role", "content"} mappings (chat messages).
decltype(models::Request::prompt) prompt_from(nb::handle p) {
  if (nb::isinstance<nb::str>(p)) return nb::cast<std::string>(p);
  if (nb::isinstance<nb::list>(p) || nb::isinstance<nb::tuple>(p)) {
    std::vector<nb::handle> items;  // borrowed: `p` holds them
    for (nb::handle item : p) items.push_back(item);
    if (!items.empty() && nb::isinstance<nb::int_>(items[0])) {
      std::vector<int32_t> ids;
      for (nb::handle id : items) {
        if (!nb::isinstance<nb::int_>(id)) type_error("a prompt of token ids holds only ints");
        const int64_t v = nb::cast<int64_t>(id);
        if (v < INT32_MIN || v > INT32_MAX) value_error("a token id " + std::to_string(v) + " is outside int32");
        ids.push_back(int32_t(v));
      }
      return ids;
    }
    std::vector<text::ChatMessage> messages;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!nb::isinstance<nb::dict>(items[i]))
        type_error("message " + std::to_string(i) + " is not a dict with 'role' and 'content'");
      const nb::dict d = nb::borrow<nb::dict>(items[i]);
      if (!d.contains("role") || !d.contains("content") || !nb::isinstance<nb::str>(d["role"]) ||
          !nb::isinstance<nb::str>(d["content"]))
        type_error("message " + std::to_string(i) + " needs 'role' and 'content' strings");
      messages.push_back({nb::cast<std::string>(d["role"]), nb::cast<std::string>(d["content"])});
    }
    return messages;
  }
  type_error("a prompt is a str, a list of token ids or a list of {'role', 'content'} messages, not " +
             nb::cast<std::string>(nb::str(p.type())));
}

models::Request request_from(nb::handle prompt, std::optional<int64_t> max_tokens, double temperature, int64_t top_k,
                             double top_p, std::optional<uint64_t> seed, const std::vector<std::string>& stop,
                             bool ignore_eos) {
  models::Request r;
  r.prompt = prompt_from(prompt);
  r.max_tokens = max_tokens;
  // No seed: one of the engine's own, so that two requests at a temperature differ (as a server's).
  r.sampling = {temperature, top_k, top_p, seed ? *seed : fresh_seed()};
  r.stop = stop;
  r.stop_at_end = !ignore_eos;
  return r;
}

}  // namespace

uint64_t fresh_seed() {
  static std::mt19937_64 generator{std::random_device{}()};
  return generator();
}

std::shared_ptr<models::LlamaRunner> open_serving_runner(const std::string& path, int parallel, int64_t context,
                                                         int64_t chunk, int threads, const std::string& device,
                                                         Precision precision) {
  models::RunnerOptions o;
  o.model.context = context;
  o.model.chunk = chunk;
  o.model.slots = std::max(parallel, 1);
  o.model.precision = precision;
  o.threads = threads;
  o.device = device;
  return models::LlamaRunner::open(path, o);
}

void bind_engine(nb::module_& m) {
  nb::module_ em = m.def_submodule("engine", "models::Engine (use iron.Engine).");
  nb::class_<PyStream>(em, "Stream")
      .def("next_piece", [](PyStream& s) -> std::optional<std::string> {
        // Waits for the next non-empty text (held-back text, a prefill: nothing yet), a tenth of
        // a second at a time so that Ctrl-C reaches Python.
        for (;;) {
          std::string text;
          const bool more = s.take(text, 100ms);
          if (!text.empty()) return text;
          if (!more) return std::nullopt;
          if (PyErr_CheckSignals() != 0) throw nb::python_error();
        }
      })
      .def("poll", [](PyStream& s) {
        // The wake-up cleared before the take: news after it signals again.
        if (s.wakeup) s.wakeup->clear();
        std::string text;
        const bool more = s.take(text, 0ms);
        return nb::make_tuple(text, !more);
      })
      .def("fileno", [](PyStream& s) { return s.wakeup->fileno(); })
      .def("cancel", [](PyStream& s) { s.stream->cancel(); })
      .def_prop_ro("finish_reason", [](const PyStream& s) -> std::optional<std::string> {
        const std::string f = s.stream->finish();
        if (f.empty()) return std::nullopt;
        return f;
      })
      .def_prop_ro("tokens", [](PyStream& s) {
        // Taken with the GIL held: its holder in take() never waits for the GIL, so no deadlock.
        std::lock_guard lock(s.ids_mutex);
        return s.ids;
      })
      .def_prop_ro("prompt_tokens", [](const PyStream& s) { return s.stream->prompt_tokens(); })
      .def_prop_ro("stats", [](const PyStream& s) { return stats_dict(s.stream->stats()); });

  nb::class_<PyEngine>(em, "Engine")
      .def_static("open", [](const std::string& path, int parallel, int64_t context, int64_t chunk, int queue,
                             int threads, const std::string& device, Precision precision) {
        auto e = std::make_unique<PyEngine>();
        {
          nb::gil_scoped_release release;
          e->runner = open_serving_runner(path, parallel, context, chunk, threads, device, precision);
          models::LlamaRunner& runner = *e->runner;
          // The engine holds the runner alive too, however the two are let go.
          e->engine = std::shared_ptr<models::Engine>(new models::Engine(runner, parallel, queue),
                                                      [keep = e->runner](models::Engine* p) { delete p; });
        }
        return e.release();
      }, nb::rv_policy::take_ownership)
      .def("submit", [](PyEngine& e, nb::handle prompt, std::optional<int64_t> max_tokens, double temperature,
                        int64_t top_k, double top_p, std::optional<uint64_t> seed, const std::vector<std::string>& stop,
                        bool ignore_eos, bool wait) -> nb::object {
        const std::shared_ptr<models::Engine> engine = e.get();
        models::Request r = request_from(prompt, max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos);
        auto wakeup = std::make_shared<Wakeup>();
        r.on_news = [wakeup] { wakeup->signal(); };
        std::shared_ptr<models::Stream> s;
        {
          nb::gil_scoped_release release;
          s = engine->submit(std::move(r), wait);
        }
        if (!s) return nb::none();  // the queue is full
        return nb::cast(new PyStream{s, wakeup, {}}, nb::rv_policy::take_ownership);
      })
      .def("generate", [](PyEngine& e, nb::sequence prompts, std::optional<int64_t> max_tokens, double temperature,
                          int64_t top_k, double top_p, std::optional<uint64_t> seed,
                          const std::vector<std::string>& stop, bool ignore_eos) {
        const std::shared_ptr<models::Engine> engine = e.get();
        std::vector<models::Request> requests;
        for (nb::handle p : prompts)
          requests.push_back(request_from(p, max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos));
        std::vector<std::string> texts(requests.size());
        std::exception_ptr failure;
        {
          // Every request submitted as places free (the engine batches whatever is in its slots),
          // then each read to its end: the GIL released all along.
          nb::gil_scoped_release release;
          std::vector<std::shared_ptr<models::Stream>> streams;
          try {
            for (models::Request& r : requests) streams.push_back(engine->submit(std::move(r), /*wait=*/true));
          } catch (...) {
            failure = std::current_exception();
          }
          for (size_t i = 0; i < streams.size(); ++i) {
            if (!streams[i]) {
              failure = failure ? failure : std::make_exception_ptr(Error(ErrorKind::value, "the engine is closed"));
              continue;
            }
            if (failure) streams[i]->cancel();
            while (streams[i]->take(texts[i], nullptr, 1000ms)) {
            }
            if (!failure && streams[i]->failure()) failure = streams[i]->failure();
          }
        }
        if (failure) std::rethrow_exception(failure);
        return texts;
      })
      .def("stats", [](const PyEngine& e) {
        const models::EngineStats s = e.get()->stats();
        nb::dict d;
        d["queued"] = s.queued;
        d["active"] = s.active;
        d["prompt_tokens"] = s.prompt_tokens;
        d["completion_tokens"] = s.completion_tokens;
        d["sequences"] = s.sequences;
        d["tokens_per_second"] = s.tokens_per_second;
        return d;
      })
      .def_prop_ro("parallel", [](const PyEngine& e) { return e.get()->parallel(); })
      .def_prop_ro("context", [](const PyEngine& e) { return e.runner->options().model.context; })
      .def("close", [](PyEngine& e) {
        // Cancels what is in flight; the engine's thread is joined by its last user (here, unless
        // a call on another thread still holds it), never waiting for the GIL.
        std::shared_ptr<models::Engine> engine = std::move(e.engine);
        if (!engine) return;
        engine->cancel_all();
        nb::gil_scoped_release release;
        engine.reset();
      });
}

}  // namespace iron::python
