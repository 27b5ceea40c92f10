// Profiles: tunable values by operator and dimensions, as (operator, dims, tunables) entries.
// An open tunable comes from the most specific matching entry (a dimension left out matches any,
// a subclass matches its base's entries); equally specific entries that disagree are an error.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "iron/operator.hpp"

namespace iron {

class Profile {
 public:
  struct Entry {
    const Declaration* op;
    Fields dims;
    Fields tunables;
  };

  /// Adds an entry for operator `op`: its params to match (one left out matches any) and its
  /// tunables to give. Refuses unknown fields and an entry that gives no tunable.
  void add(std::string_view op, const Fields& fields);
  /// The tunables a step of `op` constructed with `given` gets: each from the most specific entry.
  Fields tunables_for(const Declaration& op, const Fields& given) const;
  /// Builds `op` from `given` with its open tunables filled from this profile.
  std::shared_ptr<Operator> make(std::string_view op, const Fields& given) const;

  /// Every dimension (param) a step of `op` made with `given` has: given, else its default.
  static Fields dims(const Declaration& op, const Fields& given);
  /// Whether an entry's matched dims cover `dims`.
  static bool matches(const Fields& matched, const Fields& dims);

  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  /// Writes {"entries": [...]}, one entry a line.
  void save(const std::string& path) const;
  /// Reads what save() wrote; names the file and the entry in every error.
  static Profile load(const std::string& path);
  /// Parses the text of a profile file; `name` stands for the file in error messages.
  static Profile parse(std::string_view text, const std::string& name = "profile");
  /// A profile file, or a directory holding `<device>.json` (an absent file: an empty profile).
  static Profile load_for_device(const std::string& path, std::string_view device);

 private:
  std::vector<Entry> entries_;
};

}  // namespace iron
