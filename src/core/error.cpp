#include "iron/error.hpp"

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

}  // namespace

std::string escaped(std::string_view text, size_t max_chars) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0, chars = 0; i < text.size(); ++i, ++chars) {
    if (chars == max_chars) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (const size_t len = utf8_length(text, i); len == 0 || c < 0x20 || c == 0x7f) {
          out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        } else {
          out.append(text.substr(i, len));
          i += len - 1;
        }
    }
  }
  return out;
}

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
