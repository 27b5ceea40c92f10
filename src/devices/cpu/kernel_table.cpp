// The CPU kernel table: targets, their features, and the choice for a step.
#include "devices/cpu/kernel_table.hpp"

#include <algorithm>

#include "iron/error.hpp"

namespace iron::cpu {

const char* target_name(Target t) {
  switch (t) {
    case Target::amx: return "amx";
    case Target::avx512: return "avx512";
    case Target::avx2: return "avx2";
    case Target::sve: return "sve";
    case Target::neon: return "neon";
    case Target::portable: return "portable";
  }
  return "?";
}

std::string missing_features(Target t, const Features& f) {
  std::vector<std::pair<bool, const char*>> needed;
  switch (t) {
    case Target::portable:
      break;
    case Target::amx:
    case Target::avx512:
      needed = {{f.avx512f, "avx512f"}, {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"},
                {f.avx512dq, "avx512dq"}};
      [[fallthrough]];
    case Target::avx2:
      needed.insert(needed.end(), {{f.avx2, "avx2"}, {f.fma, "fma"}, {f.f16c, "f16c"}});
      break;
    case Target::sve:
      needed = {{f.sve_bits > 0, "sve"}};
      [[fallthrough]];
    case Target::neon:
      needed.push_back({f.neon, "neon"});
      break;
  }
  std::string missing;
  if (t == Target::amx && !f.amx_bf16 && !f.amx_int8)
    missing = "amx-bf16 or amx-int8 (with the OS's leave to use tiles),";
  for (const auto& [has, name] : needed) {
    if (has) continue;
    if (!missing.empty()) missing += ' ';
    missing += name;
  }
  return missing.empty() ? "" : "needs " + missing;
}

Features narrowed_to(const Features& f, Target t) {
  switch (t) {
    case Target::amx:
      return f;
    case Target::avx512:
      return f.limited_to("avx512");
    case Target::avx2:  // its loops take AVX-VNNI where it runs
      return f.limited_to("avxvnni");
    case Target::sve:
      return f;
    case Target::neon:  // its loops take the dot-product extension where it runs
      return f.limited_to("dotprod");
    case Target::portable:
      return f.limited_to("portable");
  }
  return f;
}

std::string KernelChoice::str() const {
  std::string s = taken ? target_name(taken->target) : "none";
  for (size_t i = 0; i < passed_over.size(); ++i) {
    s += i == 0 ? " (" : "; ";
    s += target_name(passed_over[i].first->target);
    s += " passed over: ";
    s += passed_over[i].second;
  }
  if (!passed_over.empty()) s += ")";
  return s;
}

void KernelTable::add(KernelEntry entry) {
  std::vector<KernelEntry>& list = entries_[entry.op];
  for (const KernelEntry& e : list)
    if (e.target == entry.target)
      value_error("CPU kernel table: " + entry.op + " has two kernels for " + target_name(entry.target));
  list.push_back(std::move(entry));
  std::stable_sort(list.begin(), list.end(),
                   [](const KernelEntry& a, const KernelEntry& b) { return int(a.target) < int(b.target); });
}

KernelChoice KernelTable::choose(const Operator& op, const KernelArgs& args) const {
  const Features& f = args.features ? *args.features : Features::host();
  KernelChoice choice;
  for (const KernelEntry& e : entries(op.name())) {
    std::string why = missing_features(e.target, f);
    if (why.empty() && e.refuses) {
      KernelArgs narrowed = args;
      const Features features = narrowed_to(f, e.target);
      narrowed.features = &features;
      why = e.refuses(op, narrowed);
    }
    if (why.empty()) {
      choice.taken = &e;
      return choice;
    }
    choice.passed_over.emplace_back(&e, why);
  }
  return choice;
}

std::unique_ptr<Kernel> KernelTable::make(const Operator& op, const KernelArgs& args) const {
  const KernelChoice choice = choose(op, args);
  if (!choice.taken) {
    if (choice.passed_over.empty()) value_error("the CPU device has no kernel for the operator " + op.name());
    value_error("no CPU kernel of " + op.name() + " takes this step: " + choice.str());
  }
  const Features features = narrowed_to(args.features ? *args.features : Features::host(), choice.taken->target);
  KernelArgs narrowed = args;
  narrowed.features = &features;
  return choice.taken->make(op, narrowed);
}

const std::vector<KernelEntry>& KernelTable::entries(std::string_view op) const {
  static const std::vector<KernelEntry> none;
  auto it = entries_.find(op);
  return it == entries_.end() ? none : it->second;
}

std::vector<std::string> KernelTable::ops() const {
  std::vector<std::string> names;
  for (const auto& [name, list] : entries_) names.push_back(name);
  return names;
}

}  // namespace iron::cpu
