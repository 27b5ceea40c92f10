#include "iron/error.hpp"

#include <algorithm>

#include "iron/log.hpp"

namespace iron {

namespace {

// The length of the valid UTF-8 sequence at text[i] (no overlong forms, surrogates or code
// points past U+10FFFF), or 0.
size_t utf8_length(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > text.size()) return 0;
  uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if ((c >> 6) != 0x2) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  // C1 controls (U+0080..U+009F) act on terminals too.
  if (cp >= 0x80 && cp <= 0x9F) return 0;
  return len;
}

std::string with_commas(size_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Appends the escaped form of the character at text[i] (one valid UTF-8 sequence, or one byte)
// to `out`; returns where the next character starts.
size_t escape_one(std::string& out, std::string_view text, size_t i, char quote) {
  static const char* hex = "0123456789abcdef";
  const auto c = static_cast<unsigned char>(text[i]);
  switch (c) {
    case '\\': out += "\\\\"; return i + 1;
    case '\n': out += "\\n"; return i + 1;
    case '\t': out += "\\t"; return i + 1;
    case '\r': out += "\\r"; return i + 1;
    default: break;
  }
  if (quote != 0 && c == static_cast<unsigned char>(quote)) {
    out += '\\';
    out += quote;
    return i + 1;
  }
  const size_t len = utf8_length(text, i);
  if (len == 0 || c < 0x20 || c == 0x7f) {
    out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    return i + 1;
  }
  out.append(text.substr(i, len));
  return i + len;
}

std::string length_note(std::string_view text) { return " (" + with_commas(text.size()) + " bytes)"; }

}  // namespace

std::string escaped(std::string_view text, size_t max_chars, char quote) {
  std::string out;
  if (quote != 0) out += quote;
  size_t i = 0;
  for (size_t chars = 0; i < text.size() && chars < max_chars; ++chars) i = escape_one(out, text, i, quote);
  if (quote != 0) out += quote;
  if (i < text.size()) out += "..." + length_note(text);
  return out;
}

std::string escaped_path(std::string_view path, size_t max_chars) {
  // Where each character starts (as escape_one() steps), so that the cut falls between two.
  std::vector<size_t> starts;
  for (size_t i = 0; i < path.size(); i += std::max<size_t>(utf8_length(path, i), 1)) starts.push_back(i);
  if (starts.size() <= max_chars) return escaped(path, max_chars);
  // The end says which file, the start where it is: a third of the room for the start.
  const size_t head = max_chars / 3, tail = max_chars - head;
  return escaped(path.substr(0, starts[head]), head) + "..." +
         escaped(path.substr(starts[starts.size() - tail]), tail) + length_note(path);
}

OutOfMemory::OutOfMemory(int64_t bytes, const std::string& purpose, const std::string& hint)
    : Error(ErrorKind::value, "out of memory: cannot allocate " + with_commas(size_t(std::max<int64_t>(bytes, 0))) +
                                  " bytes for " + purpose + (hint.empty() ? "" : "; " + hint)),
      bytes_(bytes),
      purpose_(purpose) {}

void out_of_memory(int64_t bytes, const std::string& purpose) { throw OutOfMemory(bytes, purpose); }

std::string cut_list(const std::vector<std::string>& items, const std::string& what, size_t first) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < first; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > first) {
    out += ", ... and " + with_commas(items.size() - first) + " more";
    if (log_level() <= LogLevel::debug) {
      std::string all;
      for (size_t i = 0; i < items.size(); ++i) all += (i ? ", " : "") + items[i];
      log(LogLevel::debug, what + " (all " + std::to_string(items.size()) + "): " + all);
    }
  }
  return out;
}

}  // namespace iron
