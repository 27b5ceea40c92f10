// Vulkan as a device of the graph layer: a graph's memory as device buffers, and each version's
// plan lowered into one command list recorded once. A call writes its words into a host-visible
// buffer and submits the same commands again; only a move of the arena's scratch records anew.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <mutex>

#include "devices/device.hpp"
#include "devices/vulkan/commands.hpp"
#include "devices/vulkan/device.hpp"
#include "devices/vulkan/kernel.hpp"
#include "devices/vulkan/throughput.hpp"
#include "iron/error.hpp"

namespace iron::vulkan {

int32_t shader_word(const WordRef& w) {
  if (w.per_call()) return -(w.index + 1);
  if (w.constant < 0 || w.constant > INT32_MAX)
    value_error("Vulkan: a constant of " + std::to_string(w.constant) + " does not fit a shader's word");
  return int32_t(w.constant);
}

void unsupported(const Operator& op, const std::string& what) {
  value_error("the Vulkan device has no shader for " + op.str() + ": " + what);
}

int32_t shader_int(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX) value_error(std::string("Vulkan: ") + what + " of " + std::to_string(v) + " does not fit a shader's int");
  return int32_t(v);
}

uint32_t groups(int64_t n, uint32_t local) {
  return uint32_t(std::clamp<int64_t>((n + local - 1) / local, 1, 65535));
}

uint32_t float_kind(const Operator& op, const Operand& o) {
  if (o.dtype != f32 && o.dtype != f16 && o.dtype != bf16)
    unsupported(op, "an operand of " + std::string(name(o.dtype)) + " (its shader reads f32, f16 and bf16)");
  return uint32_t(load_kind(o.dtype));
}

bool disabled_by_environment(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == "0";
}

int32_t load_kind(DType t) {
  switch (t) {
    case f32: return 0;
    case f16: return 1;
    case bf16: return 2;
    case DType::q8_0: return 3;
    case DType::q4_0: return 4;
    case DType::q4_1: return 5;
    case i32: return 6;
    case DType::q5_0: return 7;
    case DType::q5_1: return 8;
    case DType::q4_k: return 9;
    case DType::q5_k: return 10;
    case DType::q6_k: return 11;
    default: return -1;
  }
}

Start start(const Operand& o) { return {shader_int(o.base, "a view's start"), shader_word(o.offset)}; }

int32_t rows_word(const Operand& o) { return o.shape.empty() ? 1 : shader_word(o.valid[0]); }

namespace {

// A device buffer as the graph layer holds it. On a unified-memory device the host reads and
// writes it in place; elsewhere through the device's staging copies.
class VulkanBuffer final : public detail::DeviceBuffer {
 public:
  VulkanBuffer(Device& device, Buffer buffer, int64_t bytes)
      : device_(device), buffer_(std::move(buffer)), bytes_(bytes) {}
  int64_t bytes() const override { return bytes_; }
  char* host() const override {
    return device_.maps_device_memory() ? reinterpret_cast<char*>(buffer_.mapped()) : nullptr;
  }
  void write(int64_t offset, const void* source, int64_t n) override {
    if (n > 0) device_.upload(buffer_, size_t(offset), {static_cast<const std::byte*>(source), size_t(n)});
  }
  void read(int64_t offset, void* target, int64_t n) const override {
    if (n > 0) device_.download(buffer_, size_t(offset), {static_cast<std::byte*>(target), size_t(n)});
  }
  const Buffer& buffer() const { return buffer_; }

 private:
  Device& device_;
  Buffer buffer_;
  int64_t bytes_;
};

const Buffer& vulkan_buffer(detail::DeviceBuffer* b) {
  auto* v = dynamic_cast<VulkanBuffer*>(b);
  if (!v) value_error("Vulkan: a buffer of another device was handed to the Vulkan device");
  return v->buffer();
}

Operand operand(const detail::View& v, const detail::Locator& at) {
  const detail::Location where = at(v.place);
  Operand o;
  o.buffer = &vulkan_buffer(where.buffer);
  const DTypeInfo& i = info(v.dtype);
  if (where.offset % i.bytes != 0)
    value_error("Vulkan: a view of " + std::string(name(v.dtype)) + " starts inside an element");
  static_cast<detail::ViewLayout&>(o) = v;
  o.base = where.offset / i.bytes * i.block;
  if (v.ids) o.ids = std::make_shared<Operand>(operand(*v.ids, at));
  return o;
}

// One version's commands: all of them in one list, and (for check mode and host steps) each on
// its own, recorded when first asked for.
class VulkanProgram final : public detail::Program {
 public:
  VulkanProgram(Device& device, const detail::VersionPlan& plan, const detail::Locator& at)
      : device_(device), plan_(plan), all_(device) {
    words_ = device_.create_buffer(size_t(std::max(plan.table().size(), 1)) * sizeof(int32_t), MemoryKind::per_call,
                                   plan.recording().graph + "'s per-call words");
    const Recording& recording = plan.recording();
    for (size_t i = 0; i < recording.steps.size(); ++i) {
      const detail::StepPlan& step = plan.steps()[i];
      KernelArgs a;
      for (const detail::View& v : step.in) a.in.push_back(operand(v, at));
      for (const detail::View& v : step.out) a.out.push_back(operand(v, at));
      a.scalars = step.scalars;
      a.precision = step.precision;
      a.device = &device_;
      a.words = &words_;
      const Operator& op = *recording.steps[i].op;
      KernelRecorder record = find_kernel(op.name());
      if (!record) unsupported(op, "no kernel for the operator " + op.name());
      args_.push_back(std::move(a));
      recorders_.push_back(record);
    }
    all_.begin();
    // A timestamp before and after the commands: the device's own time for each run, which
    // `iron bench` holds against the bound (bytes over the copy bandwidth, plus dispatches).
    timed_ = device_.info().timestamps;
    if (timed_) all_.timestamp();
    for (size_t i = 0; i < args_.size(); ++i) {
      if (plan.steps()[i].barrier_before) all_.barrier();
      recorders_[i](*recording.steps[i].op, args_[i], all_);
    }
    if (timed_) all_.timestamp();
    all_.host_barrier();
    all_.end();
    single_.resize(args_.size());
  }

  void run(const int64_t* words) override {
    submit(all_, words);
    if (!timed_) return;
    const std::vector<double> ns = all_.timestamps_ns();
    nanoseconds_.fetch_add(int64_t(ns[1] - ns[0]), std::memory_order_relaxed);
    runs_.fetch_add(1, std::memory_order_release);
  }

  DeviceTime device_time() const override {
    if (!timed_) return {};
    DeviceTime t;
    t.runs = runs_.load(std::memory_order_acquire);
    t.seconds = double(nanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
    t.dispatches = int64_t(all_.dispatches());
    return t;
  }

  void run_one(size_t i, const int64_t* words) override {
    if (!single_[i]) {
      single_[i] = std::make_unique<CommandList>(device_);
      single_[i]->begin();
      recorders_[i](*plan_.recording().steps[i].op, args_[i], *single_[i]);
      single_[i]->host_barrier();
      single_[i]->end();
    }
    submit(*single_[i], words);
  }

  size_t commands() const override { return args_.size(); }

 private:
  void submit(CommandList& list, const int64_t* words) {
    // Words fit 30 bits (the image checks): the shaders read them as int.
    auto* target = reinterpret_cast<int32_t*>(words_.mapped());
    const size_t n = size_t(plan_.table().size());
    for (size_t w = 0; w < n; ++w) target[w] = int32_t(words[w]);
    words_.flush(0, n * sizeof(int32_t));
    list.submit();
    list.wait();
  }

  Device& device_;
  const detail::VersionPlan& plan_;
  Buffer words_;
  std::vector<KernelArgs> args_;
  std::vector<KernelRecorder> recorders_;
  CommandList all_;
  std::vector<std::unique_ptr<CommandList>> single_;
  bool timed_ = false;
  // Read by the host between runs while the run queue's thread adds to them.
  std::atomic<int64_t> runs_{0}, nanoseconds_{0};
};

class VulkanDevice final : public detail::Device {
 public:
  std::string name() const override { return "vulkan"; }
  std::string description() override {
    const DeviceInfo& i = device().info();
    return "vulkan: " + i.short_name() + (i.type == VK_PHYSICAL_DEVICE_TYPE_CPU ? " (software on this machine's CPU: its figures are not a GPU's)" : "");
  }

  std::unique_ptr<detail::DeviceBuffer> allocate(int64_t bytes, const std::string& purpose) override {
    vulkan::Device& d = device();
    auto buffer = std::make_unique<VulkanBuffer>(d, d.create_buffer(padded_bytes(bytes), MemoryKind::device, purpose), bytes);
    zero(*buffer);
    return buffer;
  }

  std::unique_ptr<detail::DeviceBuffer> upload(const Resident& weight) override {
    vulkan::Device& d = device();
    const int64_t bytes = weight.tensor.nbytes();
    auto buffer = std::make_unique<VulkanBuffer>(d, d.create_buffer(padded_bytes(bytes), MemoryKind::device, weight.path), bytes);
    buffer->write(0, weight.tensor.data(), bytes);
    return buffer;
  }

  std::unique_ptr<detail::DeviceBuffer> allocate_state(Resident& state) override {
    return allocate(storage_bytes(state.dtype, element_count(state.shape)), state.path);
  }

  std::unique_ptr<detail::Program> lower(const detail::VersionPlan& plan, const detail::Locator& at, int) override {
    return std::make_unique<VulkanProgram>(device(), plan, at);
  }

  std::optional<Throughput> measure_throughput() override { return vulkan::measure_throughput(device()); }

 private:
  // Made on first use: a process that never asks for Vulkan never loads it.
  vulkan::Device& device() {
    std::call_once(made_, [this] { device_ = vulkan::Device::create(); });
    return *device_;
  }

  static void zero(VulkanBuffer& b) {
    if (char* host = b.host()) {
      std::memset(host, 0, size_t(b.bytes()));
      return;
    }
    const std::vector<char> zeros(size_t(std::min<int64_t>(b.bytes(), 16 << 20)), 0);
    for (int64_t at = 0; at < b.bytes(); at += int64_t(zeros.size()))
      b.write(at, zeros.data(), std::min<int64_t>(int64_t(zeros.size()), b.bytes() - at));
  }

  std::once_flag made_;
  std::unique_ptr<vulkan::Device> device_;
};

}  // namespace
}  // namespace iron::vulkan

namespace iron::detail {

Device& vulkan_device() {
  static vulkan::VulkanDevice device;
  return device;
}

}  // namespace iron::detail
