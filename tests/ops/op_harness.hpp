// Runs one operator directly, without a graph: host buffers of any dtype, cpu::Operands pointing
// at them (every per-axis bound and scalar a per-call word), the kernel at 1 and 2 threads, and
// the operator's reference() on f32 copies; every element of every output buffer is compared.
// Where this machine has a Vulkan device and the operator a Vulkan kernel, the same buffers and
// words run through that kernel too, against the same reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#if IRON_HAS_VULKAN
#include "devices/vulkan/commands.hpp"
#include "devices/vulkan/kernel.hpp"
#endif
#include "devices/cpu/thread_pool.hpp"
#include "iron/handle.hpp"
#include "iron/operator.hpp"
#include "ops/op.hpp"

namespace iron::test {

/// One operand of a direct call: a view of a host buffer.
struct Arg {
  DType dtype = f32;
  Shape shape;                   // the view's shape
  Shape valid;                   // entries of each axis valid this call (empty: all of them)
  Shape strides;                 // element strides of the view (empty: contiguous)
  int64_t offset = 0;            // the view's first element in its buffer
  bool offset_per_call = false;  // the kernel reads `offset` from a per-call word
  std::vector<float> values;     // the buffer's leading values (the rest random in [lo, hi])
  float lo = -1, hi = 1;         // the range of random values
  std::vector<int32_t> ids;      // rows gathered per call (an i32 operand) from `table_rows` rows
  std::vector<int64_t> fixed_rows;  // rows gathered by fixed ids
  int64_t table_rows = 0;
};

/// A dense operand of `shape`, `valid` entries per axis this call (empty: all).
inline Arg dense(Shape shape, DType dtype = f32, Shape valid = {}) {
  Arg a;
  a.shape = std::move(shape);
  a.dtype = dtype;
  a.valid = std::move(valid);
  return a;
}
/// A dense operand holding `values`.
inline Arg given(Shape shape, std::vector<float> values, DType dtype = f32) {
  Arg a = dense(std::move(shape), dtype);
  a.values = std::move(values);
  return a;
}
/// Random values in [lo, hi].
inline Arg ranged(Arg a, float lo, float hi) {
  a.lo = lo;
  a.hi = hi;
  return a;
}

struct Case {
  std::string op;
  Fields params, tunables;
  Precision precision = Precision::highest;
  std::vector<Arg> in, out;
  std::vector<int64_t> scalars;
  uint32_t seed = 1;
  std::string not_on_vulkan;  // why a case the Vulkan kernel takes but does not compute is not run there
};

/// Every output buffer as f32: the reference's, the CPU kernel's at 1 and at 2 threads, and the
/// Vulkan kernel's (empty where it did not run).
struct Result {
  std::vector<std::vector<float>> ref, one_thread, two_threads, vulkan;
};

#if IRON_HAS_VULKAN
/// The Vulkan device the tests share, or null (with why) where this machine has none.
inline vulkan::Device* test_vulkan_device(std::string* why = nullptr) {
  static std::string reason;
  static std::unique_ptr<vulkan::Device> device = [] {
    try {
      return vulkan::Device::create();
    } catch (const Error& e) {
      reason = e.what();
      return std::unique_ptr<vulkan::Device>();
    }
  }();
  if (why) *why = reason;
  return device.get();
}
#endif

// ---- quantising (for weights of the block kinds; any valid encoding serves) ----------------

inline void store_f16(uint8_t* p, float x) {
  uint16_t h = f32_to_f16(x);
  std::memcpy(p, &h, 2);
}

// 32 quants of 4 or 5 bits in ggml's layout: nibbles (byte i: quants i and i + 16) and, with
// `fifth`, 4 bytes whose bit i is quant i's fifth bit.
inline void put_quants32(const int* q, uint8_t* nibbles, uint8_t* fifth) {
  for (int i = 0; i < 16; ++i) nibbles[i] = uint8_t((q[i] & 15) | ((q[i + 16] & 15) << 4));
  if (!fifth) return;
  uint32_t bits = 0;
  for (int i = 0; i < 32; ++i) bits |= uint32_t((q[i] >> 4) & 1) << i;
  std::memcpy(fifth, &bits, 4);
}

// One super-block of 256 as q4_k / q5_k (every sub-block scale and minimum 63, so d and dmin
// carry the range) or q6_k (every scale 127).
inline void quantise_k(DType t, const float* x, uint8_t* out) {
  float lo = x[0], hi = x[0], amax = 0;
  for (int i = 0; i < 256; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]), amax = std::max(amax, std::abs(x[i]));
  auto half_of = [](float v) { return f16_to_f32(f32_to_f16(v)); };
  if (t == DType::q6_k) {
    const float d = half_of(amax / (31 * 127)), step = d * 127, id = step > 0 ? 1 / step : 0;
    std::memset(out, 0, 210);
    for (int i = 0; i < 256; ++i) {
      const int q = std::clamp(int(std::lround(x[i] * id)) + 32, 0, 63);
      const int h = i / 128, c = (i % 128) / 32, l = i % 32;
      out[64 * h + 32 * (c % 2) + l] |= uint8_t((q & 15) << (4 * (c / 2)));
      out[128 + 32 * h + l] |= uint8_t((q >> 4) << (2 * c));
    }
    std::memset(out + 192, 127, 16);
    store_f16(out + 208, d);
    return;
  }
  const bool fifth = t == DType::q5_k;
  const int levels = fifth ? 32 : 16;
  const float d = half_of((hi - lo) / float((levels - 1) * 63)), dmin = half_of(-lo / 63);
  const float step = d * 63, id = step > 0 ? 1 / step : 0;
  store_f16(out, d);
  store_f16(out + 2, dmin);
  std::memset(out + 4, 0xff, 12);  // every 6-bit scale and minimum 63
  uint8_t* bits = out + 16;
  uint8_t* nibbles = out + (fifth ? 48 : 16);
  if (fifth) std::memset(bits, 0, 32);
  std::memset(nibbles, 0, 128);
  for (int i = 0; i < 256; ++i) {
    const int q = std::clamp(int(std::lround((x[i] + dmin * 63) * id)), 0, levels - 1);
    const int j = i / 32, l = i % 32;
    nibbles[32 * (j / 2) + l] |= uint8_t((q & 15) << (4 * (j % 2)));
    if (fifth) bits[l] |= uint8_t((q >> 4) << j);
  }
}

inline void quantise(DType t, const float* x, uint8_t* out, int64_t n) {
  if (info(t).block == 256) {
    for (int64_t b = 0; b < n / 256; ++b) quantise_k(t, x + 256 * b, out + info(t).bytes * b);
    return;
  }
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    int q[32];
    if (t == DType::q8_0) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[i]));
      float d = amax / 127, id = d > 0 ? 1 / d : 0;
      store_f16(out, d);
      for (int i = 0; i < 32; ++i) out[2 + i] = uint8_t(int8_t(std::lround(x[i] * id)));
      out += 34;
    } else if (t == DType::q4_0 || t == DType::q5_0) {
      const bool five = t == DType::q5_0;
      const int offset = five ? 16 : 8;
      float amax = 0, top = 0;
      for (int i = 0; i < 32; ++i)
        if (std::abs(x[i]) > amax) amax = std::abs(x[i]), top = x[i];
      float d = top / float(-offset), id = d != 0 ? 1 / d : 0;
      store_f16(out, d);
      for (int i = 0; i < 32; ++i) q[i] = std::clamp<int>(int(x[i] * id + float(offset) + 0.5f), 0, 2 * offset - 1);
      put_quants32(q, out + (five ? 6 : 2), five ? out + 2 : nullptr);
      out += five ? 22 : 18;
    } else if (t == DType::q4_1 || t == DType::q5_1) {
      const bool five = t == DType::q5_1;
      const int top = five ? 31 : 15;
      float lo = x[0], hi = x[0];
      for (int i = 0; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
      float d = (hi - lo) / float(top), id = d > 0 ? 1 / d : 0;
      store_f16(out, d);
      store_f16(out + 2, lo);
      for (int i = 0; i < 32; ++i) q[i] = std::clamp<int>(int(std::lround((x[i] - lo) * id)), 0, top);
      put_quants32(q, out + (five ? 8 : 4), five ? out + 4 : nullptr);
      out += five ? 24 : 20;
    } else {
      ADD_FAILURE() << "the harness cannot quantise to " << name(t);
      return;
    }
  }
}

// ---- host buffers ----------------------------------------------------------------------------

struct HostBuffer {
  DType dtype = f32;
  int64_t elements = 0;
  std::vector<uint64_t> storage;  // 8-byte aligned bytes
  char* data() { return reinterpret_cast<char*>(storage.data()); }

  HostBuffer(DType t, int64_t n) : dtype(t), elements(n) {
    storage.assign(size_t(storage_bytes(t, n) + 7) / 8 + 1, 0);
  }
  /// Stores `x` as this dtype (quantising block kinds); integers are truncated.
  void write(const std::vector<float>& x) {
    if (info(dtype).quantised)
      quantise(dtype, x.data(), reinterpret_cast<uint8_t*>(data()), elements);
    else
      from_f32(dtype, x.data(), data(), elements);
  }
  std::vector<float> read() {
    std::vector<float> x(static_cast<size_t>(elements));
    to_f32(dtype, data(), x.data(), elements);
    return x;
  }
};

/// Elements of the buffer a view walks: up to its furthest element, whole blocks.
inline int64_t buffer_elements(const Arg& a, const Shape& strides) {
  int64_t last = a.offset;
  for (size_t axis = 0; axis < a.shape.size(); ++axis) {
    int64_t extent = axis == 0 && a.table_rows > 0 ? a.table_rows : a.shape[axis];
    last += (std::max<int64_t>(extent, 1) - 1) * strides[axis];
  }
  int64_t n = std::max<int64_t>(last + 1, int64_t(a.values.size()));
  int64_t block = info(a.dtype).block;
  return (n + block - 1) / block * block;
}

/// Whether `got` is within `op`'s tolerance at `precision` of `ref`, plus one rounding to `dtype`.
inline bool admits(const Tolerance& tol, DType dtype, double got, double ref) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  double slack =
      tol.atol + tol.rtol * std::abs(ref) + 2 * iron::unit_roundoff(dtype) * std::abs(ref);
  return std::abs(got - ref) <= slack;
}

/// Builds the operator, runs its kernel at 1 and 2 threads and its reference, and compares every
/// element of every output buffer (elements neither writes keep their initial values in both).
inline Result run_case(const Case& c) {
  std::ostringstream trace;
  trace << c.op << " " << c.params.str() << " " << c.tunables.str() << " at " << name(c.precision);
  SCOPED_TRACE(trace.str());
  std::shared_ptr<Operator> op = catalog_entry(c.op).make(c.params, c.tunables);
  std::mt19937 rng(c.seed);

  std::deque<HostBuffer> buffers;  // stable addresses
  std::deque<std::vector<float>> ref_data;
  std::deque<std::vector<int64_t>> ref_rows;
  std::vector<int64_t> words;
  cpu::KernelArgs args;
  args.precision = c.precision;
  args.features = &cpu::Features::host();
  RefCall call;
  std::vector<std::vector<float>> initial_out;
  std::vector<HostBuffer*> out_buffers;
  std::vector<std::vector<float>*> out_ref;

  auto add = [&](const Arg& a, bool output) {
    Shape strides = a.strides.empty() ? contiguous_strides(a.shape) : a.strides;
    int64_t n = buffer_elements(a, strides);
    std::vector<float> x(static_cast<size_t>(n));
    std::uniform_real_distribution<float> uniform(a.lo, a.hi);
    for (float& v : x) v = output ? 5.0f : uniform(rng);
    std::copy(a.values.begin(), a.values.end(), x.begin());
    HostBuffer& b = buffers.emplace_back(a.dtype, n);
    b.write(x);
    std::vector<float>& f = ref_data.emplace_back(b.read());
    if (output) {
      initial_out.push_back(f);
      out_buffers.push_back(&b);
      out_ref.push_back(&f);
    }

    cpu::Operand o;
    o.base = b.data();
    o.dtype = a.dtype;
    o.shape = a.shape;
    o.strides = strides;
    o.offset = {-1, a.offset};
    if (a.offset_per_call) {
      words.push_back(a.offset);
      o.offset = {int(words.size()) - 1, 0};
    }
    Shape valid = a.valid.empty() ? a.shape : a.valid;
    for (int64_t v : valid) {
      words.push_back(v);
      o.valid.push_back({int(words.size()) - 1, 0});
    }
    RefOperand r;
    r.data = f.data() + a.offset;
    r.shape = a.shape;
    r.valid = valid;
    r.dtype = a.dtype;
    r.strides = strides;
    if (!a.ids.empty()) {
      HostBuffer& ib = buffers.emplace_back(i32, int64_t(a.ids.size()));
      std::memcpy(ib.data(), a.ids.data(), a.ids.size() * 4);
      auto ids = std::make_shared<cpu::Operand>();
      ids->base = ib.data();
      ids->dtype = i32;
      ids->shape = {int64_t(a.ids.size())};
      ids->strides = {1};
      ids->valid = {{-1, int64_t(a.ids.size())}};
      o.ids = ids;
      o.table_rows = a.table_rows;
      r.rows = &ref_rows.emplace_back(a.ids.begin(), a.ids.end());
      r.table_rows = a.table_rows;
    } else if (!a.fixed_rows.empty()) {
      o.fixed_rows = a.fixed_rows;
      o.table_rows = a.table_rows;
      r.rows = &ref_rows.emplace_back(a.fixed_rows);
    }
    (output ? args.out : args.in).push_back(o);
    (output ? call.out : call.in).push_back(r);
  };
  for (const Arg& a : c.in) add(a, false);
  for (const Arg& a : c.out) add(a, true);
  for (int64_t s : c.scalars) {
    words.push_back(s);
    args.scalars.push_back({int(words.size()) - 1, 0});
  }
  call.scalars = c.scalars;

  Result result;
  op->reference(call);
  for (const std::vector<float>* f : out_ref) result.ref.push_back(*f);

  std::unique_ptr<cpu::Kernel> kernel = cpu::kernels().make(*op, args);
  Tolerance tol = op->tolerance(c.precision);
  auto compare = [&](std::vector<std::vector<float>>& got, const std::string& where) {
    for (size_t k = 0; k < c.out.size(); ++k) {
      const std::vector<float>& want = result.ref[k];
      int failures = 0;
      for (size_t e = 0; e < want.size(); ++e) {
        if (admits(tol, c.out[k].dtype, got[k][e], want[e])) continue;
        if (++failures <= 5)
          ADD_FAILURE() << "output " << k << " element " << e << " " << where << ": kernel " << got[k][e]
                        << ", reference " << want[e] << " (atol " << tol.atol << ", rtol " << tol.rtol << ", out "
                        << name(c.out[k].dtype) << ")";
      }
      if (failures > 5) ADD_FAILURE() << failures << " elements outside the tolerance in all";
    }
  };
  for (int threads : {1, 2}) {
    // Reset the outputs, run, compare.
    for (size_t k = 0; k < c.out.size(); ++k) out_buffers[k]->write(initial_out[k]);
    cpu::run_kernel(*kernel, words.data(), threads);
    auto& got = threads == 1 ? result.one_thread : result.two_threads;
    for (size_t k = 0; k < c.out.size(); ++k) got.push_back(out_buffers[k]->read());
    compare(got, "at " + std::to_string(threads) + " thread(s)");
  }
#if IRON_HAS_VULKAN
  if (static std::set<std::string> said; !c.not_on_vulkan.empty() && test_vulkan_device() && said.insert(c.not_on_vulkan).second)
    std::fprintf(stderr, "[vulkan] not run: %s\n", c.not_on_vulkan.c_str());
  if (vulkan::Device* device = test_vulkan_device(); device && vulkan::find_kernel(c.op) && c.not_on_vulkan.empty()) {
    // Each host buffer's bytes (outputs at their initial values) in a device buffer of its own.
    for (size_t k = 0; k < c.out.size(); ++k) out_buffers[k]->write(initial_out[k]);
    std::vector<vulkan::Buffer> device_buffers;
    std::vector<const HostBuffer*> hosts;
    for (HostBuffer& b : buffers) {
      const size_t bytes = size_t(storage_bytes(b.dtype, b.elements));
      device_buffers.push_back(device->create_buffer(vulkan::padded_bytes(int64_t(bytes)), vulkan::MemoryKind::device, "test"));
      device->upload(device_buffers.back(), 0, {reinterpret_cast<const std::byte*>(b.data()), bytes});
      hosts.push_back(&b);
    }
    auto buffer_of = [&](const char* base) -> const vulkan::Buffer* {
      for (size_t i = 0; i < hosts.size(); ++i)
        if (const_cast<HostBuffer*>(hosts[i])->data() == base) return &device_buffers[i];
      return nullptr;
    };
    std::function<vulkan::Operand(const cpu::Operand&)> on_device = [&](const cpu::Operand& o) {
      vulkan::Operand v;
      static_cast<detail::ViewLayout&>(v) = o;
      v.buffer = buffer_of(o.base);
      if (o.ids) v.ids = std::make_shared<vulkan::Operand>(on_device(*o.ids));
      return v;
    };
    vulkan::KernelArgs va;
    for (const cpu::Operand& o : args.in) va.in.push_back(on_device(o));
    for (const cpu::Operand& o : args.out) va.out.push_back(on_device(o));
    va.scalars = args.scalars;
    va.precision = c.precision;
    va.device = device;
    std::vector<int32_t> words32(words.begin(), words.end());
    words32.push_back(0);
    vulkan::Buffer word_buffer = device->create_buffer(words32.size() * 4, vulkan::MemoryKind::per_call, "test words");
    std::memcpy(word_buffer.mapped(), words32.data(), words32.size() * 4);
    word_buffer.flush(0, words32.size() * 4);
    va.words = &word_buffer;
    vulkan::CommandList list(*device);
    list.begin();
    bool recorded = true;
    try {
      vulkan::find_kernel(c.op)(*op, va, list);
    } catch (const Error& e) {
      // A case the Vulkan kernel has no shader for yet: said, not failed (the kernels' coverage
      // grows case by case; what runs must match).
      if (std::string(e.what()).find("has no shader for") == std::string::npos) throw;
      std::fprintf(stderr, "[vulkan] not run: %s\n", e.what());
      recorded = false;
    }
    if (recorded) {
      list.host_barrier();
      list.end();
      list.submit();
      list.wait();
      for (size_t k = 0; k < c.out.size(); ++k) {
        HostBuffer& b = *out_buffers[k];
        const vulkan::Buffer* d = buffer_of(b.data());
        device->download(*d, 0, {reinterpret_cast<std::byte*>(b.data()), size_t(storage_bytes(b.dtype, b.elements))});
        result.vulkan.push_back(b.read());
      }
      compare(result.vulkan, "on Vulkan (" + device->info().name + ")");
    }
  }
#endif
  return result;
}

/// Checks `got` equals `want` within `tol` (absolute), element by element.
inline void expect_near(const std::vector<float>& got, const std::vector<double>& want,
                        double tol) {
  ASSERT_GE(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

}  // namespace iron::test
