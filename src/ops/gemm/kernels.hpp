// The GEMM family's CPU kernels, shared by gemm.cpp (the ops and the dispatch), gemm_portable.cpp
// (plain loops for every layout and dtype), gemm_fast.cpp (threading, activation conversion,
// epilogues), gemm_hwy.cpp (the vector loops every width shares, written once with Highway) and
// the instruction-set files gemm_avx512.cpp / gemm_avx2.cpp / int8_avx2.cpp / gemm_amx.cpp,
// which export only plain functions (no inline library code, so nothing built for a wider
// instruction set can be linked into a baseline caller).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "ops/elementwise/elementwise.hpp"
#include "devices/cpu/kernel.hpp"

namespace iron::ops::gemm {

enum class Epilogue { none, relu, silu, gelu, gelu_tanh };

/// The epilogue in double (the reference and the portable kernel).
inline double finish(Epilogue e, double v) {
  switch (e) {
    case Epilogue::none:
      return v;
    case Epilogue::relu:
      return v > 0 ? v : 0;
    case Epilogue::silu:
      return v / (1.0 + std::exp(-v));
    case Epilogue::gelu:
      return 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
    case Epilogue::gelu_tanh:
      return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  return v;
}

/// The epilogue over f32 values in place, as a processor with `f` computes it: GELU's two forms
/// through the GELU operator's row function (ops/gelu/gelu.hpp), so that a GELU the planner
/// folds into a matmul gives the bits the GELU step gave; the others in f32 (the fast kernels)
/// or, `exact`, through finish() in double (the portable kernel).
void finish_all(Epilogue e, float* v, int64_t n, const cpu::Features& f, bool exact = false);

/// What the op fixes for its kernel.
struct MatmulConfig {
  int64_t k = 0, n = 0;
  bool col_maj = true;
  Epilogue epilogue = Epilogue::none;
  int64_t tile_n = 16;
  bool gemv = false;      // the GEMV op: one row
  bool residual = false;  // add the third input (y's shape) after the epilogue
  bool bias = false;      // add a row of N (the input after the residual) before the epilogue
  // An RMSNorm folded in by the planner (graph/fold.cpp): each row of `a` is normalised (times
  // the last input, when weighted) before it is multiplied.
  bool norm = false;
  bool norm_weighted = false;
  double norm_epsilon = 0;
};

/// The rows of a matmul's `a` as f32, each normalised first when an RMSNorm is folded in: what
/// every matmul kernel reads.
class RowsOfA {
 public:
  RowsOfA(const cpu::KernelArgs& a, const MatmulConfig& c);
  /// Whether rows are read in place (f32 and no norm): row() then never writes `buffer`.
  bool in_place() const { return in_place_; }
  /// Row m of `a` (k floats): in place, or made in `buffer`.
  const float* row(const int64_t* w, int64_t m, float* buffer) const;

 private:
  cpu::Operand a_;
  int64_t k_;
  bool norm_;
  double epsilon_;
  std::vector<float> weight_;  // the norm's weight as f32 (empty: none)
  bool in_place_;
  cpu::Features features_;  // what the folded norm's row may use, as the RMSNorm kernel's
};

/// A matmul kernel over one weight whose threads each take ranges of W's rows (y's columns).
/// A call first prepares what every range reads (a's rows normalised, converted or quantised,
/// in the thread's scratch), then runs ranges. run() splits the rows evenly; a step of several
/// weights (gemm_parts.cpp) drives its weights' kernels itself. (Sharing ranges dynamically,
/// so that threads end a phase together, was tried twice: with a shared counter, and with
/// per-thread ranges and stealing. Both ended the threads within a microsecond where they had
/// ended 5-10 us apart, and neither made a decode step faster: the projections are bound by the
/// machine's memory bandwidth, which a thread finishing alone gets all of.)
class RowRangeKernel : public cpu::Kernel {
 public:
  void run(const int64_t* w, int thread, int threads) const final {
    prepare(w, thread);
    const int64_t unit = this->unit(w), n = rows_of_w(), units = (n + unit - 1) / unit;
    shared_.run(units, fewest_chunk_units(w), thread, threads,
                [&](int64_t begin, int64_t end) { run_rows(w, thread, begin * unit, std::min(end * unit, n)); });
  }
  /// The fewest units a run_rows() call should take (a loop that pays a cost per call), when
  /// the threads share out a call's units (cpu::SharedRanges).
  virtual int64_t fewest_chunk_units(const int64_t*) const { return 1; }
  /// W's rows.
  virtual int64_t rows_of_w() const = 0;
  /// What a thread's range should be a multiple of this call (the loop's rows at a time; a
  /// power of two).
  virtual int64_t unit(const int64_t* w) const = 0;
  /// What every range of this call reads, made in thread `thread`'s scratch.
  virtual void prepare(const int64_t*, int) const {}
  /// y's columns [begin, end) for every valid row of a, after prepare() on this thread.
  virtual void run_rows(const int64_t* w, int thread, int64_t begin, int64_t end) const = 0;
  /// What prepare() leaves: kernels of one step over the same `a` with the same nonzero value
  /// leave the same bytes in the same place of the scratch, so one prepare() serves them all.
  virtual int preparation() const { return 0; }

 private:
  mutable cpu::SharedRanges shared_;  // each call's units, shared out among its threads
};

/// v[i] += r[at + i] for n entries of a dense operand (a bias or the residual, before the one
/// rounding; in f32, as the Add step the planner folded in).
inline void add_residual(const cpu::Operand& r, const int64_t* w, int64_t at, float* v, int64_t n) {
  if (r.dtype == f32) {
    const float* x = r.data<float>(w) + at;
    for (int64_t i = 0; i < n; ++i) v[i] += x[i];
    return;
  }
  float chunk[256];
  for (int64_t i = 0; i < n; i += 256) {
    int64_t m = std::min<int64_t>(256, n - i);
    to_f32(r.dtype, r.address(w, at + i), chunk, m);
    for (int64_t j = 0; j < m; ++j) v[i + j] += chunk[j];
  }
}

// ---- an instruction set's loops ---------------------------------------------------------

/// y[r] = sum_k x[k] * W[r, k] for `rows` rows of W from `w` (f32 sums, no epilogue).
struct GemvArgs {
  DType dtype;
  const float* x;     // k values
  float* xsum;        // k / 32 floats of scratch (kinds with offsets: the sum of each 32 values of x)
  const char* w;      // the first row
  int64_t row_bytes;  // bytes from one row of W to the next
  int64_t k;
  int64_t rows;
  float* y;
};

/// GEMV of m (<= kGemvManyRows) rows of x at once, for a batched decode step at
/// Precision::highest: y[i * ldy + r] = sum_k W[r, k] x[i * ldx + k]. Each row's sums are exactly
/// those gemv() gives that row alone (the same operations in the same order); what the rows
/// share is each block of W, read and converted once for all of them.
struct GemvManyArgs {
  DType dtype;
  const float* x;  // m rows of k values, ldx apart
  int64_t ldx, m;
  float* xsum;  // m * (k / 32) floats of scratch
  const char* w;
  int64_t row_bytes, k, rows;
  float* y;  // m rows of `rows` outputs, ldy apart
  int64_t ldy;
};
constexpr int64_t kGemvManyRows = 8;

/// Dequantises `rows` (<= nr) rows of W and stores them transposed: packed[k * nr + j] = W[j, k],
/// columns past `rows` zero.
struct PackArgs {
  DType dtype;
  const char* w;
  int64_t row_bytes;
  int64_t k;
  int64_t rows;
  float* rowbuf;       // nr * k floats of scratch
  const float* zeros;  // k zero floats
  float* packed;       // k * nr floats
};

/// c[i, j] = sum_k a[i, k] * packed[k * nr + j] for i < m, j < nr.
struct TileArgs {
  const float* a;
  int64_t lda;
  int64_t m;
  const float* packed;
  int64_t k;
  float* c;
  int64_t ldc;
};

/// Precision::medium with AVX512_BF16: the f32 tile `packed` (k * nr) becomes bf16 pairs in
/// `out`: pair p holds rows 2p and 2p + 1 (zero past k) of each column, nr * (k + 1) bf16 values.
struct PackBf16Args {
  const float* packed;
  int64_t k;
  uint16_t* out;
};

/// `m` rows of `a` (f32, lda) to bf16 rows of `k + 1` (rounded up to even, zero padded) values.
struct RowsBf16Args {
  const float* a;
  int64_t lda;
  int64_t m;
  int64_t k;
  uint16_t* out;
};

/// c[i, j] = sum_k a[i, k] * packed[k, j] for i < m, j < nr, with a and packed in bf16 pairs.
struct TileBf16Args {
  const uint16_t* a;
  int64_t lda;  // bf16 values from one row of a to the next
  int64_t m;
  const uint16_t* packed;
  int64_t pairs;
  float* c;
  int64_t ldc;
};

/// c[i, j] = sum_k a[i, k] * packed[k, j] for i < m, j < nr, with a in f32 (k = 2 pairs, even)
/// and packed in bf16 pairs (PackBf16Args' layout): Precision::medium where bf16 products do not
/// outrun f32 ones, so W alone is rounded, read in half the f32 tiles' bytes and widened in
/// registers.
struct TileW16Args {
  const float* a;
  int64_t lda;
  int64_t m;
  const uint16_t* packed;
  int64_t pairs;
  float* c;
  int64_t ldc;
};

/// A tile of bf16 pairs (PackBf16Args' layout, k even) widened into the f32 tile layout (k * nr
/// floats at `out`), for the f32 tile loop over many rows: the same products and sums as
/// tile_w16's, so either gives a row the same bits.
struct WidenArgs {
  const uint16_t* pairs;
  int64_t k;
  float* out;
};

/// Precision::medium with AMX: c (m x 32 * tiles, ldc floats a row) = a @ `tiles` packed tiles
/// of 32 columns, each as pack_bf16 lays it out (pairs * 64 values, one after the other), with a
/// in bf16 rows of lda values. m is a multiple of 16 and pairs of 16 (k of 32): the caller pads
/// a's rows with zeros and takes this path only for such k. Tiles of 16 x 16 f32 sums over bf16
/// pairs, the products exact and summed in f32 as vdpbf16ps sums them.
struct TileAmxArgs {
  const uint16_t* a;
  int64_t lda;
  int64_t m;
  const uint16_t* packed;
  int64_t pairs;
  int64_t tiles;
  float* c;
  int64_t ldc;
};
/// Rows of a that an AMX tile takes (a's rows are padded to a multiple of it).
constexpr int64_t kAmxRows = 16;
void tile_bf16_amx(const TileAmxArgs&);  // gemm_amx.cpp, for the AVX-512 loops' tiles (nr 32)

/// Precision::medium with AVX512_VNNI: a row x of k f32 values (k a multiple of 32) as blocks of
/// 32 int8 q with one f32 scale each (scale = max|x| / 127, q = round(x / scale)), plus each
/// block's sum of x as rounded (scale * sum q: what meets q4_1's m and q4_0's -8), and 32 times
/// the same of each 16 (what meets q6_k's -32, whose scales cover 16 columns: stored with the
/// factor, so the loops' finish reads the term as it is rather than multiplying and
/// broadcasting it for every row of x and every group of W; times 32 is exact in f32).
struct QuantiseX8Args {
  const float* x;
  int64_t k;
  int8_t* q;      // k values
  float* scale;   // k / 32 values
  float* xsum;    // k / 32 values
  float* xsum16;  // k / 16 values: 32 scale * sum q of each 16
};

// ---- W rearranged for int8 dot products (Precision::medium: vpdpbusd, vpmaddubsw, sdot, AMX) ---
//
// A q4_0 / q4_1 / q5_0 / q5_1 / q8_0 / q4_k / q5_k / q6_k W (N, K) as groups of 16 rows. In a group, each block (32 columns) has
// its quants laid out so that one 64-byte load holds 4 consecutive columns of each of the 16
// rows in row order: the operand of one vpdpbusd whose 16 int32 lanes are the 16 rows, against
// 4 values of x broadcast;
//   q8_0: 8 loads a block; byte 4j + i of load c is row j's quant at column 4c + i, plus 128
//         (unsigned, as vpdpbusd wants: w = d (u - 128), the -128 meeting x's block sum);
//   q4_0, q4_1: 4 loads; byte 4j + i of load c holds row j's column 8c + i in its low nibble
//         and column 8c + 4 + i in its high nibble;
//   q5_0, q5_1: q4_0's 4 loads of nibbles, then one of fifth bits: bit 2c + h of its byte
//         4j + i is the fifth bit of the column that nibble h (0 low, 1 high) of byte 4j + i of
//         load c holds.
//   q4_k, q5_k: each sub-block of 32 as q4_0's (q5_0's) loads;
//   q6_k: each sub-block of 32 as q4_0's loads of the low 4 bits (unsigned: w = d s (q - 32),
//         the -32 meeting x's sums of 16), then two loads of the top 2 bits: bits 4 (c % 2) + 2h
//         and up of byte 4j + i of load c / 2 those of the column nibble h of byte 4j + i of
//         load c holds.
// Blocks go in pairs: the two blocks' quants, then their 16 scales d each (f16), then (q4_1,
// q5_1) their 16 minimums m each, so a pair is a whole number of 64-byte lines and a group is read as
// one unbroken stream (a separate run of scales after the quants made two streams, and a plain
// read of that layout streamed at 13 GB/s on one core where one stream reaches 33). A group
// takes as many bytes as its 16 rows did (one block more when K / 32 is odd); rows past N are
// zero. A K-quant group is super-blocks (no pairs: q4_k's and q5_k's are 36 and 44 whole lines):
// the 8 sub-blocks' quants, then the 16 rows' d (f16), then
//   q4_k, q5_k: their dmin (f16), then their 6-bit scales and minimums in 192 bytes: byte
//         16s + j holds row j's scale of sub-block s under the low 2 bits of its minimum, and
//         nibble s % 2 of byte 128 + 16 (s / 2) + j the minimum's top 4 bits;
//   q6_k: their 16 int8 scales, byte 16t + j row j's scale t (of columns 16t .. 16t + 15).
// Made once per weight at lowering (packed_int8.cpp) and shared by every kernel reading it.
constexpr int64_t kInt8Rows = 16;
constexpr bool int8_fifth(DType t) { return t == DType::q5_0 || t == DType::q5_1 || t == DType::q5_k; }
constexpr bool int8_k(DType t) { return t == DType::q4_k || t == DType::q5_k || t == DType::q6_k; }
constexpr bool int8_minimum(DType t) { return t == DType::q4_1 || t == DType::q5_1; }
constexpr int64_t int8_quant_bytes(DType t) {
  return t == DType::q8_0 ? 512 : t == DType::q6_k ? 384 : int8_fifth(t) ? 320 : 256;
}
/// Bytes of a pair of blocks of a group: quants, d and (q4_1, q5_1) m.
constexpr int64_t int8_pair_bytes(DType t) { return 2 * int8_quant_bytes(t) + (int8_minimum(t) ? 128 : 64); }
/// Bytes of a K-quant super-block of a group: 8 sub-blocks' quants, d, and dmin, scales and
/// minimums (q6_k: scales).
constexpr int64_t int8_super_bytes(DType t) { return 8 * int8_quant_bytes(t) + 32 + (t == DType::q6_k ? 256 : 224); }
/// Bytes of a group of 16 rows of k columns.
constexpr int64_t int8_group_bytes(int64_t k, DType t) {
  return int8_k(t) ? k / 256 * int8_super_bytes(t) : (k / 32 + 1) / 2 * int8_pair_bytes(t);
}
/// Where block b's quants, its 16 d and its 16 m start in a group; where super-block s's d,
/// dmin, scales and minimums do (K-quants).
constexpr int64_t int8_quants_at(DType t, int64_t b) {
  if (int8_k(t)) return b / 8 * int8_super_bytes(t) + b % 8 * int8_quant_bytes(t);
  return b / 2 * int8_pair_bytes(t) + b % 2 * int8_quant_bytes(t);
}
constexpr int64_t int8_k_header_at(DType t, int64_t s) { return s * int8_super_bytes(t) + 8 * int8_quant_bytes(t); }
constexpr int64_t int8_d_at(DType t, int64_t b) {
  return b / 2 * int8_pair_bytes(t) + 2 * int8_quant_bytes(t) + 32 * (b % 2);
}
constexpr int64_t int8_m_at(DType t, int64_t b) { return int8_d_at(t, b) + 64; }
/// Cache lines of a block the int8 loops prefetch: as many as a block takes on average with its
/// scales in the layout (q4_0, q4_1 and q4_k 5, the 5-bit kinds 6, q6_k 7, q8_0 9). Counted by
/// hand until 2026-12-07, when q8_0's five left 3.5 lines of its 544 bytes to demand misses:
/// nine took its cold one-row GEMVs on a Zen 3 from 10.6-12.4 to 13.4-16.3 GB/s on one thread
/// and 20.2-22.8 to 23.2-28.8 on two (bench_gemv BM_GEMVInt8/shape:(4|12)/cold:1, 6 alternating
/// pairs each, each faster), and Gemma 3's q8_0 classifier (170 MiB a token) from 7.5-8.2 to
/// 6.6-6.9 ms a decode step.
constexpr int int8_prefetch_lines(DType t) {
  const int64_t block_bytes = int8_k(t) ? int8_super_bytes(t) / 8 : int8_pair_bytes(t) / 2;
  return int((block_bytes + 63) / 64);
}
/// What x's int8 quantisers multiply a block by: 127 over its largest |x|, or 0 for a block of
/// zeros or of values so small (largest |x| below 127 / FLT_MAX) that the reciprocal would
/// overflow, which rounds them to zeros (an infinite one saturated every quant). The AVX-512
/// quantiser computes the same in its lanes.
inline float int8_reciprocal(float largest) {
  const float r = largest > 0 ? 127.0f / largest : 0.0f;
  return r < std::numeric_limits<float>::infinity() ? r : 0.0f;
}

/// y[i, j] = sum over blocks of d_w(j) * scale_i * (int32 dot of W's quants with row i of q)
/// (+ the block's offset times xsum) for `m` rows of quantised x and `groups` groups of 16 rows
/// of a rearranged W from `w`; f32 sums, no epilogue, y rows `ldy` floats apart.
struct GemmInt8Args {
  DType dtype;
  const int8_t* q;     // m rows of k values
  const float* scale;  // m rows of k / 32
  const float* xsum;   // m rows of k / 32
  const float* xsum16;  // m rows of k / 16 (32 times the sums of 16: QuantiseX8Args)
  int64_t m;
  int64_t k;
  const char* w;  // the first group
  int64_t groups;
  float* y;  // groups * 16 columns of each of the m rows
  int64_t ldy;
};

/// The int8 path on AMX-INT8 (gemm_amx.cpp): as an Isa's gemm_int8, for m a multiple of 16
/// (kAmxRows) or below 16 (tiles of m rows), each row's outputs the bits the AVX-512 VNNI loop
/// gives it.
void gemm_int8_amx(const GemmInt8Args&);

struct Isa {
  const char* name;
  int nr;  // columns of a packed tile
  void (*gemv)(const GemvArgs&);
  void (*pack)(const PackArgs&);
  void (*tile)(const TileArgs&);
  // Optional (null where the instruction set has none): bf16 dot products for Precision::medium.
  void (*pack_bf16)(const PackBf16Args&) = nullptr;
  void (*rows_bf16)(const RowsBf16Args&) = nullptr;
  void (*tile_bf16)(const TileBf16Args&) = nullptr;
  // f32 rows of a against W's bf16 pairs, f32 products (every Highway target has it).
  void (*tile_w16)(const TileW16Args&) = nullptr;
  void (*widen)(const WidenArgs&) = nullptr;
  // Optional: int8 activations and int32 dot products (Precision::medium; the AVX-512 loops
  // with AVX512_VNNI, the AVX2 ones with vpmaddubsw or AVX-VNNI, NEON's with sdot).
  void (*quantise_x8)(const QuantiseX8Args&) = nullptr;
  void (*gemm_int8)(const GemmInt8Args&) = nullptr;
  // Optional: GEMV over 2 to kGemvManyRows rows of x (GemvManyArgs); false for a weight kind or
  // a count it does not take (the caller then runs gemv() per row, which gives the same sums).
  bool (*gemv_many)(const GemvManyArgs&) = nullptr;
  // Optional: AMX tiles beside the AVX-512 loops (gemm_amx.cpp): medium's bf16 tiles, and the
  // int8 path's whole tiles of 16 rows.
  void (*tile_bf16_amx)(const TileAmxArgs&) = nullptr;
  void (*gemm_int8_amx)(const GemmInt8Args&) = nullptr;
  // The instructions gemm_int8's dot products take (`iron info --kernels` says them).
  const char* int8_instructions = "";
};

/// f(std::integral_constant<DType, t>{}) for a kind the int8 path takes (nothing for another):
/// how each int8 loop turns the weight's kind into its template argument.
template <class F>
void with_int8_kind(DType t, F&& f) {
  switch (t) {
    case DType::q8_0:
      return f(std::integral_constant<DType, DType::q8_0>{});
    case DType::q4_0:
      return f(std::integral_constant<DType, DType::q4_0>{});
    case DType::q4_1:
      return f(std::integral_constant<DType, DType::q4_1>{});
    case DType::q5_0:
      return f(std::integral_constant<DType, DType::q5_0>{});
    case DType::q5_1:
      return f(std::integral_constant<DType, DType::q5_1>{});
    case DType::q4_k:
      return f(std::integral_constant<DType, DType::q4_k>{});
    case DType::q5_k:
      return f(std::integral_constant<DType, DType::q5_k>{});
    case DType::q6_k:
      return f(std::integral_constant<DType, DType::q6_k>{});
    default:
      return;
  }
}

/// fn(q1, fifth) with std::bool_constant's for the blocks of 32 with 4 or 5 bits: q4_0 (false,
/// false), q4_1 (true, false), q5_0 (false, true) and q5_1 (true, true); false for any other
/// kind (the vector loops' template arguments, gemm_hwy.cpp).
template <class Fn>
bool with_blocks32(DType t, Fn&& fn) {
  using F = std::false_type;
  using T = std::true_type;
  switch (t) {
    case DType::q4_0:
      return fn(F{}, F{}), true;
    case DType::q4_1:
      return fn(T{}, F{}), true;
    case DType::q5_0:
      return fn(F{}, T{}), true;
    case DType::q5_1:
      return fn(T{}, T{}), true;
    default:
      return false;
  }
}

/// Whether the int8 path takes a weight of this dtype rearranged (packed_int8).
inline bool int8_weight(DType t) {
  return t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1 || t == DType::q5_0 || t == DType::q5_1 ||
         int8_k(t);
}

/// The two x86 instruction sets (gemm_hwy.cpp): Highway's copies of the shared loops for their
/// width, beside their own files' loops; and ARM's, Highway's NEON copy alone (on SVE
/// processors too: the loops keep arrays of vectors, which SVE's sizeless vectors cannot be).
const Isa& avx512_isa();
const Isa& avx2_isa();
const Isa& avx2_vnni_isa();  // AVX2's, its int8 loops on AVX-VNNI
const Isa& neon_isa();
const Isa& neon_dotprod_isa();  // NEON's, with the int8 path on sdot
/// What gemm_avx512.cpp gives the AVX-512 Isa: its bf16 and int8 loops.
namespace avx512 {
void pack_bf16(const PackBf16Args&);
void rows_bf16(const RowsBf16Args&);
void tile_bf16(const TileBf16Args&);
void quantise_x8(const QuantiseX8Args&);
void gemm_int8(const GemmInt8Args&);
}  // namespace avx512
/// The int8 path on AVX2 (int8_avx2.cpp: vpmaddubsw and vpmaddwd where VNNI has vpdpbusd): the
/// AVX2 Isa's quantise_x8 and gemm_int8.
void quantise_x8_avx2(const QuantiseX8Args&);
void gemm_int8_avx2(const GemmInt8Args&);
/// The same loops with AVX-VNNI's 256-bit vpdpbusd (int8_avxvnni.cpp): the AVX2 loops' bits.
void gemm_int8_avxvnni(const GemmInt8Args&);
/// The int8 path on ARM64 with sdot (int8_dotprod.cpp).
void quantise_x8_dotprod(const QuantiseX8Args&);
void gemm_int8_dotprod(const GemmInt8Args&);

/// W (n rows of row_bytes, k columns) rearranged as above into `out` (groups * 16 rows' bytes).
void pack_int8(DType t, const char* w, int64_t row_bytes, int64_t n, int64_t k, char* out);

/// A weight operand's rearranged form, made on first request and shared through its prepared
/// forms; null when the operand cannot have one (not a weight, or read at a per-call offset).
struct PackedInt8 {
  std::shared_ptr<char> bytes;  // 64-byte aligned
  int64_t groups = 0;
  const char* group(int64_t g, int64_t k, DType t) const { return bytes.get() + g * group_bytes(k, t); }
  static int64_t group_bytes(int64_t k, DType t) { return int8_group_bytes(k, t); }
};
std::shared_ptr<const PackedInt8> packed_int8(const cpu::Operand& w, int64_t n, int64_t k);

/// Whether the fast kernels take a weight of this dtype.
inline bool fast_weight(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16 || int8_weight(t);
}

/// The instruction set `f` offers for these loops, or none (the portable kernel).
const Isa* select_isa(const cpu::Features& f);

std::unique_ptr<RowRangeKernel> portable_kernel(const cpu::KernelArgs& a, const MatmulConfig& c);
/// How the fast kernel multiplies at Precision::medium, as gemm.cpp decides (and `iron info
/// --kernels` says); all false at highest and high.
struct MediumProducts {
  bool bf16 = false;      // several rows take bf16 inputs and f32 sums (vdpbf16ps)
  bool amx_bf16 = false;  // ... in AMX tiles (AMX-BF16 usable, the AVX-512 loops, k a multiple of 32)
  bool int8 = false;      // int8 blocks of x against W rearranged once (int8_weight's kinds)
  bool amx_int8 = false;  // ... whole tiles of 16 rows in AMX-INT8 tiles
  bool w16 = false;       // several rows against a float weight's bf16 pairs widened to f32 (tile_w16)
};
std::unique_ptr<RowRangeKernel> fast_kernel(const cpu::KernelArgs& a, const MatmulConfig& c, const Isa& isa,
                                            const MediumProducts& medium = {});
/// One step over several weights (gemm_parts.cpp), a kernel per weight; with a `gate` (a gated
/// feed-forward's middle merged in): two weights, and a third output gate(y0) * y1 (a.out).
std::unique_ptr<cpu::Kernel> parts_kernel(std::vector<std::unique_ptr<RowRangeKernel>> parts,
                                          const cpu::KernelArgs& a, Gate gate);

}  // namespace iron::ops::gemm
