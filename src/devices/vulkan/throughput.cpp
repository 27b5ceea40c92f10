#include "devices/vulkan/throughput.hpp"

#include <algorithm>
#include <limits>

#include "devices/vulkan/commands.hpp"

namespace iron::vulkan {

namespace {

// The fastest of `tries` submissions of `list`, whose commands sit between its two timestamps.
double fastest_seconds(CommandList& list, int tries) {
  double best = std::numeric_limits<double>::infinity();
  for (int t = 0; t < tries; ++t) {
    list.submit();
    list.wait();
    const std::vector<double> ns = list.timestamps_ns();
    best = std::min(best, (ns[1] - ns[0]) * 1e-9);
  }
  return best;
}

}  // namespace

std::optional<Throughput> measure_throughput(Device& device) {
  if (!device.info().timestamps) return std::nullopt;
  Throughput t;
  // A copy large enough that its start-up is lost in it (256 MiB moves in ~0.1 ms at GPU
  // rates), but never past what one buffer may hold.
  const size_t bytes = size_t(std::min<uint64_t>(uint64_t(256) << 20, std::min(device.info().max_buffer_bytes, device.info().max_allocation_bytes)));
  {
    Buffer from = device.create_buffer(bytes, MemoryKind::device, "the copy-bandwidth test's source");
    Buffer to = device.create_buffer(bytes, MemoryKind::device, "the copy-bandwidth test's target");
    CommandList list(device);
    list.begin();
    list.timestamp();
    list.copy(from, 0, to, 0, bytes);
    list.timestamp();
    list.end();
    t.copy_bytes_per_second = double(bytes) / fastest_seconds(list, 5);
  }
  {
    // Dispatches of a shader with nothing to do, each behind a barrier as a plan's dependent
    // steps are: what a step costs beyond its bytes.
    constexpr int kDispatches = 256;
    Buffer words = device.create_buffer(16, MemoryKind::device, "the dispatch test's buffer");
    const uint32_t nothing[3] = {0, 0, 0};  // fill.comp: first, count 0, value
    CommandList list(device);
    list.begin();
    list.timestamp();
    list.bind(device.pipeline({"fill", {64}, 1, 12}));
    list.bind_buffers({{&words, 0, words.size()}});
    list.push_constants(nothing);
    for (int i = 0; i < kDispatches; ++i) {
      list.dispatch(1);
      list.barrier();
    }
    list.timestamp();
    list.end();
    t.dispatch_seconds = fastest_seconds(list, 5) / kDispatches;
  }
  return t;
}

}  // namespace iron::vulkan
