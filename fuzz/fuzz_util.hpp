// Shared pieces of the libFuzzer targets: the one exception a target expects (iron::Error), temp
// files for the entry points that read a path, and "touch everything" walks over parsed files.
//
// A target catches iron::Error and nothing else: any other exception escapes to libFuzzer (which
// reports it as a crash), as do sanitizer reports, leaks and broken invariants (fuzz_check).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/tensor.hpp"

namespace iron::fuzz {

/// Runs `fn`; an iron::Error is the expected way to refuse bad input. Returns whether it succeeded.
template <class Fn>
bool expect_ok_or_error(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const iron::Error&) {
    return false;
  }
}

/// A broken invariant: a finding. It throws something other than iron::Error, which libFuzzer
/// reports as a crash (keeping the input) and a regression test reports as a failure.
class InvariantBroken : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};
#define IRON_FUZZ_CHECK(cond)                                                                      \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      throw ::iron::fuzz::InvariantBroken(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                          ": " + #cond);                                           \
  } while (0)

inline std::vector<uint8_t> to_vector(const uint8_t* data, size_t size) {
  return std::vector<uint8_t>(data, data + size);
}

inline std::shared_ptr<const io::MappedFile> in_memory(const uint8_t* data, size_t size,
                                                       const char* name = "fuzz-input") {
  return io::MappedFile::from_bytes(name, to_vector(data, size));
}

/// A private folder for this process's temporary files (removed at exit).
inline const std::filesystem::path& temp_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base =
        std::filesystem::temp_directory_path() / ("iron_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(base);
    std::atexit([] {
      // Without throwing where the temporary folder itself is gone by now (a test program's own
      // folder, tests/temp_dir.cpp, is removed before the program exits).
      std::error_code ec;
      const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
      if (!ec) std::filesystem::remove_all(tmp / ("iron_fuzz_" + std::to_string(::getpid())), ec);
    });
    return base;
  }();
  return dir;
}

/// Writes `bytes` to temp_dir()/name and returns the path.
inline std::string write_temp(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = temp_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return path.string();
}

inline void remove_temp(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove(temp_dir() / name, ec);
}

/// Reads every byte of a tensor view (so ASan sees any read past the mapping) and, for a small
/// tensor, converts it to f32 (the dequantising kernels read whole blocks).
inline uint64_t touch(const Tensor& t) {
  uint64_t sum = 0;
  const auto* bytes = static_cast<const uint8_t*>(t.data());
  const int64_t n = t.nbytes();
  IRON_FUZZ_CHECK(n >= 0);
  for (int64_t i = 0; i < n; ++i) sum += bytes[i];
  if (t.numel() <= (int64_t(1) << 16)) {
    expect_ok_or_error([&] {
      Tensor f = t.to(DType::f32);
      IRON_FUZZ_CHECK(f.numel() == t.numel());
    });
  }
  return sum;
}

/// Every metadata getter on every key, and every tensor through tensor().
inline uint64_t touch(const io::GgufFile& gguf) {
  uint64_t sum = gguf.version() + gguf.alignment() + gguf.data_offset();
  for (const io::GgufKeyValue& kv : gguf.metadata()) {
    IRON_FUZZ_CHECK(gguf.find(kv.key) != nullptr);
    sum += kv.value.type_name().size();
    expect_ok_or_error([&] { sum += gguf.get_int(kv.key).value_or(0); });
    expect_ok_or_error([&] { sum += uint64_t(gguf.get_float(kv.key).value_or(0) != 0); });
    expect_ok_or_error([&] { sum += gguf.get_string(kv.key).value_or("").size(); });
    expect_ok_or_error([&] { sum += gguf.get_bool(kv.key).value_or(false); });
    expect_ok_or_error([&] { sum += gguf.get_strings(kv.key).size(); });
    expect_ok_or_error([&] { sum += gguf.get_floats(kv.key).size(); });
    expect_ok_or_error([&] { sum += gguf.get_ints(kv.key).size(); });
  }
  for (const io::GgufTensorInfo& info : gguf.tensors()) {
    IRON_FUZZ_CHECK(gguf.find_tensor(info.name) == &info);
    sum += io::ggml_type_name(info.ggml_type).size() + info.shape().size();
    expect_ok_or_error([&] {
      Tensor t = gguf.tensor(info.name);
      IRON_FUZZ_CHECK(t.numel() == info.numel);
      IRON_FUZZ_CHECK(info.nbytes < 0 || t.nbytes() == info.nbytes);
      IRON_FUZZ_CHECK(info.offset + uint64_t(t.nbytes()) <= gguf.file()->size());
      sum += touch(t);
    });
  }
  return sum;
}

/// The input split at its first NUL byte: what comes before, and what comes after (if any).
inline std::pair<std::string_view, std::optional<std::string_view>> split_at_nul(
    const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, std::nullopt};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

/// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF); written
/// here independently of the library's own decoder.
inline bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = uint8_t(s[i]);
    size_t len = b < 0x80           ? 1
                 : (b >> 5) == 0x6  ? 2
                 : (b >> 4) == 0xE  ? 3
                 : (b >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const auto c = uint8_t(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

/// Where the models are: $IRON_SHARED_DIR/models/NAME, else ../shared/models/NAME next to the
/// source tree; local ones (SmolLM2) under models/ in the source tree.
inline std::string shared_model_path(const std::string& name) {
  if (const char* shared = std::getenv("IRON_SHARED_DIR"); shared && *shared)
    return std::string(shared) + "/models/" + name;
  return std::string(IRON_SOURCE_DIR) + "/../shared/models/" + name;
}
inline std::string local_model_path(const std::string& name) {
  return std::string(IRON_SOURCE_DIR) + "/models/" + name;
}

}  // namespace iron::fuzz
