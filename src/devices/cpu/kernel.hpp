// What an operator's CPU kernel is given: operands with every address resolved, and the indices
// of the per-call words it reads. A kernel does no allocation, lookup or shape arithmetic beyond
// reading its words.
#pragma once

#include <algorithm>
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
/// IRON_CPU=avx2 offers no AVX-512, IRON_CPU=avx512 no AMX (bf16 or int8).
struct Features {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512bf16 = false,
       avx512vnni = false;
  bool amx_bf16 = false;  // AMX tiles with bf16 dot products, and the OS lets this process use them
  bool amx_int8 = false;  // AMX tiles with int8 dot products (likewise), for the int8 path
  static const Features& host();
  /// The features above less what `level` ("portable", "avx2", "avx512" or anything else: all) leaves out.
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
