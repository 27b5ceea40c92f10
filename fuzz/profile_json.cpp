// Bytes as a profile file -> Profile::parse; every entry's tunables looked up and its operator
// made; what parses saves and loads back to the same entries.
#include <algorithm>

#include "fuzz_util.hpp"
#include "iron/profile.hpp"
#include "targets.hpp"

namespace iron::fuzz {
namespace {

/// The fields by name (a loaded entry lists them in the file's key order).
std::vector<std::pair<std::string, FieldValue>> sorted(const Fields& fields) {
  auto items = fields.items();
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return items;
}

}  // namespace

void profile_json(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    const Profile profile =
        Profile::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    for (const Profile::Entry& e : profile.entries()) {
      IRON_FUZZ_CHECK(!e.tunables.empty());
      expect_ok_or_error([&] { (void)profile.tunables_for(*e.op, e.dims); });
      expect_ok_or_error([&] { (void)profile.make(e.op->name, e.dims); });
    }
    const std::string path = temp_dir() / "profile.json";
    profile.save(path);
    const Profile again = Profile::load(path);
    IRON_FUZZ_CHECK(again.entries().size() == profile.entries().size());
    for (size_t i = 0; i < again.entries().size(); ++i) {
      const Profile::Entry &a = profile.entries()[i], &b = again.entries()[i];
      IRON_FUZZ_CHECK(a.op == b.op);
      IRON_FUZZ_CHECK(sorted(a.dims) == sorted(b.dims));
      IRON_FUZZ_CHECK(sorted(a.tunables) == sorted(b.tunables));
    }
  });
}

}  // namespace iron::fuzz
