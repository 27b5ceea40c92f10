// Unicode NFC (UAX #15): decompose canonically (Hangul syllables by arithmetic), order each run of
// non-starters by combining class, then compose each starter with the characters after it that it
// is not blocked from. The tables come from scripts/gen_nfc_tables.py.
#include "text/nfc.hpp"

#include <algorithm>
#include <vector>

#include "text/unicode.hpp"

namespace iron::text::detail {
namespace {

// Hangul syllables: S = SBase + (L * VCount + V) * TCount + T (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const NfcDecomposition* end = kNfcDecompositions + kNfcDecompositionsCount;
  const NfcDecomposition* it =
      std::lower_bound(kNfcDecompositions, end, cp, [](const NfcDecomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kNfcDecompositionData + it->offset, kNfcDecompositionData + it->offset + it->length);
}

/// The primary composite of (a, b), or 0 when there is none.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const NfcComposition* end = kNfcCompositions + kNfcCompositionsCount;
  const auto before = [](const NfcComposition& c, const std::pair<uint32_t, uint32_t>& k) {
    return c.first < k.first || (c.first == k.first && c.second < k.second);
  };
  const NfcComposition* it = std::lower_bound(kNfcCompositions, end, std::pair{a, b}, before);
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

/// NFC of one run of valid characters, appended to `out` as UTF-8.
void normalise_run(const std::vector<uint32_t>& run, std::string& out) {
  std::vector<uint32_t> d;
  d.reserve(run.size() + 8);
  for (const uint32_t cp : run) decompose(cp, d);
  // Canonical ordering: each run of non-starters sorted by class, stably.
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + std::ptrdiff_t(i), d.begin() + std::ptrdiff_t(j),
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Composition: a character joins the last starter unless a character between them has a class
  // of 0 or at least its own (it is blocked).
  std::vector<uint32_t> c;
  c.reserve(d.size());
  size_t starter = SIZE_MAX;  // index in c of the last starter
  int last_class = -1;        // class of the last character kept after the starter (-1: none)
  for (const uint32_t cp : d) {
    const int cls = combining_class(cp);
    if (starter != SIZE_MAX && (last_class == -1 || (last_class != 0 && last_class < cls))) {
      if (const uint32_t composite = compose(c[starter], cp)) {
        c[starter] = composite;
        continue;
      }
    }
    if (cls == 0) {
      starter = c.size();
      last_class = -1;
    } else {
      last_class = cls;
    }
    c.push_back(cp);
  }
  for (const uint32_t cp : c) append_utf8(out, cp);
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  const uint32_t* end = kNfcCombiningClasses + kNfcCombiningClassesCount;
  const uint32_t* it = std::lower_bound(kNfcCombiningClasses, end, cp << 8);
  return it != end && (*it >> 8) == cp ? uint8_t(*it & 0xFF) : 0;
}

std::string nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char ch) { return uint8_t(ch) < 0x80; })) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> run;
  for (size_t i = 0; i < text.size();) {
    const Utf8Unit u = decode_utf8(text, i);
    if (u.valid) {
      run.push_back(u.cp);
    } else {
      normalise_run(run, out);
      run.clear();
      out.append(text.substr(i, u.len));
    }
    i += u.len;
  }
  normalise_run(run, out);
  return out;
}

}  // namespace iron::text::detail
