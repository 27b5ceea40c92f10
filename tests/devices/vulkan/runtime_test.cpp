// The Vulkan runtime (src/devices/vulkan/): devices described and chosen, buffers of every kind
// uploaded and read back (mapped, and through staging as on a discrete GPU), a command list
// recorded once and submitted with new per-call words each time, the pipeline cache, and the
// errors: no loader, a bad IRON_VULKAN_DEVICE, more memory than the heap, a binding past
// maxStorageBufferRange, a wait that times out. Tests that need a device skip, naming why, on a
// machine without one; the choice and loader tests need none.
#include <gtest/gtest.h>

#if IRON_HAS_VULKAN

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "devices/vulkan/commands.hpp"
#include "devices/vulkan/device.hpp"
#include "devices/vulkan/errors.hpp"
#include "devices/vulkan/instance.hpp"
#include "devices/vulkan/pipeline.hpp"
#include "devices/vulkan/shaders.hpp"
#include "iron/error.hpp"

namespace vk = iron::vulkan;

namespace {

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The instance, or null with `why` set when this machine has no loader or no device.
std::shared_ptr<vk::Instance> instance_or_why(std::string& why) {
  try {
    auto instance = vk::Instance::shared();
    if (instance->devices().empty()) {
      why = "the loader found no physical device";
      return nullptr;
    }
    return instance;
  } catch (const iron::Error& e) {
    why = e.what();
    return nullptr;
  }
}

// The device a run would choose (IRON_VULKAN_DEVICE ignored), or null with `why` set.
std::unique_ptr<vk::Device> device_or_why(std::string& why, const vk::DeviceOptions& options = {}) {
  auto instance = instance_or_why(why);
  if (!instance) return nullptr;
  const uint32_t index = vk::choose_device(instance->devices(), nullptr);
  return vk::Device::create(instance, index, options);
}

#define IRON_VULKAN_DEVICE_OR_SKIP(device, ...)                         \
  std::string why_##device;                                             \
  auto device = device_or_why(why_##device __VA_OPT__(, ) __VA_ARGS__); \
  if (!device) GTEST_SKIP() << "no Vulkan device: " << why_##device

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const iron::Error& e) {
    return e.what();
  }
  return "(no error)";
}

vk::DeviceInfo fake_device(uint32_t index, VkPhysicalDeviceType type, const char* name,
                           const char* unusable = "") {
  vk::DeviceInfo d;
  d.index = index;
  d.type = type;
  d.name = name;
  d.unusable = unusable;
  return d;
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(VulkanChoice, PrefersADiscreteGpuThenAnIntegratedOneThenAnyOther) {
  using T = VkPhysicalDeviceType;
  const std::vector<vk::DeviceInfo> all = {
      fake_device(0, T::VK_PHYSICAL_DEVICE_TYPE_CPU, "lavapipe"),
      fake_device(1, T::VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, "igpu"),
      fake_device(2, T::VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "dgpu"),
  };
  EXPECT_EQ(vk::choose_device(all, nullptr), 2u);
  EXPECT_EQ(vk::choose_device({all[0], all[1]}, nullptr), 1u);
  EXPECT_EQ(vk::choose_device({all[0]}, nullptr), 0u);
  // An unusable device is passed over, however good its type.
  std::vector<vk::DeviceInfo> old_gpu = all;
  old_gpu[2].unusable = "Vulkan 1.1.0; IRON needs 1.2.0";
  EXPECT_EQ(vk::choose_device(old_gpu, nullptr), 1u);
  // IRON_VULKAN_DEVICE's index wins over the ranking.
  EXPECT_EQ(vk::choose_device(all, "0"), 0u);
  EXPECT_EQ(vk::choose_device(all, "1"), 1u);
}

TEST(VulkanChoice, AnOverrideThatIsNotADeviceIndexNamesTheValueAndListsTheDevices) {
  const std::vector<vk::DeviceInfo> devices = {
      fake_device(0, VK_PHYSICAL_DEVICE_TYPE_CPU, "lavapipe"),
      fake_device(1, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "dgpu")};
  for (const char* text : {"99", "2", "-1", "1x", "", " 1", "one", "99999999999999999999"}) {
    const std::string message = error_of([&] { vk::choose_device(devices, text); });
    EXPECT_NE(message.find("IRON_VULKAN_DEVICE='" + std::string(text) + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("0: lavapipe, CPU; 1: dgpu, discrete GPU"), std::string::npos)
        << message;
  }
  std::vector<vk::DeviceInfo> unusable = devices;
  unusable[1].unusable = "no compute queue";
  const std::string message = error_of([&] { vk::choose_device(unusable, "1"); });
  EXPECT_NE(message.find("cannot be used: no compute queue"), std::string::npos) << message;
}

TEST(VulkanChoice, NoPhysicalDeviceIsOneClearError) {
  const std::string message = error_of([] { vk::choose_device({}, nullptr); });
  EXPECT_NE(message.find("no Vulkan device: the loader found no physical device"),
            std::string::npos)
      << message;
}

TEST(VulkanLoader, AMissingLoaderNamesTheLibraryAndWhatToInstall) {
  try {
    vk::open_loader("libvulkan-that-is-not-there.so.1");
    FAIL() << "a loader that is not there was opened";
  } catch (const iron::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.kind(), iron::ErrorKind::io);
    EXPECT_NE(message.find("cannot load the Vulkan loader libvulkan-that-is-not-there.so.1"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("libvulkan1"), std::string::npos) << message;
    EXPECT_NE(message.find("mesa-vulkan-drivers"), std::string::npos) << message;
  }
}

TEST(VulkanDevices, EachDeviceIsDescribedWithWhatShadersCanUse) {
  std::string why;
  auto instance = instance_or_why(why);
  if (!instance) GTEST_SKIP() << "no Vulkan device: " << why;
  for (const vk::DeviceInfo& d : instance->devices()) {
    SCOPED_TRACE(d.short_name());
    EXPECT_FALSE(d.name.empty());
    if (!d.unusable.empty()) continue;
    EXPECT_GE(d.api_version, vk::kMinApiVersion);
    EXPECT_GT(d.device_local_bytes, 0u);
    EXPECT_GT(d.subgroup_size, 0u);
    EXPECT_GE(d.max_storage_buffer_range, 1u << 27);  // Vulkan's minimum is 2^27 bytes
    EXPECT_GE(d.max_workgroup_invocations, 128u);
    EXPECT_GE(d.max_push_constant_bytes, 128u);
    const std::string text = d.str();
    EXPECT_NE(text.find("maxStorageBufferRange"), std::string::npos) << text;
    EXPECT_NE(text.find("16-bit storage"), std::string::npos) << text;
    // What the test log shows of this machine's devices.
    std::printf("vulkan device %u: %s\n%s", d.index, d.short_name().c_str(), text.c_str());
  }
}

TEST(VulkanDevices, AnOutOfRangeIronVulkanDeviceListsTheDevices) {
  std::string why;
  auto instance = instance_or_why(why);
  if (!instance) GTEST_SKIP() << "no Vulkan device: " << why;
  ScopedEnv env("IRON_VULKAN_DEVICE", "99");
  const std::string message = error_of([] { vk::Device::create(); });
  EXPECT_NE(message.find("IRON_VULKAN_DEVICE='99' is not the index of a Vulkan device"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("0: " + instance->devices()[0].short_name()), std::string::npos)
      << message;
}

TEST(VulkanDevices, TheDeviceEnablesTheOptionalFeaturesItOffers) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const vk::DeviceFeatures& offered = device->info().features;
  const vk::DeviceFeatures& enabled = device->enabled();
  EXPECT_EQ(enabled.storage_buffer_16bit, offered.storage_buffer_16bit);
  EXPECT_EQ(enabled.storage_buffer_8bit, offered.storage_buffer_8bit);
  EXPECT_EQ(enabled.shader_int8, offered.shader_int8);
  EXPECT_EQ(enabled.shader_float16, offered.shader_float16);
  EXPECT_EQ(enabled.shader_int64, offered.shader_int64);
  EXPECT_EQ(enabled.subgroup_size_control, offered.subgroup_size_control);
}

// Mapped (unified memory, as lavapipe and integrated GPUs) and through staging buffers and
// copies on the queue (a discrete GPU's path, forced here).
class VulkanMemory : public ::testing::TestWithParam<bool> {};

TEST_P(VulkanMemory, EveryKindOfBufferTakesAnUploadAndGivesItBackAndIsCounted) {
  IRON_VULKAN_DEVICE_OR_SKIP(device, vk::DeviceOptions{.force_staging = GetParam()});
  if (GetParam()) {
    EXPECT_FALSE(device->maps_device_memory());
  }
  for (vk::MemoryKind kind : {vk::MemoryKind::device, vk::MemoryKind::staging,
                              vk::MemoryKind::per_call, vk::MemoryKind::readback}) {
    SCOPED_TRACE(vk::memory_kind_name(kind));
    const uint64_t before = device->allocated_bytes(kind);
    {
      vk::Buffer buffer = device->create_buffer(1000, kind, "test");
      EXPECT_EQ(buffer.size(), 1000u);
      EXPECT_EQ(device->allocated_bytes(kind), before + 1000);
      if (kind != vk::MemoryKind::device) {
        EXPECT_NE(buffer.mapped(), nullptr);
      }
      std::vector<std::byte> data(600), back(600);
      for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7 + 3);
      device->upload(buffer, 392, data);
      device->download(buffer, 392, back);
      EXPECT_EQ(data, back);
      // Past the end: refused, naming the sizes.
      const std::string message = error_of([&] { device->upload(buffer, 401, data); });
      EXPECT_NE(message.find("runs past the end of a"), std::string::npos) << message;
      // A moved buffer is counted once.
      vk::Buffer moved = std::move(buffer);
      EXPECT_FALSE(buffer);
      EXPECT_EQ(device->allocated_bytes(kind), before + 1000);
    }
    EXPECT_EQ(device->allocated_bytes(kind), before);
  }
}

// The point of the runtime: one recording, three submits, each with its own per-call words in a
// host-visible buffer, each result exact.
TEST_P(VulkanMemory, ACommandListRecordedOnceRunsEachCallWithItsOwnWords) {
  IRON_VULKAN_DEVICE_OR_SKIP(device, vk::DeviceOptions{.force_staging = GetParam()});
  constexpr uint32_t n = 4096, group = 64;
  constexpr float a = 3, b = -7;
  const uint32_t sentinel = 0xdeadbeef;
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i)
    x[i] = float(int(i) - 1000);  // small integers: every result exact
  vk::Buffer xs = device->create_buffer(n * 4, vk::MemoryKind::device, "x");
  vk::Buffer ys = device->create_buffer(n * 4, vk::MemoryKind::device, "y");
  vk::Buffer words = device->create_buffer(4 * sizeof(int32_t), vk::MemoryKind::per_call, "words");
  ASSERT_NE(words.mapped(), nullptr);
  device->upload(xs, 0, bytes_of(x));

  const vk::Pipeline& fill = device->pipeline({"fill", {group}, 1, 12});
  // The affine shader reads `first` and `count` from words 2 and 3 (specialization constant 1).
  const vk::Pipeline& affine = device->pipeline({"affine", {group, 2}, 3, 8});
  vk::CommandList list(*device);
  list.begin();
  const bool timed = device->info().timestamps;
  if (timed) list.timestamp();
  list.bind(fill);
  list.bind_buffers({{&ys, 0, ys.size()}});
  const uint32_t fill_push[3] = {0, n, sentinel};
  list.push_constants(fill_push);
  list.dispatch(n / group);
  list.barrier();
  list.bind(affine);
  list.bind_buffers({{&xs, 0, xs.size()}, {&ys, 0, ys.size()}, {&words, 0, words.size()}});
  const float affine_push[2] = {a, b};
  list.push_constants(affine_push);
  list.dispatch(n / group /
                4);  // fewer invocations than elements: the shader's loop covers the rest
  list.host_barrier();
  if (timed) list.timestamp();
  list.end();
  EXPECT_EQ(list.dispatches(), 2u);

  struct Call {
    int32_t first, count;
  };
  for (const Call call : {Call{0, int32_t(n)}, Call{100, 7}, Call{4000, 96}}) {
    SCOPED_TRACE(::testing::Message() << "first " << call.first << ", count " << call.count);
    auto* w = reinterpret_cast<int32_t*>(words.mapped());
    w[0] = -1;  // words of other kernels: the shader must not read them
    w[1] = -1;
    w[2] = call.first;
    w[3] = call.count;
    words.flush(0, words.size());
    list.submit();
    list.wait();
    std::vector<uint32_t> y(n);
    device->download(ys, 0, std::as_writable_bytes(std::span(y)));
    int wrong = 0;
    for (int32_t i = 0; i < int32_t(n); ++i) {
      const bool written = i >= call.first && i < call.first + call.count;
      const uint32_t expected = written ? bits_of(a * x[i] + b) : sentinel;
      if (y[i] != expected && ++wrong <= 5)
        ADD_FAILURE() << "y[" << i << "] = " << y[i] << ", expected " << expected;
    }
    EXPECT_EQ(wrong, 0);
    if (timed) {
      const std::vector<double> ns = list.timestamps_ns();
      ASSERT_EQ(ns.size(), 2u);
      EXPECT_LE(ns[0], ns[1]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MappedOrStaged, VulkanMemory, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Staged" : "Mapped";
                         });

TEST(VulkanCommands, AListIsRecordedAgainWhenItsBuffersMove) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const vk::Pipeline& fill = device->pipeline({"fill", {32}, 1, 12});
  vk::Buffer first = device->create_buffer(256, vk::MemoryKind::device, "first");
  vk::Buffer second = device->create_buffer(512, vk::MemoryKind::device, "second");
  vk::CommandList list(*device);
  auto record = [&](const vk::Buffer& target, uint32_t value) {
    list.begin();
    list.bind(fill);
    list.bind_buffers({{&target, 0, target.size()}});
    const uint32_t push[3] = {0, uint32_t(target.size() / 4), value};
    list.push_constants(push);
    list.dispatch(1);
    list.host_barrier();
    list.end();
  };
  record(first, 11);
  list.submit();
  list.wait();
  record(second, 22);  // the buffer "moved": same list, new recording
  list.submit();
  list.wait();
  std::vector<uint32_t> a(64), b(128);
  device->download(first, 0, std::as_writable_bytes(std::span(a)));
  device->download(second, 0, std::as_writable_bytes(std::span(b)));
  EXPECT_EQ(a, std::vector<uint32_t>(64, 11));
  EXPECT_EQ(b, std::vector<uint32_t>(128, 22));
}

TEST(VulkanCommands, MisuseIsRefusedWithAMessage) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const vk::Pipeline& fill = device->pipeline({"fill", {64}, 1, 12});
  vk::Buffer buffer = device->create_buffer(1024, vk::MemoryKind::device, "target");
  vk::CommandList list(*device);
  EXPECT_NE(error_of([&] { list.submit(); }).find("cannot submit while empty"), std::string::npos);
  list.begin();
  EXPECT_NE(error_of([&] { list.dispatch(1); }).find("before a pipeline is bound"),
            std::string::npos);
  list.bind(fill);
  EXPECT_NE(error_of([&] { list.dispatch(1); }).find("before its buffers are bound"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list.bind_buffers({}); }).find("takes 1 buffers, not 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              list.bind_buffers({{&buffer, 512, 1024}});
            }).find("run past the end of its buffer"),
            std::string::npos);
  if (device->info().min_storage_buffer_offset_alignment > 1) {
    EXPECT_NE(error_of([&] {
                list.bind_buffers({{&buffer, 1, 16}});
              }).find("minStorageBufferOffsetAlignment"),
              std::string::npos);
  }
  const uint32_t two_words[2] = {0, 0};
  EXPECT_NE(error_of([&] {
              list.push_constants(two_words);
            }).find("takes 12 bytes of push constants, not 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] { list.submit(); }).find("cannot submit while recording"),
            std::string::npos);
}

TEST(VulkanCommands, ABindingPastMaxStorageBufferRangeNamesTheLimit) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const uint64_t limit = device->info().max_storage_buffer_range;
  // Vulkan guarantees 128 MiB; a device with gigabytes of range would need gigabytes here.
  if (limit > (uint64_t(1) << 30))
    GTEST_SKIP() << "maxStorageBufferRange is " << limit << " bytes: too large to exceed in a test";
  vk::Buffer big = device->create_buffer(limit + 64, vk::MemoryKind::device, "past the range");
  vk::CommandList list(*device);
  list.begin();
  list.bind(device->pipeline({"fill", {64}, 1, 12}));
  const std::string message = error_of([&] { list.bind_buffers({{&big, 0, big.size()}}); });
  EXPECT_NE(message.find("maxStorageBufferRange " + std::to_string(limit)), std::string::npos)
      << message;
  // The same buffer bound in two ranges within the limit is fine.
  list.bind_buffers({{&big, 0, limit}});
  list.bind_buffers({{&big, 64, limit}});
}

TEST(VulkanPipelines, TheSameKeyGivesTheSamePipelineAndBadKeysAreRefused) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const vk::PipelineKey key{"fill", {64}, 1, 12};
  const vk::Pipeline& first = device->pipeline(key);
  const vk::Pipeline& again = device->pipeline(key);
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(first.pipeline, again.pipeline);
  const vk::Pipeline& other = device->pipeline({"fill", {128}, 1, 12});
  EXPECT_NE(&other, &first);
  EXPECT_NE(other.pipeline, first.pipeline);
  const std::string unknown = error_of([&] { device->pipeline({"no_such_shader", {}, 1, 0}); });
  EXPECT_NE(unknown.find("no Vulkan shader named 'no_such_shader'"), std::string::npos) << unknown;
  // The embedded shaders are listed, sorted (operators' shaders among them).
  EXPECT_NE(unknown.find("(embedded: affine, "), std::string::npos) << unknown;
  EXPECT_NE(unknown.find(", fill, "), std::string::npos) << unknown;
  const std::string push = error_of([&] { device->pipeline({"fill", {64}, 1, 6}); });
  EXPECT_NE(push.find("multiple of 4"), std::string::npos) << push;
}

TEST(VulkanShaders, EveryEmbeddedShaderIsSpirV) {
  for (const std::string& name : vk::shader_names()) {
    const std::span<const uint32_t> words = vk::find_shader(name);
    ASSERT_GE(words.size(), 5u) << name;
    EXPECT_EQ(words[0], 0x07230203u) << name;  // SPIR-V's magic number
  }
  EXPECT_TRUE(vk::find_shader("not a shader").empty());
}

TEST(VulkanMemoryErrors, MoreThanTheHeapIsAClearErrorAndNoCrash) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const uint64_t asked = device->info().device_local_bytes + (uint64_t(1) << 30);
  try {
    device->create_buffer(asked, vk::MemoryKind::device, "weights");
    FAIL() << "a buffer larger than the device's memory was made";
  } catch (const vk::VulkanError& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.result(), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_NE(message.find("out of device memory: a device buffer of"), std::string::npos)
        << message;
    EXPECT_NE(message.find(std::to_string(asked) + " bytes) for weights"), std::string::npos)
        << message;
    EXPECT_NE(message.find("memory heap"), std::string::npos) << message;
  }
  EXPECT_EQ(device->allocated_bytes(vk::MemoryKind::device), 0u);
  // The device works on.
  vk::Buffer small = device->create_buffer(64, vk::MemoryKind::device, "after");
  EXPECT_TRUE(small);
}

TEST(VulkanCommands, AWaitThatTimesOutSaysSoAndTheWorkStillFinishes) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  // 256 workgroups of 64 invocations, 60,000 steps each: about a second of llvmpipe's time.
  constexpr uint32_t groups = 256, invocations = groups * 64, iterations = 60'000;
  vk::Buffer states =
      device->create_buffer(invocations * 4, vk::MemoryKind::per_call, "spin states");
  std::memset(states.mapped(), 0, states.size());
  states.flush(0, states.size());
  vk::CommandList list(*device);
  list.begin();
  list.bind(device->pipeline({"spin", {}, 1, 4}));
  list.bind_buffers({{&states, 0, states.size()}});
  list.push_constants(iterations);
  list.dispatch(groups);
  list.host_barrier();
  list.end();
  list.submit();
  if (list.done()) GTEST_SKIP() << "the device finished the work before the first look";
  try {
    list.wait(std::chrono::microseconds(1));
    FAIL() << "a wait of 1 us did not time out";
  } catch (const vk::VulkanError& e) {
    EXPECT_EQ(e.result(), VK_TIMEOUT);
    EXPECT_NE(std::string(e.what()).find("timed out after 1 us waiting for a command list"),
              std::string::npos)
        << e.what();
  }
  // Still in flight: a new submission or recording is refused until it is waited for.
  EXPECT_NE(error_of([&] { list.submit(); }).find("in flight"), std::string::npos);
  EXPECT_NE(error_of([&] { list.begin(); }).find("wait() first"), std::string::npos);
  list.wait();
  EXPECT_TRUE(list.done());
  uint32_t expected = 0;
  for (uint32_t i = 0; i < iterations; ++i) expected = expected * 1664525u + 1013904223u;
  std::vector<uint32_t> got(invocations);
  device->download(states, 0, std::as_writable_bytes(std::span(got)));
  EXPECT_EQ(got, std::vector<uint32_t>(invocations, expected));
}

// A submission of spin.comp that runs for a while on llvmpipe (about a second on a quiet core):
// the states it writes, and the list that runs it, recorded and ended.
struct Spin {
  static constexpr uint32_t groups = 256, invocations = groups * 64, iterations = 60'000;
  vk::Buffer states;
  explicit Spin(vk::Device& device)
      : states(device.create_buffer(invocations * 4, vk::MemoryKind::per_call, "spin states")) {
    std::memset(states.mapped(), 0, states.size());
    states.flush(0, states.size());
  }
  void record(vk::Device& device, vk::CommandList& list) const {
    list.begin();
    list.bind(device.pipeline({"spin", {}, 1, 4}));
    list.bind_buffers({{&states, 0, states.size()}});
    list.push_constants(iterations);
    list.dispatch(groups);
    list.host_barrier();
    list.end();
  }
  static std::vector<uint32_t> expected() {
    uint32_t v = 0;
    for (uint32_t i = 0; i < iterations; ++i) v = v * 1664525u + 1013904223u;
    return std::vector<uint32_t>(invocations, v);
  }
  std::vector<uint32_t> got(vk::Device& device) const {
    std::vector<uint32_t> out(invocations);
    device.download(states, 0, std::as_writable_bytes(std::span(out)));
    return out;
  }
};

// A command list destroyed while its submission runs (its wait timed out) waits for it, however
// long, before freeing anything: it used to log, leak, and return while its buffers were freed
// under the running shader (a SIGSEGV in MiniLM's Vulkan test on a loaded machine).
TEST(VulkanCommands, AListDestroyedWhileItRunsWaitsForItsWork) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  device->set_wait_limit(std::chrono::microseconds(1));  // every wait without a timeout, too
  Spin spin(*device);
  {
    vk::CommandList list(*device);
    spin.record(*device, list);
    list.submit();
    if (list.done()) GTEST_SKIP() << "the device finished the work before the first look";
    EXPECT_THROW(list.wait(), iron::Error);
  }  // destroyed here, still running
  // Nothing runs any more: the states are the shader's last, read with no wait in between.
  std::vector<uint32_t> now(Spin::invocations);
  spin.states.invalidate(0, spin.states.size());
  std::memcpy(now.data(), spin.states.mapped(), spin.states.size());
  EXPECT_EQ(now, Spin::expected());
}

// A buffer freed while a submission that binds it runs waits for the submission first.
TEST(VulkanCommands, ABufferFreedWhileASubmissionReadsItWaitsForIt) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  vk::CommandList list(*device);
  {
    Spin spin(*device);
    spin.record(*device, list);
    list.submit();
    if (list.done()) GTEST_SKIP() << "the device finished the work before the first look";
  }  // the states are freed here
  EXPECT_TRUE(list.done());
  list.wait(std::chrono::microseconds(1));  // done: returns at once
}

// After a wait that timed out, a copy on the queue (a download) and a new submission still work.
TEST(VulkanCommands, TheDeviceWorksOnAfterAWaitTimesOut) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  Spin spin(*device);
  vk::CommandList list(*device);
  spin.record(*device, list);
  list.submit();
  if (list.done()) GTEST_SKIP() << "the device finished the work before the first look";
  EXPECT_THROW(list.wait(std::chrono::microseconds(1)), iron::Error);
  list.wait();
  EXPECT_EQ(spin.got(*device), Spin::expected());
  list.submit();
  list.wait();
  EXPECT_TRUE(list.done());
}

TEST(VulkanCommands, TheWaitLimitComesFromTheEnvironmentOrTheKindOfDevice) {
  IRON_VULKAN_DEVICE_OR_SKIP(device);
  const auto limit = device->wait_limit();
  if (std::getenv("IRON_VULKAN_TIMEOUT_S") == nullptr) {
    EXPECT_EQ(limit, device->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU
                         ? std::chrono::nanoseconds(vk::kDefaultWaitOnTheHost)
                         : std::chrono::nanoseconds(vk::kDefaultWait));
  }
}

}  // namespace

#else  // IRON_HAS_VULKAN

TEST(VulkanRuntime, NotBuilt) {
  GTEST_SKIP() << "Vulkan support not built (configure with -DIRON_VULKAN=ON)";
}

#endif
