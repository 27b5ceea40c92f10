// The catalog: every operator by name, with its kernels for each device. Adding an operator adds
// its folder and one line here.
#include "ops/copy/copy.hpp"
#include "ops/elementwise/elementwise.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/op.hpp"
#if IRON_HAS_VULKAN
#include "devices/vulkan/kernel.hpp"
#endif

namespace iron {

namespace ops {
OpEntry silu_entry();
OpEntry gelu_entry();
OpEntry rms_norm_entry();
OpEntry layer_norm_entry();
OpEntry rope_entry();
OpEntry softmax_entry();
OpEntry sample_entry();
OpEntry scalar_entry();
OpEntry emit_entry();
OpEntry attention_entry();
OpEntry segment_mean_entry();
OpEntry slot_rows_entry();

const std::vector<OpEntry>& op_entries() {
  static const std::vector<OpEntry> entries = [] {
    std::vector<OpEntry> e;
    auto add = [&](std::vector<OpEntry> more) { e.insert(e.end(), more.begin(), more.end()); };
    add({copy_entry(), gather_entry(), transpose_entry()});
    add(elementwise_entries());
    add(matmul_entries());
    add({silu_entry(), gelu_entry(), rms_norm_entry(), layer_norm_entry(), rope_entry(), softmax_entry(),
         sample_entry(), scalar_entry(), emit_entry(), attention_entry(), segment_mean_entry(),
         slot_rows_entry()});
    return e;
  }();
  return entries;
}
}  // namespace ops

const std::map<std::string, CatalogEntry, std::less<>>& catalog() {
  static const auto entries = [] {
    std::map<std::string, CatalogEntry, std::less<>> c;
    for (const ops::OpEntry& e : ops::op_entries()) c.emplace(e.catalog.declaration->name, e.catalog);
    return c;
  }();
  return entries;
}

namespace cpu {

namespace {
KernelTable& table() {
  static KernelTable t = [] {
    KernelTable made;
    for (const ops::OpEntry& e : ops::op_entries())
      for (const ops::CpuTarget& target : e.cpu)
        if (built_here(target.target))  // x86's kernels are not compiled for ARM, nor ARM's for x86
          made.add({e.catalog.declaration->name, target.target, target.refuses, e.make_cpu, target.describes});
    return made;
  }();
  return t;
}
}  // namespace

const KernelTable& kernels() { return table(); }
void add_kernel(KernelEntry entry) { table().add(std::move(entry)); }

}  // namespace cpu

#if IRON_HAS_VULKAN
namespace vulkan {
KernelRecorder find_kernel(std::string_view name) {
  static const auto recorders = [] {
    std::map<std::string, KernelRecorder, std::less<>> m;
    for (const ops::OpEntry& e : ops::op_entries())
      if (e.vulkan) m.emplace(e.catalog.declaration->name, e.vulkan);
    return m;
  }();
  auto it = recorders.find(name);
  return it == recorders.end() ? nullptr : it->second;
}
}  // namespace vulkan
#endif

}  // namespace iron
