// iron.models: a Llama-family or Gemma 3 checkpoint run by models::LlamaRunner (the runner
// `iron generate` uses), its tokens streamed to Python as they land.
#include <atomic>
#include <span>
#include <tuple>

#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/models/llama_config.hpp"
#include "iron/models/runner.hpp"
#include "iron/sampling.hpp"

namespace iron::python {
namespace {

struct PyRunner {
  std::unique_ptr<models::LlamaRunner> runner;
  std::atomic<bool> interrupt{false};
};

// A runner opened with several cache slots, driven through its BatchDecoder (made on first use).
struct PyBatch {
  std::shared_ptr<models::LlamaRunner> runner;
};

// A row's settings from Python's (temperature, top_k, top_p, seed), checked as the runner's
// device can draw them: a ValueError naming the setting, before anything runs.
SamplingRow sampling_row(const models::LlamaRunner& runner, const nb::handle& settings) {
  const auto t = nb::cast<std::tuple<double, int64_t, double, uint64_t>>(settings);
  const Sampling s{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
  runner.check_sampling(s);
  return SamplingRow(s);
}

}  // namespace

nb::dict stats_dict(const models::GenerateStats& s) {
  nb::dict d;
  d["prompt_tokens"] = s.prompt_tokens;
  d["prompt_seconds"] = s.prompt_seconds;
  d["generated_tokens"] = s.generated_tokens;
  d["generate_seconds"] = s.generate_seconds;
  d["stop"] = s.stop;
  return d;
}

void bind_models(nb::module_& m) {
  nb::module_ mm = m.def_submodule("models", "models::LlamaRunner (use iron.models).");
  // A Llama-family GGUF's weights under the C++ model's paths (layers.3.attn.q, as
  // models::llama_state_dict names them), in their checkpoint types, and its configuration: what
  // a decoder written in Python loads (examples/llama.py).
  mm.def("llama_checkpoint", [](const std::string& path) {
    io::GgufFile gguf = io::GgufFile::open(path);
    models::LlamaConfig c = models::llama_config_from_gguf(gguf);
    nb::dict d;
    d["architecture"] = c.architecture;
    d["layers"] = c.layers;
    d["dim"] = c.dim;
    d["heads"] = c.heads;
    d["kv_heads"] = c.kv_heads;
    d["head_dim"] = c.head_dim;
    d["ffn"] = c.ffn;
    d["vocab"] = c.vocab;
    d["context"] = c.context;
    d["rope_base"] = c.rope_base;
    d["rms_eps"] = c.rms_eps;
    d["rope_mode"] = c.rope_mode;
    d["rope_dims"] = c.rope_dims;
    d["tied_embeddings"] = c.tied_embeddings;
    return nb::make_tuple(models::llama_state_dict(open_checkpoint(path), c.architecture), d);
  });
  nb::class_<PyBatch>(mm, "BatchDecoder")
      .def_static("open", [](const std::string& path, int slots, int64_t context, int64_t chunk, int threads,
                             const std::string& device, Precision precision) {
        if (slots < 1) value_error("a BatchDecoder has at least 1 cache slot, got " + std::to_string(slots));
        auto b = std::make_unique<PyBatch>();
        {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(device_mutex());
          b->runner = open_serving_runner(path, slots, context, chunk, threads, device, precision);
        }
        return b.release();
      }, nb::rv_policy::take_ownership)
      // prompts: (slot, position, ids, (temperature, top_k, top_p, seed), step) each.
      .def("prefill", [](PyBatch& b, const std::vector<nb::tuple>& prompts) {
        // The ids are held here for the spans the prompts view.
        std::vector<std::vector<int32_t>> ids;
        std::vector<models::BatchDecoder::Prompt> going;
        ids.reserve(prompts.size());
        for (const nb::tuple& p : prompts) {
          ids.push_back(nb::cast<std::vector<int32_t>>(p[2]));
          if (ids.back().empty()) value_error("prompt " + std::to_string(going.size()) + " has no ids");
          going.push_back({nb::cast<int64_t>(p[0]), nb::cast<int64_t>(p[1]), ids.back(), 0,
                           sampling_row(*b.runner, p[3]), nb::cast<int64_t>(p[4])});
        }
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(device_mutex());
        return b.runner->batch().prefill(std::span(going));
      })
      // rows: (slot, position, token, step, (temperature, top_k, top_p, seed)) each.
      .def("step", [](PyBatch& b, const std::vector<nb::tuple>& rows) {
        if (rows.empty()) value_error("a step has at least one row");
        std::vector<models::BatchDecoder::Row> going;
        for (const nb::tuple& r : rows)
          going.push_back({nb::cast<int64_t>(r[0]), nb::cast<int64_t>(r[1]), nb::cast<int32_t>(r[2]),
                           nb::cast<int64_t>(r[3]), sampling_row(*b.runner, r[4])});
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(device_mutex());
        return b.runner->batch().step(going);
      })
      .def("logits", [](PyBatch& b) -> nb::object {
        Tensor t;
        {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(device_mutex());
          t = b.runner->batch().logits();
        }
        if (!t.defined()) return nb::none();
        return array_from(t, true);  // a copy: the view changes at the version's next call
      })
      .def("prompt_ids", [](const PyBatch& b, const std::string& prompt, bool chat) {
        return b.runner->prompt_ids(prompt, chat);
      })
      .def("decode", [](const PyBatch& b, const std::vector<int32_t>& ids) {
        std::string s = b.runner->tokenizer().decode(ids);
        return nb::bytes(s.data(), s.size());
      })
      .def("is_end", [](const PyBatch& b, int32_t id) {
        return b.runner->has_tokenizer() && b.runner->tokenizer().is_end(id);
      })
      .def_prop_ro("slots", [](const PyBatch& b) { return b.runner->options().model.slots; })
      .def_prop_ro("context", [](const PyBatch& b) { return b.runner->options().model.context; })
      .def_prop_ro("vocab_size", [](const PyBatch& b) { return b.runner->config().vocab; });

  nb::class_<PyRunner>(mm, "Runner")
      .def_static("open", [](const std::string& path, int64_t context, int64_t chunk, double temperature,
                             int64_t top_k, double top_p, uint64_t seed, int threads, const std::string& device,
                             Precision precision) {
        models::RunnerOptions o;
        o.model.context = context;
        o.model.chunk = chunk;
        o.model.sampling = {temperature, top_k, top_p, seed};
        o.model.precision = precision;
        o.threads = threads;
        o.device = device;
        auto r = std::make_unique<PyRunner>();
        {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(device_mutex());
          r->runner = models::LlamaRunner::open(path, o);
        }
        return r.release();
      }, nb::rv_policy::take_ownership)
      .def("prompt_ids", [](const PyRunner& r, const std::string& prompt, bool chat) {
        return r.runner->prompt_ids(prompt, chat);
      })
      .def("decode", [](const PyRunner& r, const std::vector<int32_t>& ids) {
        std::string s = r.runner->tokenizer().decode(ids);
        return nb::bytes(s.data(), s.size());
      })
      .def_prop_ro("has_tokenizer", [](const PyRunner& r) { return r.runner->has_tokenizer(); })
      .def_prop_ro("context", [](const PyRunner& r) { return r.runner->options().model.context; })
      .def_prop_ro("vocab_size", [](const PyRunner& r) { return r.runner->config().vocab; })
      .def_prop_ro("load_seconds", [](const PyRunner& r) { return r.runner->load_seconds(); })
      .def("score", [](PyRunner& r, const std::vector<int32_t>& ids) {
        Tensor t;
        {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(device_mutex());
          t = r.runner->score(ids);
        }
        return array_from(t, false);
      }, "The logits (rows, vocab) after each prompt token: a prefill of every row.")
      .def("interrupt", [](PyRunner& r) { r.interrupt = true; },
           "Stops a generate() in progress after the token being handed over.")
      .def("generate", [](PyRunner& r, const std::vector<int32_t>& prompt, int64_t max_tokens,
                          const std::function<void(int32_t, nb::bytes)>& on_token, bool stop_at_end, int64_t start) {
        r.interrupt = false;
        // Text streams as whole UTF-8 characters (text::StreamDecoder), as `iron generate` prints it.
        std::optional<text::StreamDecoder> stream;
        if (r.runner->has_tokenizer()) stream.emplace(r.runner->tokenizer());
        models::GenerateStats s;
        {
          nb::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(device_mutex());
          s = r.runner->generate(prompt, max_tokens, [&](int32_t id) {
            // The end of sequence is an id, not text (as `iron generate` prints nothing for it).
            std::string piece = stream && !r.runner->tokenizer().is_end(id) ? stream->push(id) : std::string();
            nb::gil_scoped_acquire gil;
            on_token(id, nb::bytes(piece.data(), piece.size()));
          }, stop_at_end, start, &r.interrupt);
        }
        if (stream) {
          std::string tail = stream->flush();
          if (!tail.empty()) on_token(-1, nb::bytes(tail.data(), tail.size()));
        }
        return stats_dict(s);
      }, nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("on_token"), nb::arg("stop_at_end") = true,
         nb::arg("start") = 0);
}

}  // namespace iron::python
