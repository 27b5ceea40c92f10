// The CPU device's kernels: a table of every operator's kernels, each built for one target (an
// instruction set), with what it takes beyond the target's features. Lowering asks the table for
// each step; `iron info --kernels` prints what it would answer on this machine and why the faster
// kernels were passed over. Each operator's folder registers its own kernels (its entry in
// src/ops/catalog.cpp names the function), so adding an operator or a target touches that folder
// only.
//
//   void register_gelu(cpu::KernelTable& t) {
//     t.add({"GELU", cpu::Target::avx512, nullptr, make_gelu_kernel});
//     t.add({"GELU", cpu::Target::avx2, nullptr, make_gelu_kernel});
//     t.add({"GELU", cpu::Target::portable, nullptr, make_gelu_kernel});
//   }
//
// A kernel is made with the features narrowed to its target's (Features::narrowed_to), so code
// that picks its loops from them runs the target's and no wider: the choice the table reports is
// the one that runs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "iron/operator.hpp"

namespace iron::cpu {

/// What a CPU kernel is built for, fastest first: x86's, ARM's, then the portable loops.
enum class Target { amx, avx512, avx2, sve, neon, portable };
inline constexpr Target kTargets[] = {Target::amx, Target::avx512, Target::avx2,
                                      Target::sve, Target::neon,   Target::portable};
/// "amx", "avx512", "avx2", "sve", "neon", "portable": also IRON_CPU's values.
const char* target_name(Target t);
/// Whether this build holds kernels for `t`: x86's targets in an x86-64 build, ARM's in an
/// aarch64 one, the portable loops in every build. The table takes no entry for another
/// architecture's target, so what it reports names only what could run here.
constexpr bool built_here(Target t) {
#if defined(__x86_64__)
  return t != Target::sve && t != Target::neon;
#elif defined(__aarch64__)
  return t == Target::sve || t == Target::neon || t == Target::portable;
#else
  return t == Target::portable;
#endif
}
/// Why a processor with `f` cannot run kernels built for `t` ("needs avx512bw avx512vl"); empty
/// when it can.
std::string missing_features(Target t, const Features& f);
/// `f` less what kernels built for `t` may not use.
Features narrowed_to(const Features& f, Target t);

using KernelFactory = std::function<std::unique_ptr<Kernel>(const Operator& op, const KernelArgs& args)>;
/// Empty when the kernel takes the step, else why not, in a few words ("a q3_k weight").
using KernelRefusal = std::function<std::string(const Operator& op, const KernelArgs& args)>;
/// How the kernel computes a step it takes, in a few words ("int8 x, vpmaddubsw"), where it has
/// several ways (args.features narrowed to its target); empty: nothing to add.
using KernelDescription = std::function<std::string(const Operator& op, const KernelArgs& args)>;

struct KernelEntry {
  std::string op;
  Target target = Target::portable;
  /// Beyond the target's features (null: it takes every step of its operator).
  KernelRefusal refuses;
  KernelFactory make;
  /// Null: one way for every step.
  KernelDescription describes = nullptr;
};

/// The kernel the table picks for a step, and each faster one it passed over with the reason.
struct KernelChoice {
  const KernelEntry* taken = nullptr;
  std::vector<std::pair<const KernelEntry*, std::string>> passed_over;
  /// "avx512 (amx passed over: needs amx-bf16 or amx-int8)".
  std::string str() const;
};

class KernelTable {
 public:
  /// Adds a kernel; an operator's kernels are kept fastest target first.
  void add(KernelEntry entry);
  /// The first of `op`'s kernels (fastest first) whose target args.features cover (the
  /// machine's where null) and which takes the step.
  KernelChoice choose(const Operator& op, const KernelArgs& args) const;
  /// The chosen kernel, made with the features narrowed to its target. Throws iron::Error naming
  /// the operator and why each kernel refused when none takes the step.
  std::unique_ptr<Kernel> make(const Operator& op, const KernelArgs& args) const;
  /// `op`'s kernels, fastest first (none: empty).
  const std::vector<KernelEntry>& entries(std::string_view op) const;
  /// Every operator with a kernel, by name.
  std::vector<std::string> ops() const;

 private:
  std::map<std::string, std::vector<KernelEntry>, std::less<>> entries_;
};

/// Every operator's CPU kernels (the catalog's registrations, src/ops/catalog.cpp).
const KernelTable& kernels();
/// Adds a kernel to that table, for an operator outside the catalog (a test's): before anything
/// is compiled with it, never while graphs are lowered.
void add_kernel(KernelEntry entry);

}  // namespace iron::cpu
