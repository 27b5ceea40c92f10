#include "iron/profile.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "iron/error.hpp"
#include "iron/io/files.hpp"

namespace iron {

void Profile::add(std::string_view op, const Fields& fields) {
  const Declaration& d = *catalog_entry(op).declaration;
  Fields dims, tunables;
  std::vector<std::string> unknown;
  for (const auto& [name, value] : fields.items()) {
    if (d.tunable(name))
      tunables.set(name, value);
    else if (d.param(name))
      dims.set(name, value);
    else
      unknown.push_back(name);
  }
  if (!unknown.empty()) {
    std::string m = d.name + " declares no field";
    for (const auto& u : unknown) m += " '" + u + "'";
    type_error(m);
  }
  if (tunables.empty()) type_error("an entry for " + d.name + " must give a tunable");
  entries_.push_back({&d, std::move(dims), std::move(tunables)});
}

Fields Profile::dims(const Declaration& op, const Fields& given) {
  Fields dims;
  for (const FieldDecl& p : op.params) {
    if (const FieldValue* v = given.find(p.name))
      dims.set(p.name, *v);
    else if (p.default_value)
      dims.set(p.name, *p.default_value);
  }
  return dims;
}

bool Profile::matches(const Fields& matched, const Fields& dims) {
  for (const auto& [name, value] : matched.items()) {
    const FieldValue* v = dims.find(name);
    if (!v || !(*v == value)) return false;
  }
  return true;
}

Fields Profile::tunables_for(const Declaration& op, const Fields& given) const {
  Fields dims_of_call = dims(op, given);
  struct Choice {
    size_t rank;
    FieldValue value;
  };
  std::vector<std::pair<std::string, Choice>> chosen;
  for (const Entry& e : entries_) {
    if (!op.is_a(*e.op) || !matches(e.dims, dims_of_call)) continue;
    size_t rank = e.dims.items().size();
    for (const auto& [name, value] : e.tunables.items()) {
      const std::string& tunable = name;  // clang before 16 cannot capture a structured binding
      auto it =
          std::find_if(chosen.begin(), chosen.end(), [&](auto& c) { return c.first == tunable; });
      if (it == chosen.end()) {
        chosen.emplace_back(name, Choice{rank, value});
      } else if (rank > it->second.rank) {
        it->second = {rank, value};
      } else if (rank == it->second.rank && !(it->second.value == value)) {
        value_error("profile is ambiguous for " + op.name + " " + dims_of_call.str() + ": " + name +
                    "=" + to_string(it->second.value) + " and " + name + "=" + to_string(value) +
                    " from entries of equal specificity");
      }
    }
  }
  Fields out;
  for (const auto& [name, c] : chosen) out.set(name, c.value);
  return out;
}

std::shared_ptr<Operator> Profile::make(std::string_view op, const Fields& given) const {
  const CatalogEntry& entry = catalog_entry(op);
  const Declaration& d = *entry.declaration;
  Fields params, tunables = tunables_for(d, given);
  for (const auto& [name, value] : given.items()) {
    if (d.tunable(name))
      tunables.set(name, value);  // given explicitly: pinned, the profile does not override it
    else
      params.set(name, value);
  }
  return entry.make(std::move(params), std::move(tunables));
}

namespace {

nlohmann::json to_json(const FieldValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

FieldValue from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  value_error(where + ": a field is a number, a flag or a name, not " + j.dump());
}

}  // namespace

void Profile::save(const std::string& path) const {
  std::ostringstream out;
  out << "{\"entries\": [";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    nlohmann::ordered_json line;
    line["operator"] = e.op->name;
    for (const auto& [k, v] : e.dims.items()) line[k] = to_json(v);
    for (const auto& [k, v] : e.tunables.items()) line[k] = to_json(v);
    out << (i ? ",\n  " : "\n  ") << line.dump();
  }
  out << "\n]}\n";
  // Every write and the close checked: a full disk is an error naming the path, not a profile
  // silently cut short.
  io::write_file(path, out.str(), "the profile");
}

Profile Profile::load(const std::string& path) {
  // A FIFO or a device is refused before it is opened, and what is read is capped.
  return parse(io::read_file(path, io::kProfileLimit, "the profile"), path);
}

Profile Profile::parse(std::string_view text, const std::string& path) {
  nlohmann::json data;
  try {
    data = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    value_error(escaped_path(path) + ": not JSON: " + escaped(e.what()));  // it quotes what it read, raw
  }
  if (!data.is_object() || data.size() != 1 || !data.contains("entries") ||
      !data["entries"].is_array())
    value_error(escaped_path(path) + ": a profile is {\"entries\": [...]}");
  Profile profile;
  size_t index = 0;
  for (const auto& entry : data["entries"]) {
    std::string where = escaped_path(path) + ": entry " + std::to_string(index++);
    if (!entry.is_object() || !entry.contains("operator") || !entry["operator"].is_string())
      value_error(where + ": an entry is an object naming its \"operator\"");
    std::string op = entry["operator"].get<std::string>();
    if (!catalog().count(op)) value_error(where + ": no operator '" + op + "' in the catalog");
    Fields fields;
    for (const auto& [k, v] : entry.items())
      if (k != "operator") fields.set(k, from_json(v, where));
    try {
      profile.add(op, fields);
    } catch (const Error& e) {
      value_error(where + ": " + e.what());
    }
  }
  return profile;
}

Profile Profile::load_for_device(const std::string& path, std::string_view device) {
  namespace fs = std::filesystem;
  // A path that cannot be looked up is loaded as a file, whose open says why in one line.
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path file = fs::path(path) / (std::string(device) + ".json");
    return fs::exists(file, ec) ? load(file.string()) : Profile();
  }
  return load(path);
}

}  // namespace iron
