#include "devices/cpu/trace.hpp"

#include <sstream>
#include <mutex>
#include <string>
#include <vector>

#include "iron/error.hpp"
#include "iron/io/files.hpp"
#include "iron/trace.hpp"

namespace iron::cpu {

std::atomic<bool> trace_enabled{false};

namespace {
struct Span {
  const char* name;
  int64_t begin, end;
};
constexpr int kMaxThreads = 64;
struct Buffers {
  std::vector<Span> spans[kMaxThreads];
  size_t capacity = 0;
};
Buffers& buffers() {
  static Buffers b;
  return b;
}
}  // namespace

void trace_span(const char* name, int thread, int64_t begin_ns, int64_t end_ns) {
  if (thread < 0 || thread >= kMaxThreads) return;
  auto& v = buffers().spans[thread];
  if (v.size() < buffers().capacity) v.push_back({name, begin_ns, end_ns});
}

}  // namespace iron::cpu

namespace iron::trace {

void start(size_t capacity) {
  auto& b = cpu::buffers();
  b.capacity = capacity;
  for (auto& v : b.spans) {
    v.clear();
    v.reserve(capacity);
  }
  cpu::trace_enabled.store(true);
}

bool on() { return cpu::trace_enabled.load(); }

size_t stop_and_write(const std::string& path) {
  cpu::trace_enabled.store(false);
  auto& b = cpu::buffers();
  std::ostringstream out;
  int64_t origin = INT64_MAX;
  for (auto& v : b.spans)
    for (auto& s : v) origin = std::min(origin, s.begin);
  out << "{\"traceEvents\": [\n";
  size_t count = 0;
  for (int t = 0; t < cpu::kMaxThreads; ++t)
    for (auto& s : b.spans[t]) {
      out << (count++ ? ",\n" : "") << "{\"name\": \"" << s.name << "\", \"ph\": \"X\", \"pid\": 1, \"tid\": " << t
          << ", \"ts\": " << double(s.begin - origin) / 1000.0 << ", \"dur\": " << double(s.end - s.begin) / 1000.0 << "}";
    }
  out << "\n], \"displayTimeUnit\": \"ns\"}\n";
  io::write_file(path, out.str(), "the trace");  // every write and the close checked
  return count;
}

}  // namespace iron::trace
