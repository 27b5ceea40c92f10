#include "iron/models/describe.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>
#include <vector>

#include "iron/error.hpp"
#include "iron/io/files.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/bert.hpp"
#include "iron/models/encoder.hpp"
#include "iron/models/llama_config.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::models {
namespace {

// Text from the file, quoted: escaped as every message escapes it (control bytes and invalid
// UTF-8 as \xNN), cut after `max_chars` characters with the length it had.
std::string quoted(std::string_view text, size_t max_chars) { return escaped(text, max_chars, '"'); }

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}
std::string pad_left(const std::string& text, size_t width) {
  return text.size() < width ? std::string(width - text.size(), ' ') + text : text;
}

template <class T>
std::string scalar_text(const T& value, const DescribeOptions& options) {
  if constexpr (std::is_same_v<T, std::string>) {
    return quoted(value, options.string_chars);
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    return number(double(value));
  } else if constexpr (std::is_same_v<T, io::GgufArray>) {
    return "[" + std::to_string(value.size()) + " items]";
  } else {
    return std::to_string(value);
  }
}

std::string value_text(const io::GgufValue& value, const DescribeOptions& options) {
  if (const auto* array = std::get_if<io::GgufArray>(&value.value)) {
    return std::visit(
        [&](const auto& items) {
          std::string out = "[" + std::to_string(items.size()) + "]";
          if (!items.empty()) out += ' ';
          const size_t shown = std::min(items.size(), options.array_items);
          for (size_t i = 0; i < shown; ++i) {
            using Item = typename std::decay_t<decltype(items)>::value_type;
            out += (i ? ", " : "") + scalar_text(Item(items[i]), options);
          }
          if (shown < items.size()) out += shown ? ", ..." : "...";
          return out;
        },
        array->items);
  }
  return std::visit([&](const auto& held) { return scalar_text(held, options); }, value.value);
}

// Tensor rows and totals, shared by both formats.
struct TensorRow {
  std::string name, dtype;
  Shape shape;
  int64_t nbytes;  // -1 when unknown
  uint64_t offset;
};

void write_tensors(std::ostream& out, const std::vector<TensorRow>& rows,
                   const DescribeOptions& options) {
  out << "tensors: " << rows.size() << "\n";
  if (options.tensors && !rows.empty()) {
    size_t name_width = 4, dtype_width = 5, shape_width = 5;
    for (const TensorRow& row : rows) {
      name_width = std::max(name_width, row.name.size());
      dtype_width = std::max(dtype_width, row.dtype.size());
      shape_width = std::max(shape_width, shape_text(row.shape).size());
    }
    name_width = std::min<size_t>(name_width, 64);
    out << "  " << pad("name", name_width) << "  " << pad("dtype", dtype_width) << "  "
        << pad("shape", shape_width) << "  " << pad_left("bytes", 12) << "  "
        << pad_left("offset", 12) << "\n";
    for (const TensorRow& row : rows) {
      out << "  " << pad(row.name, name_width) << "  " << pad(row.dtype, dtype_width) << "  "
          << pad(shape_text(row.shape), shape_width) << "  "
          << pad_left(row.nbytes < 0 ? "?" : std::to_string(row.nbytes), 12) << "  "
          << pad_left(std::to_string(row.offset), 12) << "\n";
    }
  }
  int64_t parameters = 0;
  uint64_t bytes = 0;
  bool unknown = false;
  std::map<std::string, std::pair<size_t, uint64_t>> by_dtype;
  for (const TensorRow& row : rows) {
    parameters += element_count(row.shape);
    auto& [count, dtype_bytes] = by_dtype[row.dtype];
    ++count;
    if (row.nbytes < 0) {
      unknown = true;
    } else {
      bytes += uint64_t(row.nbytes);
      dtype_bytes += uint64_t(row.nbytes);
    }
  }
  out << "totals: " << rows.size() << " tensors, " << parameters << " parameters, " << bytes
      << " bytes (" << human_bytes(bytes) << ")" << (unknown ? " plus tensors of unknown size" : "")
      << "\n";
  for (const auto& [dtype, totals] : by_dtype)
    out << "  " << pad(dtype, 8) << " " << pad_left(std::to_string(totals.first), 6) << " tensors "
        << pad_left(std::to_string(totals.second), 12) << " bytes (" << human_bytes(totals.second)
        << ")\n";
}

std::string tokenizer_summary(const text::Tokenizer& t) {
  std::ostringstream out;
  auto token = [&](const char* what, std::optional<int32_t> id) {
    out << ", " << what << " ";
    if (id)
      out << *id << " " << quoted(t.token_string(*id), 32);
    else
      out << "none";
  };
  out << "vocab " << t.vocab_size();
  token("bos", t.bos_id());
  token("eos", t.eos_id());
  out << ", add bos " << (t.add_bos_by_default() ? "yes" : "no") << ", chat template "
      << (t.chat_template() ? "present (" + std::to_string(t.chat_template()->size()) + " bytes)"
                            : std::string("absent"));
  return out.str();
}

std::string tokenizer_kind(const text::TokenizerData& d) {
  if (d.model == "llama") return "llama (SentencePiece BPE)";
  if (d.model == "gpt2")
    return "gpt2 (byte-level BPE, pre-tokenizer " +
           (d.pre.empty() ? std::string("default") : escaped(d.pre)) + ")";
  return escaped(d.model);
}

// Runs `fn`, turning an iron::Error into a line of the description.
void section(std::ostream& out, const std::string& label, const std::function<std::string()>& fn) {
  try {
    const std::string text = fn();  // before the label: a failure prints the label once
    out << label << ": " << text << "\n";
  } catch (const Error& e) {
    out << label << ": error: " << e.what() << "\n";
  }
}

void describe_gguf(std::ostream& out, std::shared_ptr<const io::MappedFile> file,
                   const DescribeOptions& options) {
  const io::GgufFile gguf = io::GgufFile::parse(std::move(file));
  out << "format: GGUF version " << gguf.version() << ", alignment " << gguf.alignment()
      << ", tensor data at byte " << gguf.data_offset() << "\n";
  out << "metadata: " << gguf.metadata().size() << " keys\n";
  size_t key_width = 0, type_width = 0;
  for (const io::GgufKeyValue& kv : gguf.metadata()) {
    key_width = std::max(key_width, escaped(kv.key).size());
    type_width = std::max(type_width, kv.value.type_name().size());
  }
  key_width = std::min<size_t>(key_width, 56);
  for (const io::GgufKeyValue& kv : gguf.metadata())
    out << "  " << pad(escaped(kv.key), key_width) << "  " << pad(kv.value.type_name(), type_width) << "  "
        << value_text(kv.value, options) << "\n";

  std::vector<TensorRow> rows;
  for (const io::GgufTensorInfo& t : gguf.tensors())
    rows.push_back({escaped(t.name), io::ggml_type_name(t.ggml_type), t.shape(), t.nbytes, t.offset});
  write_tensors(out, rows, options);

  if (!options.config_path.empty())
    out << "note: the config.json is not read: a GGUF file carries its own configuration\n";
  // The model and its tokenizer, when the file says what they are.
  const io::GgufValue* arch = gguf.find("general.architecture");
  const auto* arch_name = arch ? std::get_if<std::string>(&arch->value) : nullptr;
  if (arch_name && (*arch_name == "llama" || *arch_name == "gemma3" || *arch_name == "qwen2")) {
    section(out, "model config", [&] { return llama_config_from_gguf(gguf).describe(); });
  } else if (arch_name) {
    out << "model: architecture " << quoted(*arch_name, 32) << " (not one IRON runs: llama, gemma3, qwen2)\n";
  }
  if (gguf.find("tokenizer.ggml.model")) {
    section(out, "tokenizer", [&] {
      text::TokenizerData data = text::tokenizer_data_from_gguf(gguf);
      const std::string kind = tokenizer_kind(data);
      const text::Tokenizer t = text::Tokenizer::build(std::move(data));
      return kind + ", " + tokenizer_summary(t);
    });
  }
}

void describe_safetensors(std::ostream& out, std::shared_ptr<const io::MappedFile> file,
                          const DescribeOptions& options) {
  const io::SafetensorsFile st = io::SafetensorsFile::parse(std::move(file));
  out << "format: safetensors, header " << (st.data_offset() - 8) << " bytes, tensor data at byte "
      << st.data_offset() << "\n";
  out << "metadata: " << st.metadata().size() << " keys\n";
  size_t key_width = 0;
  for (const auto& [key, value] : st.metadata()) key_width = std::max(key_width, escaped(key).size());
  for (const auto& [key, value] : st.metadata())
    out << "  " << pad(escaped(key), std::min<size_t>(key_width, 56)) << "  string  "
        << quoted(value, options.string_chars) << "\n";

  std::vector<TensorRow> rows;
  for (const io::SafetensorsTensorInfo& t : st.tensors())
    rows.push_back({escaped(t.name), escaped(t.dtype_name), t.shape, int64_t(t.nbytes), t.offset});
  write_tensors(out, rows, options);

  if (options.config_path.empty()) return;
  section(out, "model config", [&] {
    const nlohmann::json config = io::read_json_file(options.config_path);
    if (config.is_object() && config.value("model_type", nlohmann::json("")) == nlohmann::json("bert")) {
      const BertConfig c = bert_config_from_hf(config);
      return "bert: " + std::to_string(c.layers) + " layers, dim " + std::to_string(c.dim) + ", " +
             std::to_string(c.heads) + " heads, ffn " + std::to_string(c.ffn) + ", vocab " + std::to_string(c.vocab) +
             ", " + std::to_string(c.max_positions) + " positions";
    }
    return llama_config_from_hf(config).describe();
  });
  // A sentence encoder's directory: the sentence-transformers pipeline after the model.
  const std::string dir = std::filesystem::path(options.config_path).parent_path().string();
  if (is_sentence_encoder(dir.empty() ? "." : dir))
    section(out, "sentence encoder", [&] {
      const nlohmann::json config = io::read_json_file(options.config_path);
      const int64_t positions = config.value("max_position_embeddings", int64_t(512)),
                    width = config.value("hidden_size", int64_t(0));
      const SentenceConfig s = sentence_config_from_dir(dir.empty() ? "." : dir, positions, width);
      std::string text = s.cls_pooling ? "CLS pooling" : "mean pooling";
      int64_t size = width;
      for (const DenseModule& m : s.dense) text += ", dense " + std::to_string(m.in) + " -> " + std::to_string(size = m.out);
      text += std::string(s.normalize ? ", normalised" : "") + ", vectors of " + std::to_string(size) +
              ", sentences cut at " + std::to_string(s.max_seq_length) + " tokens";
      if (!s.prompts.empty()) {
        text += ", prompts:";
        for (const auto& [name, prompt] : s.prompts) text += " " + escaped(name, 40);
        text += s.default_prompt ? " (default " + escaped(*s.default_prompt, 40) + ")" : " (none by default)";
      }
      return text;
    });
  const auto tokenizer_json =
      std::filesystem::path(options.config_path).parent_path() / "tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tokenizer_json, ec)) {
    section(out, "tokenizer", [&] {
      text::TokenizerData data = text::read_hf_tokenizer_json(tokenizer_json.string());
      const std::string kind = tokenizer_kind(data);
      const text::Tokenizer t = text::Tokenizer::build(std::move(data));
      return kind + ", " + tokenizer_summary(t);
    });
  }
}

}  // namespace

std::string describe_checkpoint(const std::string& given, const DescribeOptions& given_options) {
  // A Hugging Face directory: its model.safetensors, described with its config.json.
  std::string path = given;
  DescribeOptions options = given_options;
  std::error_code ec;
  if (std::filesystem::is_directory(given, ec)) {
    const std::filesystem::path dir(given);
    if (!std::filesystem::exists(dir / "model.safetensors", ec))
      io_error(escaped_path(given) + ": is a directory, not a regular file, and holds no model.safetensors (a "
                                     "Hugging Face model's directory holds it, beside config.json)");
    path = (dir / "model.safetensors").string();
    if (options.config_path.empty() && std::filesystem::exists(dir / "config.json", ec))
      options.config_path = (dir / "config.json").string();
  }
  auto file = io::MappedFile::open(path);
  // A config named but unreadable is an error, not a note in the description.
  if (!options.config_path.empty()) io::require_regular_file(options.config_path, "the config");
  std::ostringstream out;
  out << "file: " << escaped_path(path) << " (" << file->size() << " bytes, " << human_bytes(file->size())
      << ")\n";
  const uint8_t* bytes = file->data();
  if (file->size() >= 4 && std::memcmp(bytes, "GGUF", 4) == 0) {
    describe_gguf(out, std::move(file), options);
    return out.str();
  }
  size_t first = 8;
  while (first < file->size() && first < 64 && bytes[first] == ' ') ++first;
  if (file->size() > 8 && first < file->size() && bytes[first] == '{') {
    describe_safetensors(out, std::move(file), options);
    return out.str();
  }
  value_error(escaped_path(path) + ": not a GGUF or safetensors file (unrecognised first bytes)");
}

}  // namespace iron::models
