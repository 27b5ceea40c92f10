// UTF-8 and code point classes for the tokenizers (internal). Text from users and token strings
// from model files are untrusted, so decoding never fails: a byte that does not start a valid
// sequence is reported as one invalid unit and the caller decides what it means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iron::text::detail {

enum class CharClass : uint8_t { other = 0, letter = 1, number = 2, space = 3 };

extern const uint32_t kCodepointClassRuns[];
extern const size_t kCodepointClassRunCount;

/// The class of a code point (\p{L}, \p{N}, \s or anything else) from the generated runs.
CharClass classify(uint32_t cp);

/// One decoded unit of a UTF-8 string: a whole valid character, or a single invalid byte.
struct Utf8Unit {
  uint32_t cp;   // the code point; for an invalid byte, the byte value
  uint32_t len;  // bytes taken, 1..4
  bool valid;
};

/// Decodes the unit at `pos` (< s.size()); rejects overlong forms, surrogates, > U+10FFFF and
/// truncated sequences (each offending byte becomes its own invalid unit).
Utf8Unit decode_utf8(std::string_view s, size_t pos);

void append_utf8(std::string& out, uint32_t cp);

bool is_valid_utf8(std::string_view s);

/// How many leading bytes of `s` can be emitted without cutting a character in half: all of it
/// unless it ends in the first bytes of a character that is still valid so far.
size_t utf8_emittable_prefix(std::string_view s);

/// Replaces every invalid byte with U+FFFD, so the result is valid UTF-8.
std::string sanitize_utf8(std::string_view s);

/// GPT-2's byte-level alphabet: each byte gets a printable code point (printable Latin-1 bytes
/// stay themselves, the rest move to U+0100 and up), so a byte string becomes visible text.
uint32_t byte_to_unicode(uint8_t b);
/// The byte a byte-level code point stands for, or -1 when it is not in the alphabet.
int unicode_to_byte(uint32_t cp);

}  // namespace iron::text::detail
