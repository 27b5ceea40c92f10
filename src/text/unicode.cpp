#include "text/unicode.hpp"

#include <algorithm>
#include <array>

namespace iron::text::detail {

CharClass classify(uint32_t cp) {
  const uint32_t* begin = kCodepointClassRuns;
  const uint32_t* end = kCodepointClassRuns + kCodepointClassRunCount;
  // The last run whose first code point is <= cp; runs are sorted and the first starts at 0.
  const uint32_t key = (cp << 2) | 3u;
  const uint32_t* it = std::upper_bound(begin, end, key);
  if (it == begin || cp > 0x10FFFF) return CharClass::other;
  return CharClass((*(it - 1)) & 3u);
}

Utf8Unit decode_utf8(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return uint8_t(s[i]); };
  const uint8_t b0 = byte(pos);
  const Utf8Unit invalid{b0, 1, false};
  if (b0 < 0x80) return {b0, 1, true};
  uint32_t len, cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return invalid;  // a continuation byte or 0xF8..0xFF
  }
  if (pos + len > s.size()) return invalid;
  for (uint32_t i = 1; i < len; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, len, true};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Unit u = decode_utf8(s, i);
    if (!u.valid) return false;
    i += u.len;
  }
  return true;
}

size_t utf8_emittable_prefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of a character the string cuts short.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = uint8_t(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    size_t need = 0;
    if ((b & 0xE0) == 0xC0) need = 2;
    if ((b & 0xF0) == 0xE0) need = 3;
    if ((b & 0xF8) == 0xF0) need = 4;
    if (need <= back) return n;  // complete (or not a lead byte at all)
    // Hold the tail back only if it could still become a valid character: padding it with
    // continuation bytes that keep the value in range must decode.
    std::string probe(s.substr(n - back));
    const char fill[2] = {char(0x80), char(0xBF)};
    for (char f : fill) {
      std::string p = probe;
      p.append(need - back, f);
      if (decode_utf8(p, 0).valid) return n - back;
    }
    return n;
  }
  return n;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Unit u = decode_utf8(s, i);
    if (u.valid) {
      out.append(s.substr(i, u.len));
    } else {
      append_utf8(out, 0xFFFD);
    }
    i += u.len;
  }
  return out;
}

namespace {

struct ByteLevelAlphabet {
  std::array<uint32_t, 256> to_cp{};
  ByteLevelAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? uint32_t(b) : next++;
    }
  }
};

const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet a;
  return a;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return alphabet().to_cp[b]; }

int unicode_to_byte(uint32_t cp) {
  if (cp < 256) {
    if (alphabet().to_cp[cp] == cp) return int(cp);
    return -1;
  }
  // Moved bytes take U+0100.. in byte order, so a short scan finds them (68 of them).
  for (int b = 0; b < 256; ++b) {
    if (alphabet().to_cp[b] == cp) return b;
  }
  return -1;
}

}  // namespace iron::text::detail
