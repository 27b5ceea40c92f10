// The Attention row loop with 512-bit registers: the query and the accumulator live in up to
// sixteen registers each (head_dim <= 256), a key's score is one FMA per 16 entries.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "devices/cpu/simd_avx512.hpp"
#include "ops/attention/avx512.hpp"
#include "ops/attention/rows.hpp"

namespace iron::ops::attention {

namespace {

inline float larger(float a, float b) { return a > b ? a : b; }  // not std::max: see smaller()

template <int C>
void row(const RowArgs& a) {
  const int64_t tail = a.d - int64_t(C - 1) * 16;
  const __mmask16 last = __mmask16(tail >= 16 ? 0xffff : (1u << tail) - 1);
  __m512 q[C], acc[C];
  for (int c = 0; c < C; ++c) {
    const __mmask16 m = c == C - 1 ? last : __mmask16(0xffff);
    q[c] = _mm512_maskz_loadu_ps(m, a.q + c * 16);
    acc[c] = _mm512_setzero_ps();
  }
  float mx = -std::numeric_limits<float>::infinity(), l = 0;
  for (int64_t j0 = 0; j0 < a.keys; j0 += a.block) {
    const int64_t n = smaller(a.block, a.keys - j0);
    float top = -std::numeric_limits<float>::infinity();
    auto score = [&](int64_t i) {
      const float* k = a.k + (j0 + i) * a.stride;
      __m512 s = _mm512_setzero_ps();
      for (int c = 0; c < C; ++c)
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(c == C - 1 ? last : __mmask16(0xffff), k + c * 16), q[c], s);
      return s;
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {  // sixteen keys' products, summed together
      __m512 s[16];
      for (int j = 0; j < 16; ++j) s[j] = score(i + j);
      const __m512 sums = sum_each(s);
      _mm512_storeu_ps(a.scores + i, sums);
      top = larger(top, _mm512_reduce_max_ps(sums));
    }
    for (; i < n; ++i) {
      a.scores[i] = _mm512_reduce_add_ps(score(i));
      top = larger(top, a.scores[i]);
    }
    const float next = larger(mx, top);
    const float shrink = std::exp(mx - next);
    l *= shrink;
    const __m512 sh = _mm512_set1_ps(shrink);
    for (int c = 0; c < C; ++c) acc[c] = _mm512_mul_ps(acc[c], sh);
    // The block's weights e^(s - next), sixteen at a time, in place of the scores.
    const __m512 top_lanes = _mm512_set1_ps(next);
    __m512 sum = _mm512_setzero_ps();
    for (i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
      const __m512 e = cpu::avx512::exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, a.scores + i), top_lanes));
      _mm512_mask_storeu_ps(a.scores + i, m, e);
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
    }
    l += _mm512_reduce_add_ps(sum);
    for (i = 0; i < n; ++i) {
      const float e = a.scores[i];
      const float* v = a.v + (j0 + i) * a.stride;
      const __m512 ev = _mm512_set1_ps(e);
      for (int c = 0; c < C; ++c)
        acc[c] = _mm512_fmadd_ps(ev, _mm512_maskz_loadu_ps(c == C - 1 ? last : __mmask16(0xffff), v + c * 16), acc[c]);
    }
    mx = next;
  }
  const __m512 inv = _mm512_set1_ps(1.0f / l);
  for (int c = 0; c < C; ++c)
    _mm512_mask_storeu_ps(a.out + c * 16, c == C - 1 ? last : __mmask16(0xffff), _mm512_mul_ps(acc[c], inv));
}

}  // namespace

RowFn avx512_row_impl(int64_t d) {
  switch ((d + 15) / 16) {
    case 1: return &row<1>;
    case 2: return &row<2>;
    case 3: return &row<3>;
    case 4: return &row<4>;
    case 5: return &row<5>;
    case 6: return &row<6>;
    case 7: return &row<7>;
    case 8: return &row<8>;
    case 16: return &row<16>;
    default: return nullptr;
  }
}

}  // namespace iron::ops::attention
