// The CPU as a device: host memory, and kernels lowered from a version's plan.
#include <cstdlib>
#include <cstring>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/program.hpp"
#include "graph/device.hpp"
#include "iron/error.hpp"

namespace iron::cpu {

namespace {

// Host memory, owned (the scratch, a version's outputs) or another object's (a weight's tensor,
// often the mapped checkpoint; a state's tensor).
class HostBuffer final : public detail::DeviceBuffer {
 public:
  HostBuffer(char* data, int64_t bytes, std::unique_ptr<char[], void (*)(void*)> owned)
      : data_(data), bytes_(bytes), owned_(std::move(owned)) {}
  int64_t bytes() const override { return bytes_; }
  char* host() const override { return data_; }
  void write(int64_t offset, const void* source, int64_t n) override { std::memcpy(data_ + offset, source, size_t(n)); }
  void read(int64_t offset, void* target, int64_t n) const override { std::memcpy(target, data_ + offset, size_t(n)); }

 private:
  char* data_;
  int64_t bytes_;
  std::unique_ptr<char[], void (*)(void*)> owned_;
};

// A view with its address resolved, as a kernel reads it.
Operand operand(const detail::View& v, const detail::Locator& at) {
  Operand o;
  static_cast<detail::ViewLayout&>(o) = v;
  o.base = at(v.place).host();
  if (v.ids) o.ids = std::make_shared<Operand>(operand(*v.ids, at));
  if (v.place.resident && !v.place.resident->is_state) o.prepared = v.place.resident->prepared;
  return o;
}

class CpuDevice final : public detail::Device {
 public:
  std::string name() const override { return "cpu"; }
  std::string description() override { return "cpu: " + Features::host().str(); }

  std::unique_ptr<detail::DeviceBuffer> allocate(int64_t bytes, const std::string& purpose) override {
    const size_t rounded = size_t((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    void* memory = std::aligned_alloc(64, rounded);
    if (!memory) out_of_memory(bytes, purpose);
    std::memset(memory, 0, rounded);
    char* data = static_cast<char*>(memory);
    return std::make_unique<HostBuffer>(data, bytes, std::unique_ptr<char[], void (*)(void*)>(data, std::free));
  }

  // A weight is only read, so its (possibly mapped, read-only) memory serves as it is.
  std::unique_ptr<detail::DeviceBuffer> upload(const Resident& weight) override {
    return std::make_unique<HostBuffer>(static_cast<char*>(const_cast<void*>(weight.tensor.data())),
                                        weight.tensor.nbytes(), std::unique_ptr<char[], void (*)(void*)>(nullptr, std::free));
  }

  std::unique_ptr<detail::DeviceBuffer> allocate_state(Resident& state) override {
    if (!state.tensor.defined() || state.tensor.numel() != element_count(state.shape))
      state.tensor = Tensor::zeros(state.shape, state.dtype);
    return std::make_unique<HostBuffer>(static_cast<char*>(const_cast<void*>(state.tensor.data())),
                                        state.tensor.nbytes(), std::unique_ptr<char[], void (*)(void*)>(nullptr, std::free));
  }

  std::unique_ptr<detail::Program> lower(const detail::VersionPlan& plan, const detail::Locator& at,
                                         int threads) override {
    const Recording& recording = plan.recording();
    std::vector<std::unique_ptr<Kernel>> kernels;
    std::vector<std::string> names;
    std::vector<int64_t> bytes;
    std::vector<bool> barrier_before;
    for (size_t i = 0; i < recording.steps.size(); ++i) {
      const detail::StepPlan& step = plan.steps()[i];
      auto a = step.kernel_args<KernelArgs>([&](const detail::View& v) { return operand(v, at); });
      a.features = &Features::host();
      kernels.push_back(cpu::kernels().make(*recording.steps[i].op, a));
      names.push_back(recording.steps[i].op->name());
      bytes.push_back(bytes_touched(a));
      barrier_before.push_back(step.barrier_before);
    }
    return make_program(std::move(kernels), std::move(names), barrier_before, bytes, threads);
  }
};

}  // namespace
}  // namespace iron::cpu

iron::detail::Device& iron::detail::cpu_device() {
  static cpu::CpuDevice device;
  return device;
}
