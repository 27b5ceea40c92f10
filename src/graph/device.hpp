// What the graph layer asks of a device, and nothing more: memory to place a plan's buffers in,
// and the commands of a version lowered from its plan (graph/plan.hpp). The graph layer, the
// planner and the models are the same for every device; each device (devices/cpu/,
// devices/vulkan/) implements this behind it, as IREE's HAL keeps devices behind an allocator,
// command buffers and executables. It lives in graph/, not devices/, because it is the graph
// layer's side of the contract: graph/ includes nothing from devices/ (tests/graph/
// layering_test.cpp), and the devices include this to implement it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "graph/plan.hpp"
#include "iron/graph.hpp"

namespace iron::detail {

/// A block of a device's memory. On the CPU it is host memory; on a GPU the host may reach it
/// only through copies.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual int64_t bytes() const = 0;
  /// The host address of byte 0 when the host reaches the memory directly (the CPU), else null.
  virtual char* host() const = 0;
  /// Copies between the host and [offset, offset + bytes) of this buffer. A device's work must
  /// not be running on the buffer (the graph layer calls them between runs).
  virtual void write(int64_t offset, const void* source, int64_t bytes) = 0;
  virtual void read(int64_t offset, void* target, int64_t bytes) const = 0;
};

/// Where a place of a plan is now: a buffer and a byte offset in it.
struct Location {
  DeviceBuffer* buffer = nullptr;
  int64_t offset = 0;
  /// The host address, where the host reaches the buffer directly (else null).
  char* host() const { return buffer && buffer->host() ? buffer->host() + offset : nullptr; }
};
using Locator = std::function<Location(const Place&)>;

/// Steps of a version whose Emit feeds its own next run (a CarriedLoop's body), run by the
/// device ahead of the host: each step makes its per-call words on the device from the carried
/// values the step before it emitted, so the host submits steps without waiting for any and
/// reads each step's carried values from memory it maps, with later steps still queued.
class StepChain {
 public:
  virtual ~StepChain() = default;
  /// Submits the next step. At most `depth` (Program::chain) are submitted and not yet waited.
  virtual void submit() = 0;
  /// Waits for the oldest step submitted and not waited for, and writes the carried values it
  /// emitted into `next` (one per carry item). False when the device refused the step's words
  /// (a carried value the step before emitted indexes or bounds a view outside it): the step
  /// then ran again with the words before it, changing nothing, and so will every later one.
  virtual bool wait(int64_t* next) = 0;
  /// Waits until every step submitted is done; wait() then returns at once for each.
  virtual void finish() = 0;
  /// Steps submitted and not waited for.
  virtual int in_flight() const = 0;
  /// The most that may be in flight (the depth asked for, or less where the device holds fewer).
  virtual int depth() const = 0;
};

/// What a device runs: the commands of one version.
class Program {
 public:
  virtual ~Program() = default;
  /// Runs every command with this call's words, and returns when they are done.
  virtual void run(const int64_t* words) = 0;
  /// Runs command `i` alone (check mode, and around host steps).
  virtual void run_one(size_t i, const int64_t* words) = 0;
  virtual size_t commands() const = 0;
  /// This version's steps chained on the device (StepChain), the first with `words` (checked by
  /// the host), up to `depth` ahead; null where the device has no such chain (the CPU, whose
  /// host is its device: the graph's run queue steps it instead).
  virtual std::unique_ptr<StepChain> chain(const int64_t* /*words*/, int /*depth*/) { return nullptr; }
  /// The device's own clock over the run() calls so far (DeviceTime); nothing on a device
  /// without one.
  virtual DeviceTime device_time() const { return {}; }
};

class Device {
 public:
  virtual ~Device() = default;
  /// "cpu", "vulkan".
  virtual std::string name() const = 0;
  /// What it is, in a line: "cpu: avx2 fma ...", "vulkan: NVIDIA H200 (discrete GPU), ...".
  virtual std::string description() = 0;
  /// `bytes` zeroed bytes; `purpose` names them in errors ("scratch", "outputs of graph g").
  virtual std::unique_ptr<DeviceBuffer> allocate(int64_t bytes, const std::string& purpose) = 0;
  /// A weight's bytes as its checkpoint holds them, on the device once (the CPU reads the
  /// tensor's memory, often the mapped file, in place).
  virtual std::unique_ptr<DeviceBuffer> upload(const Resident& weight) = 0;
  /// A state's memory, zero at first (the CPU keeps it in the resident's tensor, which read()
  /// and the tests see).
  virtual std::unique_ptr<DeviceBuffer> allocate_state(Resident& state) = 0;
  /// The commands of a version, `at` giving each of its places' locations now. Lowered again
  /// when a location moves (the arena's scratch grows).
  virtual std::unique_ptr<Program> lower(const VersionPlan& plan, const Locator& at, int threads) = 0;

  /// What bounds a program's time on this device, measured now on its own clock: the bytes one
  /// copy moves per second and the time of one empty dispatch followed by a barrier. nullopt
  /// where the device does not measure it this way (the CPU's bound is its streaming-read
  /// bandwidth, cpu::measure_read_bandwidth).
  struct Throughput {
    double copy_bytes_per_second = 0;
    double dispatch_seconds = 0;
  };
  virtual std::optional<Throughput> measure_throughput() { return std::nullopt; }
};

/// The CPU device (devices/cpu/device.cpp).
Device& cpu_device();
/// The Vulkan device (devices/vulkan/lower.cpp), in a build with Vulkan support.
Device& vulkan_device();
/// The device called `name` ("cpu", "vulkan"); an error naming it otherwise, or saying that
/// this build has no Vulkan support.
Device& device_named(std::string_view name);

}  // namespace iron::detail
