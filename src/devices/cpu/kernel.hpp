// What an operator's CPU kernel is given: operands with every address resolved, and the indices
// of the per-call words it reads. A kernel does no allocation, lookup or shape arithmetic beyond
// reading its words.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iron/dtype.hpp"
#include "iron/precision.hpp"
#include "iron/tensor.hpp"
#include "graph/plan.hpp"
#include "graph/prepared.hpp"

namespace iron::cpu {

/// A constant, or the index of a word written each call (the plan's).
using WordRef = detail::WordRef;

/// The part [begin, end) of n items that thread `t` of `threads` takes, in multiples of `align`.
inline std::pair<int64_t, int64_t> split(int64_t n, int t, int threads, int64_t align = 1) {
  int64_t units = (n + align - 1) / align;
  int64_t per = units / threads, extra = units % threads;
  int64_t begin = (t * per + std::min<int64_t>(t, extra)) * align;
  int64_t end = begin + (per + (t < extra ? 1 : 0)) * align;
  return {std::min(begin, n), std::min(end, n)};
}

/// Work of `units` items shared out among the threads of one call: each thread's part is what
/// split() gives it, cut into chunks of half what is left (the first half the part, the next a
/// quarter, ..., the last ones `fewest` units); a thread takes its own part's chunks from the
/// front, in order (so it reads what it would have read alone, one run of W's rows after the
/// other, in a few calls), then the chunks left of the other parts from their backs (the
/// smallest first). On a shared machine one vCPU can run at half the other's speed for seconds
/// (another guest on its core): under a fixed split the call then waits on the slow thread's
/// whole part, here on one of its last chunks. Cutting a part into equal eighths instead cost
/// more than it won: each call of a matmul's loop starts its reading again (a one-row decode
/// step's busy time rose by a fifth). What each item computes must not depend on which thread
/// takes it (true of every matmul: an output's sums are its own), so results stay the same
/// bits. One object serves one kernel, whose calls never overlap (each ends at a barrier or the
/// pool's join before the next): the last thread to leave a call resets it for the next.
class SharedRanges {
 public:
  static constexpr int kMaxThreads = 64;
  /// Calls body(begin, end) for runs of units that together cover [0, units) once, the parts
  /// split()'s; every one of `threads` threads calls run() with the same arguments but
  /// `thread` (fewest: the fewest units a chunk, at least 1).
  template <class Body>
  void run(int64_t units, int64_t fewest, int thread, int threads, Body&& body) {
    Starts starts(threads);
    for (int p = 0; p < threads; ++p) starts[p] = split(units, p, threads).first;
    starts[threads] = units;
    run_parts(starts.data(), fewest, thread, threads, body);
  }
  /// As run(), part p being [starts[p], starts[p + 1]). One thread, or more than kMaxThreads,
  /// take their own part whole.
  template <class Body>
  void run_parts(const int64_t* starts, int64_t fewest, int thread, int threads, Body&& body) {
    if (threads <= 1 || threads > kMaxThreads) {
      if (starts[thread] < starts[thread + 1]) body(starts[thread], starts[thread + 1]);
      return;
    }
    fewest = std::max<int64_t>(1, fewest);
    // The size of the chunk of `part` that begins at unit `at` (0 past its end).
    auto size_at = [&](int part, int64_t at) {
      const int64_t left = starts[part + 1] - at;
      return std::min(left, std::max(fewest, (left + 1) / 2));
    };
    auto chunks_in = [&](int part) {
      int64_t n = 0;
      for (int64_t at = starts[part]; at < starts[part + 1]; at += size_at(part, at)) ++n;
      return n;
    };
    auto take = [&](int part, int64_t index) {
      int64_t at = starts[part];
      for (int64_t i = 0; i < index; ++i) at += size_at(part, at);
      body(at, at + size_at(part, at));
    };
    // Its own part from the front: one fetch_add a chunk (low half: chunks taken from the front).
    for (const int64_t count = chunks_in(thread);;) {
      const uint64_t was = parts_[thread].taken.fetch_add(1, std::memory_order_relaxed);
      const int64_t front = int64_t(was & 0xffffffffu), back = int64_t(was >> 32);
      if (front + back >= count) break;
      take(thread, front);
    }
    // The others' from the back (high half: chunks taken from the back).
    for (int i = 1; i < threads; ++i) {
      const int part = (thread + i) % threads;
      const int64_t count = chunks_in(part);
      uint64_t was = parts_[part].taken.load(std::memory_order_relaxed);
      for (;;) {
        const int64_t front = int64_t(was & 0xffffffffu), back = int64_t(was >> 32);
        if (front + back >= count) break;
        if (!parts_[part].taken.compare_exchange_weak(was, was + (uint64_t(1) << 32), std::memory_order_relaxed)) continue;
        take(part, count - 1 - back);
        was = parts_[part].taken.load(std::memory_order_relaxed);
      }
    }
    if (left_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
      for (int p = 0; p < threads; ++p) parts_[p].taken.store(0, std::memory_order_relaxed);
      left_.store(0, std::memory_order_release);
    }
  }

 private:
  struct alignas(64) Part {
    std::atomic<uint64_t> taken{0};  // chunks taken from the front (low 32 bits) and the back (high)
  };
  Part parts_[kMaxThreads];
  alignas(64) std::atomic<int> left_{0};

 public:
  /// The threads + 1 part boundaries run_parts() reads: on the stack up to kMaxThreads.
  class Starts {
   public:
    explicit Starts(int threads) : heap_(threads > kMaxThreads ? size_t(threads) + 1 : 0) {}
    int64_t& operator[](int i) { return data()[i]; }
    int64_t* data() { return heap_.empty() ? local_ : heap_.data(); }

   private:
    int64_t local_[kMaxThreads + 1];
    std::vector<int64_t> heap_;
  };
};

/// A buffer view as a kernel reads or writes it: the plan's layout at an address.
struct Operand : detail::ViewLayout {
  char* base = nullptr;  // the buffer's first byte
  // Gathered rows (Copy from a gather view): per-call ids (ids outside the table read nothing).
  std::shared_ptr<Operand> ids;
  // A weight's rearranged forms (null for inputs, scratch and states): a kernel that wants the
  // weight in another layout makes it here once, at lowering, for every kernel reading it.
  std::shared_ptr<PreparedForms> prepared;

  int rank() const { return int(shape.size()); }
  int64_t extent(int axis, const int64_t* words) const { return valid[size_t(axis)].get(words); }
  /// The address of element `element` past the view's offset (block kinds: a block boundary).
  char* address(const int64_t* words, int64_t element = 0) const {
    const DTypeInfo& i = info(dtype);
    return base + (offset.get(words) + element) / i.block * i.bytes;
  }
  template <class T>
  T* data(const int64_t* words) const {
    return reinterpret_cast<T*>(address(words));
  }
  /// Elements of one row (the product of every axis but the first).
  int64_t row_elements() const {
    int64_t n = 1;
    for (size_t a = 1; a < shape.size(); ++a) n *= shape[a];
    return n;
  }
  /// Valid rows this call: the leading axis's bound.
  int64_t rows(const int64_t* words) const { return shape.empty() ? 1 : extent(0, words); }
};

/// A contiguous operand over memory of one's own at `base` (the kernel tests and benchmarks run
/// kernels on their buffers), its leading axis bounded by `rows` when given (else every row).
inline Operand dense_operand(DType t, const Shape& shape, char* base, std::optional<WordRef> rows = {}) {
  Operand o;
  o.base = base;
  o.dtype = t;
  o.shape = shape;
  o.strides = contiguous_strides(shape);
  o.offset = {-1, 0};
  for (int64_t d : shape) o.valid.push_back({-1, d});
  if (!shape.empty() && rows) o.valid[0] = *rows;
  return o;
}

/// What the processor offers, probed once. The environment variable IRON_CPU, read then, can
/// narrow it: IRON_CPU=portable offers nothing (every kernel takes its portable loops),
/// IRON_CPU=avx2 offers no AVX-512, IRON_CPU=avx512 no AMX (bf16 or int8); on ARM,
/// IRON_CPU=neon offers no SVE.
struct Features {
  bool avx2 = false, fma = false, f16c = false;
  bool avxvnni = false;  // AVX-VNNI: vpdpbusd on 256-bit registers, beside AVX2
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512bf16 = false,
       avx512vnni = false;
  // Whether AVX512_BF16's vdpbf16ps multiplies more pairs a cycle than f32 FMAs do, so that
  // Precision::medium gains by rounding a matmul's inputs to bf16: on AMD's cores (a Zen 4's
  // bf16 tiles ran past its f32 FMAs' peak, docs/benchmarks.md). Intel's AVX-512 cores issue
  // fewer: an Emerald Rapids core 43 G bf16 products a second against 87-88 G f32 FMA products
  // (bench/product_rates.cpp), and its bf16 tiles ran at about half the f32 tiles' rate.
  bool bf16_pairs_fast = false;
  bool amx_bf16 = false;  // AMX tiles with bf16 dot products, and the OS lets this process use them
  bool amx_int8 = false;  // AMX tiles with int8 dot products (likewise), for the int8 path
  // ARM: Advanced SIMD (NEON), and SVE's vector length in bits (0 without SVE). Never set on
  // x86, as the x86 features are never set on ARM.
  bool neon = false;
  bool dotprod = false;  // ARMv8.2's sdot (int8 dot products of four), beside NEON
  int sve_bits = 0;
  static const Features& host();
  /// The features above less what `level` ("portable", "avx2": AVX2 alone, "avxvnni": AVX2 with
  /// AVX-VNNI, "avx512", "neon": NEON alone, "dotprod": NEON with sdot, or anything else: all)
  /// leaves out.
  Features limited_to(std::string_view level) const;
  std::string str() const;
};

struct KernelArgs {
  std::vector<Operand> in;
  std::vector<Operand> out;
  std::vector<WordRef> scalars;
  Precision precision = Precision::highest;
  const Features* features = nullptr;
};

/// A kernel's per-thread scratch, carved from one buffer per pool thread that every kernel
/// shares: the commands of a program run one after another, so none needs memory of its own
/// (hundreds of kernels each holding tiles would cost tens of MiB). Sized when a kernel is made,
/// outside any run; fetch the pointer in run(), never keep it.
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t floats_per_thread);
  /// Thread `thread`'s scratch: 64-byte aligned, at least the floats asked for, contents undefined.
  float* get(int thread) const;
  size_t floats() const { return floats_; }

 private:
  size_t floats_ = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Runs thread `thread`'s share of the work; every thread of the pool calls it.
  virtual void run(const int64_t* words, int thread, int threads) const = 0;
  /// Whether splitting across threads can pay; a serial kernel runs on thread 0 alone.
  virtual bool parallel() const { return true; }
  /// Multiply-adds of its largest call, for kernels whose work is more than the bytes they
  /// touch (matmuls, attention): with those bytes, what decides whether splitting pays.
  virtual int64_t multiply_adds() const { return 0; }
};

}  // namespace iron::cpu
