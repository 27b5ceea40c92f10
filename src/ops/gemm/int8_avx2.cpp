// The int8 path (Precision::medium) on AVX2: x quantised to int8 blocks, W in the rearranged
// layout of kernels.hpp (made once per weight, the same bytes the AVX-512 VNNI and AMX loops
// read), and int32 dot products from vpmaddubsw (unsigned bytes of W times signed bytes of x,
// pairs summed to int16) and vpmaddwd against ones (pairs of int16 to int32): what vpdpbusd does
// in one instruction, in two. Highway has no int8 dot product, so this is a target-specific
// kernel beside the portable one (issue 33). Where AVX-VNNI runs, int8_avxvnni.cpp's copy of
// the same loops takes its vpdpbusd instead.
//
// vpmaddubsw saturates its int16 pairs, so each kind sums in int16 only as far as cannot overflow:
// a nibble (0..15) times |x| <= 127 is at most 1,905, a pair 3,810, and the 8 products a block
// takes of one column quad (4 loads x low and high nibble) 30,480: the 4-bit kinds sum a whole
// block in int16, the 5-bit kinds (0..31) four products, q6_k (0..63) two. q8_0's quants are
// signed (-128..127): their bytes are stored plus 128 for vpdpbusd, which does not saturate; here
// they are flipped back and multiplied as |quant| times x with the quant's sign (vpabsb, vpsignb),
// at most 16,256 a product, so every pair goes to int32 alone.
//
// A 64-byte load of the layout holds 4 columns of each of a group's 16 rows: its low 32 bytes the
// first 8 rows, its high 32 the other 8. A pass takes one half (8 rows of W, one f32 lane each)
// against R rows of x, so an accumulator is one register; the half's bytes are read once a pass
// and its cache lines stay in L1 for the other half. One row of x alone (a decode) has the
// registers for both halves in one pass, which reads the group once. Each row of x gets the same
// operations in the same order whatever R is, so a row's outputs do not depend on the rows
// beside it (a batched decode step's streams get what they would alone). quantise_x8 makes the
// bits the AVX-512 one does (the same IEEE operations on each block).
#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/int8_avx2_loops.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

// ---- x as int8 blocks ---------------------------------------------------------------------

inline float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline int32_t isum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantise_x8_avx2(const QuantiseX8Args& a) {
  const int64_t blocks = a.k / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = a.x + b * 32;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const float mx = max8(
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]))));
    // As the AVX-512 quantiser: int8_reciprocal's multiplier, |q| <= 127 rounded to nearest
    // (even) by the default MXCSR mode, saturated for safety.
    const float id = int8_reciprocal(mx), scale = mx / 127.0f;
    const __m256 ib = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], ib));
    // int32 -> int16 -> int8 with saturation; the packs work within 128-bit lanes, so the 8 dwords
    // come out in the order 0 2 4 6 1 3 5 7 (of 4-byte groups) and one permute puts them back.
    const __m256i w16a = _mm256_packs_epi32(q[0], q[1]), w16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i w8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16a, w16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q + b * 32), w8);
    // The block's sums as rounded (what the weights' offsets meet; kernels.hpp), per 16 too.
    const int32_t s0 = isum8(_mm256_add_epi32(q[0], q[1])),
                  s1 = isum8(_mm256_add_epi32(q[2], q[3]));
    a.scale[b] = scale;
    a.xsum[b] = scale * float(s0 + s1);
    a.xsum16[2 * b] = 32.0f * (scale * float(s0));
    a.xsum16[2 * b + 1] = 32.0f * (scale * float(s1));
  }
}

void gemm_int8_avx2(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { int8_groups<Avx2Lanes<false>, decltype(kind)::value>(g); });
}

}  // namespace iron::ops::gemm
