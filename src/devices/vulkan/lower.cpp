// Vulkan as a device of the graph layer: a graph's memory as device buffers, and each version's
// plan lowered into one command list recorded once. A call writes its words into a host-visible
// buffer and submits the same commands again; only a move of the arena's scratch records anew.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>

#include "graph/device.hpp"
#include "devices/cpu/trace.hpp"
#include "devices/vulkan/commands.hpp"
#include "devices/vulkan/device.hpp"
#include "devices/vulkan/kernel.hpp"
#include "devices/vulkan/throughput.hpp"
#include "graph/image.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

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

std::optional<bool> environment_choice(const char* name) {
  const char* v = std::getenv(name);
  if (v && std::string_view(v) == "1") return true;
  if (v && std::string_view(v) == "0") return false;
  return std::nullopt;
}

bool disabled_by_environment(const char* name) { return environment_choice(name) == false; }

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

class VulkanProgram;

// A CarriedLoop's body stepped on the device (detail::StepChain). Each step is one of `depth`
// command lists, each the whole version recorded once more between two commands of its own:
// first chain_words.comp, which makes the step's words from the carried values the step before
// emitted, then (after the version's own commands) a copy of what this step's Emit wrote into
// memory the host maps, with the words' outcome beside it. The lists take turns, so up to
// `depth` steps are queued while the host reads the oldest; nothing waits on the queue as a
// whole, and the host writes nothing between steps.
class VulkanChain final : public detail::StepChain {
 public:
  VulkanChain(VulkanProgram& program, std::vector<std::unique_ptr<CommandList>> lists, std::vector<Buffer> outcomes,
              Buffer words_program, size_t carried)
      : program_(program), outcomes_(std::move(outcomes)), words_program_(std::move(words_program)),
        carried_(carried), lists_(std::move(lists)) {}
  ~VulkanChain() override {
    try {
      finish();
    } catch (const std::exception&) {  // a lost device: nothing is in flight any more
    }
  }
  void submit() override {
    if (in_flight() == int(lists_.size()))
      value_error("Vulkan: " + std::to_string(lists_.size()) + " chained steps are in flight already");
    lists_[size_t(submitted_ % int64_t(lists_.size()))]->submit();
    ++submitted_;
  }
  bool wait(int64_t* next) override;
  void finish() override {
    for (int64_t k = waited_; k < submitted_; ++k) lists_[size_t(k % int64_t(lists_.size()))]->wait();
  }
  int in_flight() const override { return int(submitted_ - waited_); }
  int depth() const override { return int(lists_.size()); }

 private:
  VulkanProgram& program_;
  std::vector<Buffer> outcomes_;  // one per list: the outcome word, then the carried values
  Buffer words_program_;          // what chain_words.comp evaluates (see there)
  size_t carried_;
  int64_t submitted_ = 0, waited_ = 0;
  // Last, so destroyed first: a list still in flight (a wait that timed out) is left allocated
  // by its destructor, and the buffers it reads must outlive it.
  std::vector<std::unique_ptr<CommandList>> lists_;
};

// A traced run's timestamps: one before the steps, one after each and the last (CommandList's
// limit).
constexpr size_t kMaxTracedSteps = 4094;

// Chained steps queued at most: a GPU's step takes far longer than the host's read of its
// token, so a few hide the host, and each one more records the whole version again.
constexpr int kChainedLists = 4;

// The words of the outcome buffer before the carried values: the outcome, and padding that
// keeps the copy of the carried values 16-byte aligned.
constexpr size_t kOutcomeWords = 4;

// One version's commands: all of them in one list, and (for check mode and host steps) each on
// its own, recorded when first asked for.
class VulkanProgram final : public detail::Program {
 public:
  VulkanProgram(Device& device, const detail::VersionPlan& plan, const detail::Locator& at)
      : device_(device), plan_(plan), all_(device) {
    // Twice the table and a word: a chained step makes its candidate words in the second half,
    // and the last says a step was refused (chain_words.comp).
    words_ = device_.create_buffer((size_t(std::max(plan.table().size(), 1)) * 2 + 1) * sizeof(int32_t),
                                   MemoryKind::per_call, plan.recording().graph + "'s per-call words");
    if (plan.emitted()) emitted_ = operand(*plan.emitted(), at);
    const Recording& recording = plan.recording();
    for (size_t i = 0; i < recording.steps.size(); ++i) {
      const detail::StepPlan& step = plan.steps()[i];
      auto a = step.kernel_args<KernelArgs>([&](const detail::View& v) { return operand(v, at); });
      a.device = &device_;
      a.words = &words_;
      const Operator& op = *recording.steps[i].op;
      KernelRecorder record = find_kernel(op.name());
      if (!record) unsupported(op, "no kernel for the operator " + op.name());
      args_.push_back(std::move(a));
      recorders_.push_back(record);
    }
    // A timestamp before and after the commands: the device's own time for each run, which
    // `iron bench` holds against the bound (bytes over the copy bandwidth, plus dispatches).
    timed_ = device_.info().timestamps;
    all_.begin();
    record_steps(all_);
    all_.host_barrier();
    all_.end();
    single_.resize(args_.size());
  }

  void run(const int64_t* words) override {
    if (cpu::trace_enabled.load(std::memory_order_relaxed) && timed_ && args_.size() < kMaxTracedSteps) {
      run_traced(words);
      return;
    }
    submit(all_, words);
    count_time(all_);
  }

  /// A traced run: the same commands with a timestamp after every step (recorded when first
  /// asked for), each step's device time a span on the trace's device lane, placed from the
  /// host's clock at submission (the device's clock has its own origin).
  void run_traced(const int64_t* words) {
    if (!traced_) {
      traced_ = std::make_unique<CommandList>(device_);
      traced_->begin();
      record_steps(*traced_, /*each_step=*/true);
      traced_->host_barrier();
      traced_->end();
    }
    const int64_t submitted = cpu::now_ns();
    submit(*traced_, words);
    const std::vector<double> ns = traced_->timestamps_ns();
    const Recording& recording = plan_.recording();
    for (size_t i = 0; i < args_.size(); ++i)
      cpu::trace_span(recording.steps[i].op->name().c_str(), cpu::kTraceDeviceLane, submitted + int64_t(ns[i] - ns[0]),
                      submitted + int64_t(ns[i + 1] - ns[0]));
    add_time(ns);
  }

  /// Adds a waited list's run (record_steps' first to last timestamp) to the device's time.
  void count_time(const CommandList& list) {
    if (timed_) add_time(list.timestamps_ns());
  }

  /// Adds one run, its timestamps' first to last, to the device's time.
  void add_time(const std::vector<double>& ns) {
    nanoseconds_.fetch_add(int64_t(ns.back() - ns.front()), std::memory_order_relaxed);
    runs_.fetch_add(1, std::memory_order_release);
  }

  std::unique_ptr<detail::StepChain> chain(const int64_t* words, int depth) override;

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
  /// Every step's dispatches, each after the barrier its plan asks for, between two timestamps
  /// (`each_step`: a timestamp after every step too, for a trace).
  void record_steps(CommandList& list, bool each_step = false) {
    const Recording& recording = plan_.recording();
    if (timed_) list.timestamp();
    for (size_t i = 0; i < args_.size(); ++i) {
      if (plan_.steps()[i].barrier_before) list.barrier();
      recorders_[i](*recording.steps[i].op, args_[i], list);
      if (timed_ && each_step) list.timestamp();
    }
    if (timed_) list.timestamp();
  }
  /// What chain_words.comp evaluates: the word table's layout, how each derived word follows
  /// from its value, and the constraints the host checks per call (see the shader).
  std::vector<int32_t> words_program() const;
  /// The Emit step's first i32 in its buffer (its offset is no per-call word where it chains).
  int32_t emitted_first() const {
    const Start s = start(*emitted_);
    return s.base + s.offset;
  }

  void submit(CommandList& list, const int64_t* words) {
    // A call whose wait timed out may still run, reading the words: the next waits for it first.
    all_.wait();
    for (const std::unique_ptr<CommandList>& one : single_)
      if (one) one->wait();
    list.wait();
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
  std::optional<Operand> emitted_;  // what the Emit step writes (a version with carried values)
  std::vector<KernelArgs> args_;
  std::vector<KernelRecorder> recorders_;
  CommandList all_;
  std::vector<std::unique_ptr<CommandList>> single_;
  std::unique_ptr<CommandList> traced_;  // all_ with a timestamp after each step, for a trace
  bool timed_ = false;
  // Read by the host between runs while the run queue's thread adds to them.
  std::atomic<int64_t> runs_{0}, nanoseconds_{0};
};

std::vector<int32_t> VulkanProgram::words_program() const {
  const detail::WordTable& table = plan_.table();
  const std::vector<int>& carry = plan_.carry_slots();
  auto wide = [](std::vector<int32_t>& out, int64_t v) {
    out.push_back(int32_t(uint32_t(uint64_t(v) & 0xffffffffu)));
    out.push_back(int32_t(v >> 32));
  };
  std::vector<int32_t> constraints;
  int32_t checked = 0;
  for (const detail::CheckedConstraint& c : plan_.constraints()) {
    if (!c.word.per_call()) continue;  // a constant one held when the chain's first words did
    constraints.push_back(int32_t(c.word.index));
    wide(constraints, c.lo);
    wide(constraints, c.hi);
    ++checked;
  }
  std::vector<int32_t> p{int32_t(table.size()), int32_t(table.values()), int32_t(carry.size()),
                         int32_t(table.derived().size()), checked, emitted_first()};
  for (int slot : carry) p.push_back(int32_t(slot));
  for (const Affine& a : table.derived()) {
    p.push_back(int32_t(a.slot()));
    p.push_back(int32_t(a.steps().size()));
    for (const Affine::Step& step : a.steps()) {
      p.push_back(int32_t(step.op));
      wide(p, step.operand);
    }
  }
  p.insert(p.end(), constraints.begin(), constraints.end());
  return p;
}

std::unique_ptr<detail::StepChain> VulkanProgram::chain(const int64_t* words, int depth) {
  // The words are evaluated in int64, as the host does: a device without 64-bit integers in
  // shaders steps through the run queue instead, the host writing each step's words.
  // A trace times each step of each run: chained steps would run without the host.
  if (!emitted_ || emitted_->offset.per_call() || !device_.enabled().shader_int64 ||
      disabled_by_environment("IRON_VULKAN_CHAIN") || cpu::trace_enabled.load(std::memory_order_relaxed) || depth < 1 ||
      plan_.carry_slots().size() > detail::kMaxCarried)
    return nullptr;
  depth = std::min(depth, kChainedLists);
  const size_t carried = plan_.carry_slots().size();
  const std::string& graph = plan_.recording().graph;
  const std::vector<int32_t> program = words_program();
  Buffer words_program = device_.create_buffer(padded_bytes(int64_t(program.size() * 4)), MemoryKind::device,
                                               graph + "'s chained word program");
  device_.upload(words_program, 0, std::as_bytes(std::span(program)));
  // The first step's words as the host made them, and its carried values where the step makes
  // its words from: the first step's words come out as the host's.
  auto* target = reinterpret_cast<int32_t*>(words_.mapped());
  const size_t n = size_t(plan_.table().size());
  for (size_t w = 0; w < n; ++w) target[w] = int32_t(words[w]);
  target[2 * n] = 0;  // no step refused yet
  words_.flush(0, (2 * n + 1) * sizeof(int32_t));
  std::vector<int32_t> first(carried);
  for (size_t i = 0; i < carried; ++i) first[i] = int32_t(words[plan_.carry_slots()[i]]);
  const size_t emitted_bytes = size_t(emitted_first()) * 4;
  device_.upload(*emitted_->buffer, emitted_bytes, std::as_bytes(std::span(first)));

  const Pipeline& make_words = device_.pipeline({"chain_words", {}, 4, 0});
  std::vector<std::unique_ptr<CommandList>> lists;
  std::vector<Buffer> outcomes;
  const size_t outcome_bytes = (kOutcomeWords + carried) * 4;
  for (int i = 0; i < depth; ++i) {
    outcomes.push_back(device_.create_buffer(padded_bytes(int64_t(outcome_bytes)), MemoryKind::readback,
                                             graph + "'s chained step outcome"));
    auto list = std::make_unique<CommandList>(device_);
    list->begin();
    list->barrier();  // after the step before: its Emit's writes, its reads of the words
    list->bind(make_words);
    list->bind_buffers({{&words_, 0, words_.size()},
                        {&words_program, 0, words_program.size()},
                        emitted_->binding(),
                        {&outcomes.back(), 0, outcomes.back().size()}});
    list->dispatch(1);
    list->barrier();
    record_steps(*list);
    list->barrier();
    list->copy(*emitted_->buffer, emitted_bytes, outcomes.back(), kOutcomeWords * 4, carried * 4);
    list->host_barrier();
    list->end();
    lists.push_back(std::move(list));
  }
  log(LogLevel::debug, "vulkan: " + graph + "'s steps chained on the device, up to " + std::to_string(depth) +
                           " ahead of the host");
  return std::make_unique<VulkanChain>(*this, std::move(lists), std::move(outcomes), std::move(words_program), carried);
}

bool VulkanChain::wait(int64_t* next) {
  if (in_flight() == 0) value_error("Vulkan: wait() for a chained step with none in flight");
  const size_t i = size_t(waited_ % int64_t(lists_.size()));
  lists_[i]->wait();
  ++waited_;
  program_.count_time(*lists_[i]);
  const Buffer& outcome = outcomes_[i];
  outcome.invalidate(0, (kOutcomeWords + carried_) * 4);
  const auto* words = reinterpret_cast<const int32_t*>(outcome.mapped());
  for (size_t c = 0; c < carried_; ++c) next[c] = words[kOutcomeWords + c];
  return words[0] == 0;
}

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

  // Made on first use: a process that never asks for Vulkan never loads it.
  vulkan::Device& device() {
    std::call_once(made_, [this] { device_ = vulkan::Device::create(); });
    return *device_;
  }

 private:

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

Device& shared_device() { return static_cast<VulkanDevice&>(detail::vulkan_device()).device(); }

}  // namespace iron::vulkan

iron::detail::Device& iron::detail::vulkan_device() {
  static vulkan::VulkanDevice device;
  return device;
}
