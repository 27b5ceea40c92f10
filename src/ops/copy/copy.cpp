// Copy: any view to any view (strided or gathered source, strided destination, or a destination
// of rows picked by per-call ids: a scatter, as a batched decode writes each row's keys into its
// own cache slot), casting between dtypes. Gather (rows by ids) and Transpose are declared on
// their own for the catalog and profiles, and share this kernel. An id outside its table reads
// zeros (a gather) or writes nothing (a scatter).
#include "ops/copy/copy.hpp"

#include <cstring>
#include <vector>

#include "ops/copy/convert.hpp"
#include "ops/op.hpp"

namespace iron::ops {

namespace {

const Declaration kCopy{"Copy", nullptr, {{"elements", int64_t(0)}}, {}};
const Declaration kGather{"Gather", nullptr, {{"rows", int64_t(0)}, {"row_elements", int64_t(0)}}, {}};
const Declaration kTranspose{"Transpose", nullptr, {{"rows", int64_t(0)}, {"columns", int64_t(0)}}, {}};

// The extent a copy covers on each axis: what the source holds valid this call.
Shape copy_extent(const Shape& valid_src, const Shape& valid_dst) {
  Shape e(valid_src.size());
  for (size_t a = 0; a < e.size(); ++a) e[a] = std::min(valid_src[a], valid_dst[a]);
  return e;
}

// Rounds `n` values (whole blocks) as a quantised dtype stores them.
void round_blocks(DType dtype, float* x, int64_t n) {
  std::vector<char> stored(size_t(storage_bytes(dtype, n)));
  from_f32(dtype, x, stored.data(), n);
  to_f32(dtype, stored.data(), x, n);
}

class CopyOp : public Operator {
 public:
  CopyOp(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {}

  void reference(const RefCall& call) const override {
    const RefOperand& src = call.in[0];
    const RefOperand& dst = call.out[0];
    Shape extent = copy_extent(src.valid, dst.valid);
    int rank = int(extent.size());
    if (element_count(extent) == 0) return;
    std::vector<int64_t> index(size_t(rank), 0);
    for (;;) {
      int64_t s = 0, d = 0;
      bool zero = false, nowhere = false;  // a gathered row outside its table, a scattered one
      for (int a = 0; a < rank; ++a) {
        int64_t i = index[size_t(a)], o = i;
        if (a == 0 && src.rows) i = (*src.rows)[size_t(i)];
        if (a == 0 && dst.rows) o = (*dst.rows)[size_t(o)];
        if (a == 0) {
          zero = src.rows && src.table_rows > 0 && (i < 0 || i >= src.table_rows);
          nowhere = dst.rows && dst.table_rows > 0 && (o < 0 || o >= dst.table_rows);
        }
        s += i * src.strides[size_t(a)];
        d += o * dst.strides[size_t(a)];
      }
      if (!nowhere) dst.data[d] = round_to(dst.dtype, zero ? 0.0f : src.data[s]);
      // A quantised destination (a q8_0 KV cache) rounds each whole run of the last axis by
      // blocks, once the run is written: the kernel checked that runs are whole aligned blocks.
      if (!nowhere && info(dst.dtype).quantised && index[size_t(rank - 1)] == extent[size_t(rank - 1)] - 1)
        round_blocks(dst.dtype, dst.data + d + 1 - extent[size_t(rank - 1)], extent[size_t(rank - 1)]);
      int a = rank - 1;
      while (a >= 0 && ++index[size_t(a)] == extent[size_t(a)]) index[size_t(a--)] = 0;
      if (a < 0) break;
    }
  }

  Tolerance tolerance(Precision) const override { return {0, 0}; }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& args) const;
};

class CopyKernel final : public cpu::Kernel {
 public:
  explicit CopyKernel(const cpu::KernelArgs& a) : src_(a.in.at(0)), dst_(a.out.at(0)) {
    if (src_.rank() != dst_.rank()) value_error("Copy between views of different rank");
    if (info(src_.dtype).quantised && src_.strides.back() != 1)
      value_error("Copy of a quantised view needs its last axis contiguous");
    const DTypeInfo& di = info(dst_.dtype);
    if (di.quantised) {
      // Only whole blocks can be written (a KV cache's rows of head_dim values): the last axis
      // contiguous, and every run of it starting and ending on a block boundary.
      // A per-call offset is a window's start times the first axis's stride (a multiple of a
      // block when that stride is); the kernel cannot see the expression, and a misaligned one
      // would still write inside the buffer (copy_run rounds addresses down to a block).
      bool whole = dst_.rank() > 0 && dst_.strides.back() == 1 && src_.strides.back() == 1 && dst_.shape.back() % di.block == 0 &&
                   (dst_.offset.per_call() || dst_.offset.constant % di.block == 0) && !gathered();
      for (int axis = 0; axis + 1 < dst_.rank(); ++axis) whole = whole && dst_.strides[size_t(axis)] % di.block == 0;
      if (!whole)
        value_error("Copy writes a quantised view (" + std::string(di.name) +
                    ") only in whole blocks: its last axis contiguous and a multiple of " +
                    std::to_string(di.block) + " long, its rows starting on block boundaries; got " +
                    to_string(dst_.shape) + " with strides " + to_string(dst_.strides));
    }
    if (src_.rank() > 8) value_error("Copy of a view of rank above 8");
    if (src_.dtype == f32) convert_ = copy::f32_convert_vector(dst_.dtype, a.features ? *a.features : cpu::Features::host());
  }

  void run(const int64_t* w, int thread, int threads) const override {
    const int rank = src_.rank();
    if (rank == 0) {
      if (thread == 0) copy_run(src_.offset.get(w), dst_.offset.get(w), 1);
      return;
    }
    int64_t extent[8];
    for (int a = 0; a < rank; ++a) extent[a] = std::min(src_.extent(a, w), dst_.extent(a, w));
    for (int a = 0; a < rank; ++a)
      if (extent[a] == 0) return;
    auto [begin, end] = cpu::split(extent[0], thread, threads);
    const int64_t src_base = src_.offset.get(w), dst_base = dst_.offset.get(w);
    const int last = rank - 1;
    if (rank == 1) {
      if (!gathered() && !dst_.ids && src_.strides[0] == 1 && dst_.strides[0] == 1) {
        copy_run(src_base + begin, dst_base + begin, end - begin);
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        const int64_t row = dst_row(w, i);
        if (row >= 0) copy_row(w, i, src_base, dst_base + row * dst_.strides[0], 1, 1);
      }
      return;
    }
    if (dst_.ids) prefetch_scattered_rows(w, begin, end, extent);
    int64_t index[8] = {0};
    for (int64_t i0 = begin; i0 < end; ++i0) {
      const int64_t row = dst_row(w, i0);
      if (row < 0) continue;
      for (int a = 1; a < rank; ++a) index[a] = 0;
      for (;;) {
        int64_t s = src_base, d = dst_base + row * dst_.strides[0];
        for (int a = 1; a < last; ++a) {
          s += index[a] * src_.strides[size_t(a)];
          d += index[a] * dst_.strides[size_t(a)];
        }
        copy_row(w, i0, s, d, extent[last], dst_.strides[size_t(last)]);
        int a = last - 1;
        while (a >= 1 && ++index[a] == extent[a]) index[a--] = 0;
        if (a < 1) break;
      }
    }
  }

 private:
  bool gathered() const { return src_.ids || !src_.fixed_rows.empty(); }

  // A scatter's rows (a batched decode step's keys, each into its own cache slot) land far
  // apart, in lines no cache holds: each row's stores waited on their own misses, one row after
  // another (8 rows of SmolLM2's keys, f16: 6-8 us a copy on one thread). Asking for every
  // destination line first lets the misses overlap.
  void prefetch_scattered_rows(const int64_t* w, int64_t begin, int64_t end, const int64_t* extent) const {
    const int rank = src_.rank();
    int64_t span = 1;  // elements from a row's first destination element to past its last
    for (int a = 1; a < rank; ++a) span += (extent[a] - 1) * dst_.strides[size_t(a)];
    const DTypeInfo& di = info(dst_.dtype);
    const int64_t bytes = (span + di.block - 1) / di.block * di.bytes;
    if (span <= 0 || bytes > kPrefetchRowBytes) return;  // (a prefetch never faults: this only bounds the work)
    const int64_t dst_base = dst_.offset.get(w);
    for (int64_t i0 = begin; i0 < end; ++i0) {
      const int64_t row = dst_row(w, i0);
      if (row < 0) continue;
      const int64_t d = dst_base + row * dst_.strides[0];
      const char* at = dst_.base + d / di.block * di.bytes;
      for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(at + b, 1);
    }
  }
  static constexpr int64_t kPrefetchRowBytes = 16 << 10;

  // The destination row of source row i0: i0, or its id when the destination is scattered
  // (-1 for an id outside the table: nothing is written there).
  int64_t dst_row(const int64_t* w, int64_t i0) const {
    if (!dst_.ids) return i0;
    const int64_t row = dst_.ids->data<int32_t>(w)[i0];
    return row >= 0 && row < dst_.table_rows ? row : -1;
  }

  // Copies `n` elements of source row i0 (through the gather, if any) from `s` to `d`. An id
  // outside the table writes zeros rather than read outside it.
  void copy_row(const int64_t* w, int64_t i0, int64_t s, int64_t d, int64_t n, int64_t dst_stride) const {
    int64_t row = i0;
    if (src_.ids) {
      row = src_.ids->data<int32_t>(w)[i0];
      if (row < 0 || row >= src_.table_rows) {
        float zero = 0;
        for (int64_t k = 0; k < n; ++k) from_f32(dst_.dtype, &zero, dst_.base + storage_bytes(dst_.dtype, d + k * dst_stride), 1);
        return;
      }
    } else if (!src_.fixed_rows.empty()) {
      row = src_.fixed_rows[size_t(i0)];
    }
    s += row * src_.strides[0];
    int64_t ss = src_.strides.back();
    if (ss == 1 && dst_stride == 1) {
      copy_run(s, d, n);
      return;
    }
    for (int64_t k = 0; k < n; ++k) copy_run(s + k * ss, d + k * dst_stride, 1);
  }

  void copy_run(int64_t s, int64_t d, int64_t n) const {
    const DTypeInfo& si = info(src_.dtype);
    const DTypeInfo& di = info(dst_.dtype);
    const char* sp = src_.base + s / si.block * si.bytes;
    char* dp = dst_.base + d / di.block * di.bytes;
    if (src_.dtype == dst_.dtype) {
      std::memmove(dp, sp, size_t(storage_bytes(src_.dtype, n)));
      return;
    }
    if (convert_ && n % di.block == 0) {  // (a q8_0 destination: whole blocks)
      convert_(reinterpret_cast<const float*>(sp), dp, n);
      return;
    }
    float buffer[256];
    for (int64_t k = 0; k < n; k += 256) {
      int64_t m = std::min<int64_t>(256, n - k);
      to_f32(src_.dtype, sp + storage_bytes(src_.dtype, k), buffer, m);
      from_f32(dst_.dtype, buffer, dp + storage_bytes(dst_.dtype, k), m);
    }
  }

  cpu::Operand src_, dst_;
  copy::ConvertFn convert_ = nullptr;  // f32 into f16, bf16 or q8_0 in vector lanes, where the CPU has them
};

std::unique_ptr<cpu::Kernel> CopyOp::cpu_kernel(const cpu::KernelArgs& args) const {
  return std::make_unique<CopyKernel>(args);
}

class Copy : public CopyOp {
 public:
  Copy(Fields p, Fields t) : CopyOp(kCopy, std::move(p), std::move(t)) {}
};
class Gather : public CopyOp {
 public:
  Gather(Fields p, Fields t) : CopyOp(kGather, std::move(p), std::move(t)) {}
};
class Transpose : public CopyOp {
 public:
  Transpose(Fields p, Fields t) : CopyOp(kTranspose, std::move(p), std::move(t)) {}
};

}  // namespace

// Records its dispatches on Vulkan (copy_vulkan.cpp).
void record_copy(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

namespace {
// Only the conversions f32_convert_vector has (f32 into f16, bf16 or q8_0) run in vector lanes
// (CopyKernel's convert_): what the kernel would take decides the refusal.
std::vector<CpuTarget> copy_targets() {
  auto refuses = [](const Operator&, const cpu::KernelArgs& a) -> std::string {
    const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
    if (a.in.at(0).dtype == f32 && copy::f32_convert_vector(a.out.at(0).dtype, f)) return "";
    return "only f32 into f16, bf16 or q8_0 has a vector loop";
  };
  std::vector<CpuTarget> targets = highway_targets();
  for (CpuTarget& t : targets)
    if (t.target != cpu::Target::portable) t.refuses = refuses;
  return targets;
}
}  // namespace

OpEntry copy_entry() { return entry<Copy>(kCopy, copy_targets(), IRON_VULKAN_RECORDER(record_copy)); }
OpEntry gather_entry() { return entry<Gather>(kGather, copy_targets(), IRON_VULKAN_RECORDER(record_copy)); }
OpEntry transpose_entry() { return entry<Transpose>(kTranspose, copy_targets(), IRON_VULKAN_RECORDER(record_copy)); }

}  // namespace iron::ops
