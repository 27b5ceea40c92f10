// iron.Api: `iron serve`'s OpenAI API (tools/serve/api.hpp) without HTTP, for a Python web
// framework to answer requests with (a Ray Serve replica's ingress: python/iron/ray/). A request's
// method, path, headers and body go in; its status, headers and body come back, or a stream of
// server-sent events read as the engine's thread writes it (GIL released; under asyncio, an
// eventfd the engine's thread signals says when there is news).
#include <chrono>
#include <utility>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "iron/models/encoder.hpp"
#include "iron/models/runner.hpp"
#include "serve/api.hpp"
#include "wakeup.hpp"

namespace iron::python {
namespace {

// The model and the Api over it, shared with the streams the Api answered, so that the Api
// outlives each (api.hpp) however Python lets go of them. Members go in reverse: the Api first.
struct Served {
  std::shared_ptr<models::LlamaRunner> runner;
  std::unique_ptr<models::SentenceEncoder> encoder;
  std::unique_ptr<serve::Api> api;
};

struct PyApi {
  std::shared_ptr<Served> served;
  serve::Api& get() const {
    if (!served) value_error("the Api is closed");
    return *served->api;
  }
};

struct PyBodyStream {
  std::shared_ptr<serve::BodyStream> stream;
  std::shared_ptr<Wakeup> wakeup;
  std::shared_ptr<Served> served;  // after the stream: let go last
  ~PyBodyStream() {
    nb::gil_scoped_release release;  // the last user of the Api may join the engine's thread
    stream.reset();
    served.reset();
  }
  // What is ready within `wait` (GIL released), and whether the body is all given.
  std::pair<nb::bytes, bool> next(std::chrono::milliseconds wait) {
    std::string out;
    bool more;
    {
      nb::gil_scoped_release release;
      more = stream->next(out, wait);
    }
    return {nb::bytes(out.data(), out.size()), !more};
  }
};

}  // namespace

void bind_api(nb::module_& m) {
  nb::module_ am = m.def_submodule("api", "serve::Api (use iron.Api).");
  nb::class_<PyBodyStream>(am, "BodyStream")
      .def("next", [](PyBodyStream& s, double seconds) {
        return s.next(std::chrono::milliseconds(int64_t(seconds * 1000)));
      })
      .def("poll", [](PyBodyStream& s) {
        // The wake-up cleared before the take: news after it signals again.
        s.wakeup->clear();
        return s.next(std::chrono::milliseconds(0));
      })
      .def("fileno", [](PyBodyStream& s) { return s.wakeup->fileno(); })
      .def("cancel", [](PyBodyStream& s) { s.stream->cancel(); });

  nb::class_<PyApi>(am, "Api")
      .def_static("open", [](const std::string& path, int parallel, int64_t context, int64_t chunk, int queue,
                             int threads, const std::string& device, Precision precision, const std::string& api_key,
                             const std::string& model_name) {
        serve::ApiOptions options;
        options.parallel = parallel;
        options.queue = queue;
        options.api_key = api_key;
        options.model_name = model_name;
        auto served = std::make_shared<Served>();
        {
          nb::gil_scoped_release release;
          // As `iron serve`: a sentence encoder's directory answers embeddings, anything else is
          // opened as a decoder (whose error names what is wrong with the file).
          if (models::is_sentence_encoder(path)) {
            models::EncoderOptions o;
            o.threads = threads;
            o.device = device;
            o.precision = precision;
            served->encoder = models::SentenceEncoder::open(path, o);
          } else {
            served->runner = open_serving_runner(path, parallel, context, chunk, threads, device, precision);
          }
          served->api = std::make_unique<serve::Api>(served->runner.get(), served->encoder.get(), options);
        }
        return new PyApi{std::move(served)};
      }, nb::rv_policy::take_ownership)
      .def("handle", [](PyApi& a, const std::string& method, const std::string& path,
                        const std::vector<std::pair<std::string, std::string>>& headers, nb::bytes body) {
        serve::Api& api = a.get();
        serve::ApiRequest request{method, path, headers, std::string(body.c_str(), body.size()), {}};
        auto wakeup = std::make_shared<Wakeup>();
        request.on_news = [wakeup] { wakeup->signal(); };
        serve::ApiResponse res;
        {
          nb::gil_scoped_release release;
          res = api.handle(request);
        }
        nb::object stream = nb::none();
        if (res.stream)
          stream = nb::cast(new PyBodyStream{std::move(res.stream), wakeup, a.served}, nb::rv_policy::take_ownership);
        return nb::make_tuple(res.status, res.content_type, res.headers, nb::bytes(res.body.data(), res.body.size()),
                              stream);
      })
      .def_prop_ro("kind", [](const PyApi& a) {
        a.get();
        return std::string(a.served->runner ? "decoder" : "encoder");
      })
      .def_prop_ro("draining", [](const PyApi& a) { return a.get().draining(); })
      .def("drain", [](PyApi& a) { a.get().drain(); })
      .def_prop_ro("open_answers", [](const PyApi& a) { return a.get().open(); })
      .def_prop_ro("in_flight", [](const PyApi& a) { return a.get().in_flight(); })
      .def("close", [](PyApi& a) {
        // Cancels what is in flight; the model goes with the last stream that still reads it.
        std::shared_ptr<Served> served = std::move(a.served);
        if (!served) return;
        served->api->cancel_all();
        nb::gil_scoped_release release;
        served.reset();
      });
}

}  // namespace iron::python
