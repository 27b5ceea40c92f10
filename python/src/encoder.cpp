// iron.Encoder: a sentence encoder (models::SentenceEncoder, what `iron embed` runs) from Python.
// A call tokenises, batches by length and runs the model with the GIL released, and returns one
// float32 row per text.
#include <optional>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "iron/error.hpp"
#include "iron/models/encoder.hpp"

namespace iron::python {

void bind_encoder(nb::module_& m) {
  nb::module_ em = m.def_submodule("encoder", "models::SentenceEncoder (use iron.Encoder).");
  em.def("is_sentence_encoder", [](const std::string& path) { return models::is_sentence_encoder(path); });
  nb::class_<models::SentenceEncoder>(em, "Encoder")
      .def_static("open", [](const std::string& path, int threads, const std::string& device, Precision precision,
                             std::optional<bool> normalize, int64_t batch) {
        models::EncoderOptions o;
        o.threads = threads;
        o.device = device;
        o.precision = precision;
        o.normalize = normalize;
        o.max_batch = batch;
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(device_mutex());
        return models::SentenceEncoder::open(path, o).release();
      }, nb::rv_policy::take_ownership)
      .def("embed", [](models::SentenceEncoder& e, const std::vector<std::string>& texts,
                       std::optional<std::string> prompt_name, int64_t dimensions) {
        // As `iron embed`: a prompt by name ("none": none; unset: the model's default), and
        // Matryoshka's first `dimensions` values (0: all).
        if (dimensions < 0) value_error("dimensions is at least 1 (None: all of them)");
        if (dimensions > e.dim())
          value_error("dimensions " + std::to_string(dimensions) + " is more than the model's " +
                      std::to_string(e.dim()));
        const std::string prompt = prompt_name == "none" ? "" : e.prompt(prompt_name);
        std::vector<std::vector<float>> vectors;
        {
          nb::gil_scoped_release release;
          std::vector<std::vector<int32_t>> ids;
          ids.reserve(texts.size());
          for (const std::string& t : texts) ids.push_back(e.ids(t, prompt));
          std::lock_guard<std::mutex> lock(device_mutex());
          vectors = e.embed_ids(ids);
          if (dimensions > 0) models::truncate_dimensions(vectors, dimensions, e.normalizes());
        }
        const int64_t width = dimensions > 0 ? dimensions : e.dim();
        Tensor out = Tensor::empty({int64_t(vectors.size()), width}, f32);
        float* rows = out.mutable_data_as<float>();
        for (size_t i = 0; i < vectors.size(); ++i)
          std::copy(vectors[i].begin(), vectors[i].end(), rows + int64_t(i) * width);
        return array_from(out, false);
      })
      .def("ids", [](const models::SentenceEncoder& e, const std::string& text, std::optional<std::string> prompt_name) {
        return e.ids(text, prompt_name == "none" ? "" : e.prompt(prompt_name));
      })
      .def_prop_ro("dim", &models::SentenceEncoder::dim)
      .def_prop_ro("normalizes", &models::SentenceEncoder::normalizes)
      .def_prop_ro("family", &models::SentenceEncoder::family)
      .def_prop_ro("max_seq_length", [](const models::SentenceEncoder& e) { return e.sentence_config().max_seq_length; })
      .def_prop_ro("prompts", [](const models::SentenceEncoder& e) { return e.sentence_config().prompts; })
      .def_prop_ro("default_prompt_name",
                   [](const models::SentenceEncoder& e) { return e.sentence_config().default_prompt; });
}

}  // namespace iron::python
