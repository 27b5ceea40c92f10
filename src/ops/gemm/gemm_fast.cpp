// The fast matmul kernel for a weight W (N, K) as a Linear stores it: threads split N; the
// instruction set's loops do the work. One row (or two) takes the GEMV loop, reading W once
// straight from memory with f32 sums; more rows dequantise a tile of W rows to f32 once,
// transposed, and run a register-blocked tile over every row of `a`. Epilogues are applied to
// the f32 sums, then each output is rounded once to its dtype. At Precision::medium with
// AVX512_VNNI, a ProjectionGEMM on a weight of a block kind (q8_0, q4_0, q4_1, q5_0, q5_1,
// q4_k, q5_k, q6_k) instead quantises x to int8 blocks and takes int32 dot products against W
// rearranged once for them (kernels.hpp), for one row and many alike: as llama.cpp does, and
// twice the products per instruction of bf16. At medium a float weight is read as bf16 pairs
// made once, for one row and many alike: multiplied as bf16 where that outruns f32 (AMD's
// vdpbf16ps, AMX) for three or more rows, else widened to f32 in registers (tile_w16).
//
// At Precision::highest a call of up to kAloneRows rows (a batched decode step) takes the GEMV
// loop for every row, so each row's sums are exactly those of that row alone (batch invariance:
// a sequence's tokens do not depend on what else is in the batch); W is walked in chunks that
// stay in cache while every row reads them, so the weights still come from memory about once.
#include <algorithm>
#include <string>

#include "devices/cpu/weight_memory.hpp"
#include "iron/io/mapped_file.hpp"
#include "graph/prepared.hpp"

#include "ops/gelu/gelu.hpp"
#include "ops/gemm/kernels.hpp"
#include "ops/op.hpp"

namespace iron::ops::gemm {

void finish_all(Epilogue e, float* v, int64_t n, const cpu::Features& f, bool exact) {
  if (e == Epilogue::gelu || e == Epilogue::gelu_tanh) return gelu_rows(v, n, e == Epilogue::gelu_tanh, f);
  if (exact && e != Epilogue::none) {
    for (int64_t i = 0; i < n; ++i) v[i] = float(finish(e, v[i]));
    return;
  }
  switch (e) {
    case Epilogue::none:
      return;
    case Epilogue::relu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0 ? v[i] : 0.0f;
      return;
    case Epilogue::silu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (1.0f + std::exp(-v[i]));
      return;
    case Epilogue::gelu:
      for (int64_t i = 0; i < n; ++i)
        v[i] = 0.5f * v[i] * (1.0f + std::erf(v[i] * 0.70710678118654752f));
      return;
    case Epilogue::gelu_tanh:
      for (int64_t i = 0; i < n; ++i)
        v[i] = 0.5f * v[i] *
               (1.0f + std::tanh(0.79788456080286536f * (v[i] + 0.044715f * v[i] * v[i] * v[i])));
      return;
  }
}

const Isa* select_isa([[maybe_unused]] const cpu::Features& f) {
#if defined(__x86_64__)  // the x86 kernels are built for x86-64 alone (CMakeLists.txt)
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c) return &avx512_isa();
  if (f.avx2 && f.fma && f.f16c) return f.avxvnni ? &avx2_vnni_isa() : &avx2_isa();
#elif defined(__aarch64__)
  if (f.neon) return f.dotprod ? &neon_dotprod_isa() : &neon_isa();
#endif
  return nullptr;
}

// The fast kernel runs an instruction set's loops (an Isa): x86-64's and ARM's NEON; in a build
// for another processor select_isa offers none, and every matmul takes the portable kernel.
namespace {

// Rows of `a` below this take the GEMV loop once per row instead of packing tiles of W.
constexpr int64_t kPackRows = 3;
// At highest, rows up to this many take the GEMV loop (each row summed as it is alone).
constexpr int64_t kAloneRows = 8;
static_assert(kAloneRows <= kGemvManyRows, "a batched step's rows fit one gemv_many call");
// Bytes of W rows the GEMV loop walks for every row of `a` before moving on: within L1.
constexpr int64_t kAloneChunkBytes = 16 * 1024;
// At medium, calls of this many rows or more widen each tile of a float weight's bf16 pairs to
// f32 once and run the f32 tile loop over it; fewer widen the pairs in registers as they go
// (tile_w16): the same bits. Widening a tile is repaid by its rows: with the weight in cache
// (bench_gemv's encoder shapes, one thread, this Xeon native and IRON_CPU=avx2), at 20 rows
// widening first ran at 0.72-0.90x of the f32 tiles and tile_w16 at 1.0-1.45x; at 64 rows
// 0.95-0.99x against 0.92-0.95x; at 256 rows 0.90-1.0x against 0.87-0.93x.
constexpr int64_t kWidenRows = 32;
// Rows of x the int8 path multiplies at a time (its scratch holds their outputs).
constexpr int64_t kInt8Chunk = 32;
// Where AMX-INT8 runs, the fewest rows past a chunk's whole tiles of 16 (a batched decode step's
// rows, or a prefill's rest) that take one tile of that many rows; fewer take the VNNI loop.
// Below 16 rows the tiles' fixed costs (every kind but q8_0 unpacks its nibbles to memory for the
// tile loads, and each block's sums leave through a tile store) are repaid only once the VNNI
// loop needs a second pass (it takes 8 rows a pass): as measured with every count on the
// tiles (docs/design.md, "AMX where the OS allows it"), q8_0 ties at 8 rows where W is in
// cache and, since the VNNI loop's passes of several rows prefetch far enough ahead, loses on
// the classifier, which is not (bench_gemv BM_GEMMCold, 8 rows: 3.50-3.65 against 3.27-3.29 ms
// on one thread); q8_0 and the K-quants win from 9, q5_0 and q5_1 tie at 9 and win at 12, and
// q4_0 and q4_1 do not win below 16.
int64_t amx_int8_fewest_rows(DType w) {
  switch (w) {
    case DType::q8_0:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      return 9;
    case DType::q5_0:
    case DType::q5_1:
      return 12;
    default:
      return kAmxRows;
  }
}
// The AMX path packs W's columns a panel at a time (a panel of 1536-wide rows is 768 KiB of bf16
// pairs: it stays in L2 while every row of a passes it) and multiplies rows of a a chunk at a
// time (each chunk's sums are finished before the next).
constexpr int64_t kAmxPanel = 256, kAmxChunk = 64;

// Floats of per-thread scratch, each region starting on a 64-byte boundary.
int64_t padded(int64_t floats) { return (floats + 15) / 16 * 16; }

// The f32 tile `packed` (k x nr) as bf16 pairs (PackBf16Args' layout), each value rounded to
// nearest even as iron::f32_to_bf16 rounds it, for processors without AVX512_BF16's conversion
// (which rounds alike but flushes subnormals to zero).
void pack_pairs(const float* packed, int64_t k, int64_t nr, uint16_t* out) {
  for (int64_t q = 0; q < (k + 1) / 2; ++q)
    for (int64_t j = 0; j < nr; ++j) {
      out[2 * (q * nr + j)] = f32_to_bf16(packed[2 * q * nr + j]);
      out[2 * (q * nr + j) + 1] = 2 * q + 1 < k ? f32_to_bf16(packed[(2 * q + 1) * nr + j]) : uint16_t(0);
    }
}

// W (n rows of k) as the tile loops read it, made once per weight and shared through its prepared
// forms, so a call packs nothing: at batch 1 packing W took as long as the products. `Bf16`: the
// bf16 tiles' pairs (pack, then pack_bf16 or pack_pairs: tile t's pairs * nr * 2 values after
// tile t - 1's), which the bf16 tiles and the widening ones (tile_w16) read alike;
// else the f32 tiles (pack: tile t's k * nr floats after tile t - 1's); columns past n zero.
// Null where the operand is not a float weight at a fixed place (a block kind's copy would take
// 2 to 8 times its bytes; they take the int8 path at medium), and for f32 tiles where it is not
// f32 (a bf16 or f16 weight's f32 copy would take twice its bytes: those pack per call). The
// file's rows stay beside f32 tiles (one row of x still reads them, in the GEMV loop), so an f32
// weight takes as many bytes again at highest; the bf16 pairs serve every row at medium, so
// their making releases the rows' pages (half an f32 weight's bytes, as many as a bf16 one's).
template <bool Bf16>
auto packed_tiles(const cpu::Operand& w, const Isa& isa, const cpu::Features& f, int64_t n, int64_t k) {
  using Value = std::conditional_t<Bf16, uint16_t, float>;
  if (!w.prepared || w.offset.per_call() || info(w.dtype).quantised || (!Bf16 && w.dtype != f32))
    return std::shared_ptr<const Value>();
  const char* source = w.address(nullptr);
  const int64_t nr = isa.nr, pairs = (k + 1) / 2, tiles = (n + nr - 1) / nr;
  const int64_t tile_values = Bf16 ? pairs * nr * 2 : k * nr;
  const std::string key = (Bf16 ? "bf16x" : "f32x") + std::to_string(nr) + " " + std::to_string(source - w.base) +
                          " " + std::to_string(n) + "x" + std::to_string(k);
  auto form = w.prepared->get(key, [&]() -> PreparedForms::Form {
    std::shared_ptr<char> bytes = cpu::weight_memory(size_t(tiles * tile_values) * sizeof(Value));
    auto* out = reinterpret_cast<Value*>(bytes.get());
    // 64-byte aligned scratch for one tile (pack and pack_bf16 load whole vectors).
    std::vector<float> buffer(size_t(2 * padded(nr * k) + padded(k) + 16), 0.0f);
    float* base = buffer.data() + ((64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64) / 4;
    float *rowbuf = base, *tile = base + padded(nr * k), *zeros = tile + padded(nr * k);
    const DTypeInfo& wi = info(w.dtype);
    const int64_t row_bytes = k / wi.block * wi.bytes;
    for (int64_t t = 0; t < tiles; ++t) {
      const char* rows = source + t * nr * row_bytes;
      if constexpr (Bf16) {
        isa.pack({w.dtype, rows, row_bytes, k, std::min(nr, n - t * nr), rowbuf, zeros, tile});
        if (isa.pack_bf16 && f.avx512bf16)
          isa.pack_bf16({tile, k, out + t * tile_values});
        else
          pack_pairs(tile, k, nr, out + t * tile_values);
        // At medium every row count reads the pairs: the file's rows are mapped again only if
        // something else reads them (another precision's kernel, a tied embedding's gather).
        io::MappedFile::release_pages(rows, size_t(std::min(nr, n - t * nr) * row_bytes));
      } else {
        isa.pack({w.dtype, rows, row_bytes, k, std::min(nr, n - t * nr), rowbuf, zeros, out + t * tile_values});
      }
    }
    return std::shared_ptr<const Value>(bytes, out);
  });
  return std::static_pointer_cast<const Value>(form);
}

class FastKernel final : public RowRangeKernel {
 public:
  FastKernel(const cpu::KernelArgs& a, const MatmulConfig& c, const Isa& isa, const MediumProducts& medium)
      : a_(a.in.at(0)),
        b_(a.in.at(1)),
        y_(a.out.at(0)),
        c_(c),
        features_(a.features ? *a.features : cpu::Features::host()),
        isa_(isa),
        bf16_(medium.bf16),
        w8_(medium.int8 ? packed_int8(b_, c.n, c.k) : nullptr),
        int8_(w8_ != nullptr),
        amx_int8_(int8_ && medium.amx_int8),
        rows_of_a_(a, c),
        gemv_rows_(a.precision == Precision::highest && !medium.bf16 && !medium.int8 ? kAloneRows : kPackRows - 1) {
    if (c_.residual) r_ = a.in.at(2);
    if (c_.bias) bias_ = a.in.at(c_.residual ? 3 : 2);
    const DTypeInfo& wi = info(b_.dtype);
    row_bytes_ = c_.k / wi.block * wi.bytes;
    max_rows_ = a_.shape.size() < 2 ? 1 : a_.shape[0];
    chunk_ = std::min(max_rows_, kInt8Chunk);
    const int64_t k = c_.k, nr = isa_.nr;
    // A float weight's bf16 pairs at medium (the bf16 or AMX tiles' W, or widened to f32 where
    // those do not run) serve every row count: one or two rows are widened too (tile_w16: half
    // the bytes the GEMV loop would read from the file's f32 rows, and one order of sums for
    // every row count where bf16 products do not run), so at medium nothing reads the file's
    // rows and making the form releases their pages.
    if (bf16_ || medium.w16) w16_ = packed_tiles<true>(b_, isa_, features_, c_.n, k);
    // (Widening reads x's values two at a time: an odd k, which the bf16 tiles pad, keeps the
    // GEMV loop for one or two rows.)
    widen_ = w16_ != nullptr && k % 2 == 0;
    if (widen_ && !bf16_) gemv_rows_ = 0;
    tiles_ = (max_rows_ > gemv_rows_ || widen_) && !int8_;
    // W rows a chunk of the GEMV loop covers: a multiple of 8 (the loop's unit), so every output
    // is summed as in one whole call.
    chunk_rows_ = std::max<int64_t>(8, kAloneChunkBytes / std::max<int64_t>(1, row_bytes_) / 8 * 8);
    // AMX takes whole 32-column tiles (nr 32) and k in steps of 32; a's rows are padded to 16.
    amx_ = medium.amx_bf16 && bf16_ && tiles_ && nr == 32 && k % 32 == 0;
    // (A per-call W has no pairs: it packs f32 tiles as at highest, or bf16 ones.)
    if (!bf16_ && !widen_ && tiles_) w32_ = packed_tiles<false>(b_, isa_, features_, c_.n, k);
    const int64_t a16_rows = amx_ ? (max_rows_ + kAmxRows - 1) / kAmxRows * kAmxRows : max_rows_;
    // Per thread, in floats, each region on a 64-byte boundary. First what prepare() makes,
    // which depends on `a` alone (so kernels of one step over it lay it out alike): a's rows as
    // f32 unless read in place; for tiles at bf16 those rows as bf16 pairs; for int8 a chunk of
    // x's rows as int8 blocks with their scales and sums. Then each range's work: x's block sums
    // (the GEMV loop), rows of y, and for tiles W rows dequantised, their transposed tile and the
    // tile's outputs (the tile's bf16 pairs reuse rowbuf, free once packed).
    int64_t at = 0;
    auto region = [&](int64_t floats) {
      int64_t start = at;
      at += padded(floats);
      return start;
    };
    abuf_ = region(rows_of_a_.in_place() ? 0 : max_rows_ * k);
    a16_ = region(bf16_ && tiles_ ? a16_rows * (k + 2) / 2 : 0);
    // Every row of x quantised (by prepare(), so the parts of a step over one `a` share it: a
    // chunk at a time in run_rows, each part quantised the rows again, 12% of SmolLM2-Q6_K's
    // prefill with its RMSNorm; the int8 rows take a quarter of the f32 rows' bytes).
    q8_ = region(int8_ ? max_rows_ * k / 4 : 0);
    qscale_ = region(int8_ ? max_rows_ * (k / 32) : 0);
    qsum_ = region(int8_ ? max_rows_ * (k / 32) : 0);
    qsum16_ = region(int8_ ? max_rows_ * (k / 16) : 0);
    // The GEMV loop over several rows (gemv_many) takes every row's block sums and outputs.
    const int64_t many = gemv_rows_ > 1 && isa_.gemv_many ? std::min(gemv_rows_, kGemvManyRows) : 1;
    xsum_ = region(many * (k / 32) + 1);
    ybuf_ = region(int8_ ? chunk_ * padded(c_.n) : std::max(c_.n, many * chunk_rows_));
    // W's tiles packed per call only where the weight has no packed form (w16_, w32_).
    // Widened W: a tile of it in f32 where a call has rows enough to repay widening it once.
    const bool packs = (tiles_ && !w16_ && !w32_) || (widen_ && !bf16_ && max_rows_ >= kWidenRows);
    rowbuf_ = region(packs ? nr * k : 0);
    packed_ = region(packs ? nr * k : 0);
    cbuf_ = region(amx_ ? kAmxChunk * kAmxPanel : tiles_ ? max_rows_ * nr : 0);
    panel_ = region(amx_ && packs ? kAmxPanel * k / 2 : 0);
    scratch_ = cpu::Scratch(size_t(at));
    // A row of zeros the kernels read (never written): the kernel's own, so shared scratch
    // cannot disturb it.
    zeros_.assign(size_t(padded(k) + 16), 0.0f);
    auto addr = reinterpret_cast<uintptr_t>(zeros_.data());
    zero_row_ = zeros_.data() + ((64 - addr % 64) % 64) / 4;
  }

  int64_t rows_of_w() const override { return c_.n; }
  int64_t multiply_adds() const override { return max_rows_ * c_.k * c_.n; }

  int64_t unit(const int64_t* w) const override {
    if (int8_) return kInt8Rows;
    return rows_of_a(w) <= gemv_rows_ && !widen_ ? 8 : isa_.nr;
  }

  int preparation() const override { return int8_ ? 2 : 1; }

  // The AMX tiles take a whole panel of W's columns a call (A's tiles are loaded again for each).
  int64_t fewest_chunk_units(const int64_t* w) const override {
    return amx_ && rows_of_a(w) > gemv_rows_ ? kAmxPanel / isa_.nr : 1;
  }

  void prepare(const int64_t* w, int thread) const override {
    const int64_t rows = rows_of_a(w), k = c_.k;
    if (rows <= 0) return;
    float* base = scratch_.get(thread);
    if (int8_) {
      quantise(w, base, 0, rows);
      return;
    }
    if (!rows_of_a_.in_place())
      for (int64_t m = 0; m < rows; ++m) rows_of_a_.row(w, m, base + abuf_ + m * k);
    if (tiles_ && rows > gemv_rows_ && bf16_) {
      auto* a16 = reinterpret_cast<uint16_t*>(base + a16_);
      isa_.rows_bf16({rows_f32(w, base), k, rows, k, a16});
      // AMX reads whole tiles of 16 rows: the rows past the last are zeros.
      if (amx_) std::fill(a16 + rows * k, a16 + (rows + kAmxRows - 1) / kAmxRows * kAmxRows * k, uint16_t(0));
    }
  }

  void run_rows(const int64_t* w, int thread, int64_t begin, int64_t end) const override {
    const int64_t rows = rows_of_a(w);
    if (rows <= 0) return;
    const int64_t k = c_.k;
    float* base = scratch_.get(thread);
    float* xsum = base + xsum_;
    float* ybuf = base + ybuf_;
    const char* wbase = b_.address(w);

    if (int8_) {
      // Groups of 16 rows of W (begin is a multiple of 16) against each chunk of x's rows.
      const int64_t groups = (end - begin + kInt8Rows - 1) / kInt8Rows, width = groups * kInt8Rows;
      const int64_t blocks = k / 32;
      const char* groups_at = w8_->group(begin / kInt8Rows, k, b_.dtype);
      for (int64_t m0 = 0; m0 < rows; m0 += chunk_) {
        const int64_t mc = std::min(chunk_, rows - m0);
        // x's rows [from, to) as prepare() quantised them, into ybuf's rows from `from - m0`.
        auto rows_from = [&](int64_t from, int64_t to) -> GemmInt8Args {
          return {b_.dtype, reinterpret_cast<const int8_t*>(base + q8_) + from * k, base + qscale_ + from * blocks,
                  base + qsum_ + from * blocks, base + qsum16_ + from * 2 * blocks, to - from, k, groups_at, groups,
                  ybuf + (from - m0) * width, width};
        };
        // Whole tiles of 16 rows on AMX where it runs, then the rest in one tile of fewer rows
        // where that is faster, else (and every row elsewhere) on the VNNI loop: the same bits
        // either way (gemm_amx.cpp).
        const int64_t tiled = amx_int8_ ? mc / kAmxRows * kAmxRows : 0;
        if (tiled > 0) isa_.gemm_int8_amx(rows_from(m0, m0 + tiled));
        if (tiled < mc) {
          if (amx_int8_ && mc - tiled >= amx_int8_fewest_rows(b_.dtype))
            isa_.gemm_int8_amx(rows_from(m0 + tiled, m0 + mc));
          else
            isa_.gemm_int8(rows_from(m0 + tiled, m0 + mc));
        }
        for (int64_t i = 0; i < mc; ++i) finish_row(w, m0 + i, begin, end, ybuf + i * width);
      }
      return;
    }

    const float* a = rows_f32(w, base);
    if (rows <= gemv_rows_ && !widen_) {
      // One row: the whole range in one call. More: chunk by chunk of W, every row over each.
      const int64_t step = rows == 1 ? end - begin : chunk_rows_;
      for (int64_t n0 = begin; n0 < end; n0 += step) {
        const int64_t n1 = std::min(end, n0 + step);
        // Several rows: each block of W read once for all of them where the ISA has the loop.
        if (rows > 1 && isa_.gemv_many &&
            isa_.gemv_many({b_.dtype, a, k, rows, xsum, wbase + n0 * row_bytes_, row_bytes_, k, n1 - n0, ybuf, n1 - n0})) {
          for (int64_t m = 0; m < rows; ++m) finish_row(w, m, n0, n1, ybuf + m * (n1 - n0));
          continue;
        }
        for (int64_t m = 0; m < rows; ++m) {
          isa_.gemv({b_.dtype, a + m * k, xsum, wbase + n0 * row_bytes_, row_bytes_, k, n1 - n0, ybuf});
          finish_row(w, m, n0, n1, ybuf);
        }
      }
      return;
    }

    const int64_t nr = isa_.nr, pairs = (k + 1) / 2;
    float* rowbuf = base + rowbuf_;
    float* packed = base + packed_;
    float* cbuf = base + cbuf_;
    // bf16 products for more than gemv_rows_ rows; fewer are widened (tile_w16).
    const bool bf16_rows = bf16_ && rows > gemv_rows_;
    if (amx_ && bf16_rows) {
      // A panel of W's columns packed as bf16 tiles, then every chunk of a's rows through it.
      const auto* a16 = reinterpret_cast<const uint16_t*>(base + a16_);
      for (int64_t p0 = begin; p0 < end; p0 += kAmxPanel) {
        const int64_t p1 = std::min(end, p0 + kAmxPanel), tiles = (p1 - p0 + nr - 1) / nr, ldc = tiles * nr;
        // The weight's prepared tiles in place, else this panel's packed now.
        const uint16_t* panel = w16_ ? w16_.get() + p0 / nr * pairs * nr * 2 : reinterpret_cast<uint16_t*>(base + panel_);
        if (!w16_)
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t n0 = p0 + t * nr;
            auto* out = reinterpret_cast<uint16_t*>(base + panel_) + t * pairs * nr * 2;
            isa_.pack({b_.dtype, wbase + n0 * row_bytes_, row_bytes_, k, std::min(nr, p1 - n0), rowbuf, zero_row_, packed});
            isa_.pack_bf16({packed, k, out});
          }
        for (int64_t m0 = 0; m0 < rows; m0 += kAmxChunk) {
          const int64_t mc = std::min(kAmxChunk, rows - m0);
          isa_.tile_bf16_amx({a16 + m0 * k, k, (mc + kAmxRows - 1) / kAmxRows * kAmxRows, panel, pairs, tiles, cbuf, ldc});
          for (int64_t i = 0; i < mc; ++i) finish_row(w, m0 + i, p0, p1, cbuf + i * ldc);
        }
      }
      return;
    }
    for (int64_t n0 = begin; n0 < end; n0 += nr) {
      const int64_t nt = std::min(nr, end - n0);
      if (bf16_rows && w16_) {
        isa_.tile_bf16({reinterpret_cast<const uint16_t*>(base + a16_), 2 * pairs, rows, w16_.get() + n0 / nr * pairs * nr * 2,
                        pairs, cbuf, nr});
      } else if (bf16_rows) {
        isa_.pack({b_.dtype, wbase + n0 * row_bytes_, row_bytes_, k, nt, rowbuf, zero_row_, packed});
        auto* b16 = reinterpret_cast<uint16_t*>(rowbuf);
        isa_.pack_bf16({packed, k, b16});
        isa_.tile_bf16({reinterpret_cast<const uint16_t*>(base + a16_), 2 * pairs, rows, b16, pairs, cbuf, nr});
      } else if (widen_ && rows >= kWidenRows) {
        isa_.widen({w16_.get() + n0 / nr * pairs * nr * 2, k, packed});
        isa_.tile({a, k, rows, packed, k, cbuf, nr});
      } else if (widen_) {
        isa_.tile_w16({a, k, rows, w16_.get() + n0 / nr * pairs * nr * 2, pairs, cbuf, nr});
      } else if (w32_) {
        isa_.tile({a, k, rows, w32_.get() + n0 / nr * k * nr, k, cbuf, nr});
      } else {
        isa_.pack({b_.dtype, wbase + n0 * row_bytes_, row_bytes_, k, nt, rowbuf, zero_row_, packed});
        isa_.tile({a, k, rows, packed, k, cbuf, nr});
      }
      for (int64_t m = 0; m < rows; ++m) finish_row(w, m, n0, n0 + nt, cbuf + m * nr);
    }
  }

 private:
  int64_t rows_of_a(const int64_t* w) const { return a_.shape.size() < 2 ? 1 : a_.rows(w); }

  // a's rows as f32: in place, or as prepare() made them.
  const float* rows_f32(const int64_t* w, float* base) const {
    return rows_of_a_.in_place() ? a_.data<float>(w) : base + abuf_;
  }

  // Rows [m0, m0 + count) of x as int8 blocks, scales and block sums, in their places.
  void quantise(const int64_t* w, float* base, int64_t m0, int64_t count) const {
    const int64_t k = c_.k, blocks = k / 32;
    auto* q8 = reinterpret_cast<int8_t*>(base + q8_);
    for (int64_t i = m0; i < m0 + count; ++i)
      isa_.quantise_x8({rows_of_a_.row(w, i, base + abuf_), k, q8 + i * k, base + qscale_ + i * blocks,
                        base + qsum_ + i * blocks, base + qsum16_ + 2 * i * blocks});
  }

  // Outputs [begin, end) of row m, as f32 sums in y: the bias, the epilogue, the residual, one
  // rounding.
  void finish_row(const int64_t* w, int64_t m, int64_t begin, int64_t end, float* y) const {
    if (c_.bias) add_residual(bias_, w, begin, y, end - begin);
    finish_all(c_.epilogue, y, end - begin, features_);
    if (c_.residual) add_residual(r_, w, m * c_.n + begin, y, end - begin);
    store_row(y_, w, m * c_.n + begin, y, end - begin);
  }

  cpu::Operand a_, b_, y_, r_, bias_;
  MatmulConfig c_;
  cpu::Features features_;  // what the epilogue may use
  const Isa& isa_;
  bool bf16_;
  std::shared_ptr<const PackedInt8> w8_;  // the int8 path's W: null where it is not taken
  std::shared_ptr<const uint16_t> w16_;   // W's bf16 pairs, packed once: null where packed per call
  bool widen_ = false;                    // ... widened to f32 for f32 products (tile_w16)
  std::shared_ptr<const float> w32_;      // the f32 tiles' W, packed once: null where packed per call
  bool int8_;
  bool amx_int8_;  // the int8 path's whole tiles of 16 rows on AMX-INT8
  RowsOfA rows_of_a_;
  int64_t gemv_rows_;   // calls of at most this many rows take the GEMV loop for each row
  int64_t chunk_rows_ = 8;
  bool tiles_ = false;  // a call of more rows takes the tile loop
  bool amx_ = false;    // ... in AMX tiles
  int64_t row_bytes_ = 0, max_rows_ = 1, chunk_ = 1;
  // Offsets of the per-thread scratch regions, in floats.
  int64_t abuf_ = 0, a16_ = 0, q8_ = 0, qscale_ = 0, qsum_ = 0, qsum16_ = 0, xsum_ = 0, ybuf_ = 0, rowbuf_ = 0, packed_ = 0,
          cbuf_ = 0, panel_ = 0;
  cpu::Scratch scratch_;
  std::vector<float> zeros_;
  const float* zero_row_ = nullptr;
};

}  // namespace

std::unique_ptr<RowRangeKernel> fast_kernel(const cpu::KernelArgs& a, const MatmulConfig& c, const Isa& isa,
                                            const MediumProducts& medium) {
  return std::make_unique<FastKernel>(a, c, isa, medium);
}

}  // namespace iron::ops::gemm
