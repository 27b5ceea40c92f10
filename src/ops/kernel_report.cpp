// `iron info --kernels`: the kernel each step the models run takes on this machine, and why the
// faster ones were passed over.
#include "ops/kernel_report.hpp"

#include <iomanip>
#include <sstream>

#include "iron/cpu.hpp"
#if IRON_HAS_VULKAN
#include "devices/vulkan/kernel.hpp"
#endif

namespace iron::ops {

namespace {

cpu::Operand operand(DType dtype) {
  cpu::Operand o;
  o.dtype = dtype;
  return o;
}

KernelCase make_case(std::string op, std::string step, Fields params, std::vector<DType> in, std::vector<DType> out,
                     Precision precision = Precision::highest, Fields tunables = {}) {
  return {std::move(op), std::move(step), std::move(params), std::move(tunables), std::move(in), std::move(out), precision};
}

}  // namespace

std::vector<KernelCase> model_kernel_cases() {
  std::vector<KernelCase> cases;
  // The weight kinds GGUF and safetensors checkpoints hold; K a multiple of every block.
  const DType weights[] = {f32, f16, bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k,
                           DType::q5_k, DType::q6_k};
  for (Precision p : {Precision::highest, Precision::medium})
    for (DType w : weights)
      cases.push_back(make_case("ProjectionGEMM", std::string(name(w)) + " weight, f32 rows, " + std::string(name(p)),
                                {{"M", int64_t(64)}, {"K", int64_t(1024)}, {"N", int64_t(1024)}, {"b_col_maj", true},
                                 {"precision", std::string(name(p))}},
                                {f32, w}, {f32}, p));
  for (DType w : weights)
    cases.push_back(make_case("GEMV", std::string(name(w)) + " weight, one f32 row",
                              {{"K", int64_t(1024)}, {"N", int64_t(1024)}}, {f32, w}, {f32}));
  cases.push_back(make_case("ProjectionGEMM", "q4_1 weight, K of 1000 (not whole blocks)",
                            {{"M", int64_t(64)}, {"K", int64_t(1000)}, {"N", int64_t(64)}, {"b_col_maj", true}},
                            {f32, DType::q4_1}, {f32}));
  for (Precision p : {Precision::highest, Precision::medium})
    for (DType cache : {f32, f16, bf16, DType::q8_0})
      cases.push_back(make_case("Attention", std::string(name(cache)) + " cache, " + std::string(name(p)),
                                {{"heads", int64_t(9)}, {"kv_heads", int64_t(3)}, {"head_dim", int64_t(64)},
                                 {"ctx", int64_t(2048)}},
                                {f32, cache, cache, DType::i32}, {f32}, p));
  const Fields encoder{{"heads", int64_t(12)}, {"kv_heads", int64_t(12)}, {"head_dim", int64_t(32)},
                       {"ctx", int64_t(512)}, {"segment", int64_t(128)}};
  for (Precision p : {Precision::highest, Precision::medium})
    cases.push_back(make_case("Attention", "an encoder's segments, f32, " + std::string(name(p)), encoder,
                              {f32, f32, f32, DType::i32}, {f32}, p));
  cases.push_back(make_case("Attention", "f32 cache, the per-head path",
                            {{"heads", int64_t(9)}, {"kv_heads", int64_t(3)}, {"head_dim", int64_t(64)},
                             {"ctx", int64_t(2048)}},
                            {f32, f32, f32, DType::i32}, {f32}, Precision::highest,
                            {{"path", std::string("per_head")}}));
  for (DType to : {f32, f16, bf16, DType::q8_0})
    cases.push_back(make_case("Copy", "f32 rows into a " + std::string(name(to)) + " cache", {}, {f32}, {to}));
  cases.push_back(make_case("Gather", "q8_0 embedding rows into f32", {}, {DType::q8_0, DType::i32}, {f32}));
  cases.push_back(make_case("RMSNorm", "f32 rows", {{"N", int64_t(576)}}, {f32, f32}, {f32}));
  cases.push_back(make_case("LayerNorm", "f32 rows", {{"N", int64_t(384)}}, {f32, f32, f32}, {f32}));
  cases.push_back(make_case("GELU", "f32", {}, {f32}, {f32}));
  cases.push_back(make_case("SiLU", "f32", {}, {f32}, {f32}));
  cases.push_back(make_case("SwiGLU", "f32", {}, {f32, f32}, {f32}));
  cases.push_back(make_case("GeGLU", "f32", {}, {f32, f32}, {f32}));
  cases.push_back(make_case("Add", "f32", {}, {f32, f32}, {f32}));
  cases.push_back(make_case("Softmax", "f32 rows", {{"N", int64_t(1000)}}, {f32}, {f32}));
  return cases;
}

std::vector<KernelReportLine> choose_cpu_kernels(const cpu::Features& features) {
  std::vector<KernelReportLine> lines;
  for (KernelCase& c : model_kernel_cases()) {
    const Declaration& d = *catalog_entry(c.op).declaration;
    Fields params = c.params, tunables = c.tunables;
    complete_fields(d, params, tunables);
    const std::shared_ptr<Operator> op = catalog_entry(c.op).make(params, tunables);
    cpu::KernelArgs args;
    for (DType t : c.in) args.in.push_back(operand(t));
    for (DType t : c.out) args.out.push_back(operand(t));
    args.precision = c.precision;
    args.features = &features;
    cpu::KernelChoice choice = cpu::kernels().choose(*op, args);
    std::string how;
    if (choice.taken && choice.taken->describes) {
      const cpu::Features narrowed = cpu::narrowed_to(features, choice.taken->target);
      args.features = &narrowed;
      how = choice.taken->describes(*op, args);
    }
    lines.push_back({std::move(c), std::move(choice), std::move(how)});
  }
  return lines;
}

std::string describe_cpu_kernels(const cpu::Features& features) {
  std::ostringstream o;
#if defined(__aarch64__)
  constexpr const char* kLevels = "portable|neon|dotprod";
#else
  constexpr const char* kLevels = "portable|avx2|avxvnni|avx512";
#endif
  o << "CPU features: " << features.str() << " (IRON_CPU=" << kLevels << " narrows them)\n";
  for (cpu::Target t : cpu::kTargets)
    if (std::string missing = cpu::missing_features(t, features); cpu::built_here(t) && !missing.empty())
      o << "  no " << cpu::target_name(t) << " kernels here: " << missing << "\n";
  o << "The kernel each kind of step the models run takes, and why faster ones that run here did not:\n";
  for (const KernelReportLine& line : choose_cpu_kernels(features)) {
    o << "  " << std::left << std::setw(15) << line.step.op << std::setw(42) << line.step.step << " "
      << (line.choice.taken ? cpu::target_name(line.choice.taken->target) : "none")
      << (line.how.empty() ? "" : " " + line.how);
    bool first = true;
    for (const auto& [entry, why] : line.choice.passed_over) {
      if (!cpu::missing_features(entry->target, features).empty()) continue;  // said above
      o << (first ? "  (" : "; ") << cpu::target_name(entry->target) << ": " << why;
      first = false;
    }
    o << (first ? "" : ")") << "\n";
  }
  o << "Operators with one kernel, whatever the step: ";
  bool first = true;
  for (const std::string& op : cpu::kernels().ops()) {
    const std::vector<cpu::KernelEntry>& entries = cpu::kernels().entries(op);
    if (entries.size() != 1) continue;
    o << (first ? "" : ", ") << op << " (" << cpu::target_name(entries[0].target) << ")";
    first = false;
  }
  o << "\n";
  return o.str();
}

std::string describe_vulkan_kernels() {
  std::ostringstream o;
#if IRON_HAS_VULKAN
  std::string with, without;
  for (const OpEntry& e : op_entries()) {
    std::string& list = e.vulkan ? with : without;
    list += (list.empty() ? "" : ", ") + e.catalog.declaration->name;
  }
  o << "Vulkan: every operator records its own shaders (a case a shader does not cover is refused by name): "
    << with << "\n";
  if (!without.empty()) o << "Vulkan has no kernel for: " << without << "\n";
#else
  o << "Vulkan: not built (configure with -DIRON_VULKAN=ON)\n";
#endif
  return o.str();
}

}  // namespace iron::ops

namespace iron::cpu_device {
std::string describe_kernels(std::string_view device) {
  if (device == "vulkan") return ops::describe_vulkan_kernels();
  if (device != "cpu") value_error("--device is cpu or vulkan, not '" + std::string(device) + "'");
  return ops::describe_cpu_kernels(cpu::Features::host());
}
}  // namespace iron::cpu_device
