#include "kernels/cpu/vector_math.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#define TANDEM_AVX512 __attribute__((target("avx512f")))
#define TANDEM_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline
#define TANDEM_AVX2 __attribute__((target("avx2,fma")))
#define TANDEM_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

namespace tandem::cpu {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 to 16 bits: n * kLn2Hi is exact for |n| <= 128
constexpr float kLn2Lo = 1.4286068203094172e-06f;
// exp's argument range: below kExpMin the result is 0, above kExpMax it is exp(kExpMax) (see
// vector_math.h; a denormal sigmoid made the GELU backward of inputs below -9 4x slower here).
constexpr float kExpMin = -87.0f, kExpMax = 80.0f;
// 1 / k! for k = 7 down to 2: Horner's rule from the highest power.
constexpr float kInvFact[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f};

// The maskz forms with every lane set: GCC 12 warns that the plain forms' undefined pass-through
// vector "may be used uninitialized".
constexpr __mmask16 kAll = 0xFFFF;

TANDEM_AVX512_INLINE __m512 exp16(__m512 a) {
  const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  const __mmask16 zero = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kExpMin), _CMP_LT_OQ);
  const __m512 lo = _mm512_set1_ps(kExpMin), hi = _mm512_set1_ps(kExpMax);
  const __m512 c = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, a, lo), hi);
  const __m512 n = _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(c, _mm512_set1_ps(kLog2e)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), c);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kInvFact[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kInvFact[i]));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_maskz_mov_ps(__mmask16(~zero), _mm512_maskz_scalef_ps(kAll, p, n));
  return _mm512_mask_mov_ps(e, nan, a);
}

// s = sigmoid(2u) = 1 / (1 + exp(-2u)) of the GELU's u(x).
TANDEM_AVX512_INLINE __m512 gelu_sigmoid16(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi), x),
                                 _mm512_fmadd_ps(_mm512_set1_ps(kCubic), x2, _mm512_set1_ps(1.0f)));
  const __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

TANDEM_AVX2_INLINE __m256 exp8(__m256 a) {
  const __m256 nan = _mm256_cmp_ps(a, a, _CMP_UNORD_Q), keep = _mm256_cmp_ps(a, _mm256_set1_ps(kExpMin), _CMP_NLT_UQ);
  const __m256 c = _mm256_min_ps(_mm256_max_ps(a, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), c);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kInvFact[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kInvFact[i]));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^n: n + 127 in the exponent field (n in [-126, 116] after the clamp).
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));  // 0 below kExpMin
  return _mm256_blendv_ps(e, a, nan);
}

TANDEM_AVX2_INLINE __m256 gelu_sigmoid8(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), x),
                                 _mm256_fmadd_ps(_mm256_set1_ps(kCubic), x2, _mm256_set1_ps(1.0f)));
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// d gelu / dx = s (1 + 2 x du (1 - s)), du = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
TANDEM_AVX512_INLINE __m512 gelu_slope16(__m512 x) {
  const __m512 s = gelu_sigmoid16(x);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 du = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                  _mm512_fmadd_ps(_mm512_set1_ps(3 * kCubic), _mm512_mul_ps(x, x), one));
  const __m512 t = _mm512_mul_ps(_mm512_add_ps(x, x), _mm512_mul_ps(du, _mm512_sub_ps(one, s)));
  return _mm512_mul_ps(s, _mm512_add_ps(_mm512_set1_ps(1.0f), t));
}

TANDEM_AVX2_INLINE __m256 gelu_slope8(__m256 x) {
  const __m256 s = gelu_sigmoid8(x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 du = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                  _mm256_fmadd_ps(_mm256_set1_ps(3 * kCubic), _mm256_mul_ps(x, x), one));
  const __m256 t = _mm256_mul_ps(_mm256_add_ps(x, x), _mm256_mul_ps(du, _mm256_sub_ps(one, s)));
  return _mm256_mul_ps(s, _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

TANDEM_AVX512_INLINE __mmask16 mask16(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

// Lanes below `left` (of 8) set: the maskload/maskstore mask of a range's tail.
TANDEM_AVX2_INLINE __m256i mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : int(left)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 16 floats as two vectors of 8 doubles (lanes 0-7, 8-15); 8 floats as two of 4.
TANDEM_AVX512_INLINE void split_pd(__m512 v, __m512d& lo, __m512d& hi) {
  const __m512d bits = _mm512_castps_pd(v);
  lo = _mm512_maskz_cvtps_pd(0xFF, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 0)));
  hi = _mm512_maskz_cvtps_pd(0xFF, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 1)));
}

TANDEM_AVX2_INLINE void split_pd(__m256 v, __m256d& lo, __m256d& hi) {
  lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

// The sum of 16 (8) floats' lanes into two vectors of double lanes: fixed lanes.
TANDEM_AVX512_INLINE void add_to_double_lanes(__m512 e, __m512d& low, __m512d& high) {
  __m512d lo, hi;
  split_pd(e, lo, hi);
  low = _mm512_add_pd(low, lo);
  high = _mm512_add_pd(high, hi);
}

TANDEM_AVX2_INLINE void add_to_double_lanes(__m256 e, __m256d& low, __m256d& high) {
  __m256d lo, hi;
  split_pd(e, lo, hi);
  low = _mm256_add_pd(low, lo);
  high = _mm256_add_pd(high, hi);
}

// Layer norm rows: the 16 (8) floats at p (lanes from `left` on zero) as double lanes, and back;
// lane masks of 8-double halves.
TANDEM_AVX512_INLINE void load16_pd(const float* p, int64_t left, __m512d& lo, __m512d& hi) {
  split_pd(_mm512_maskz_loadu_ps(mask16(left), p), lo, hi);
}

TANDEM_AVX512_INLINE __m512 to_ps16(__m512d lo, __m512d hi) {
  const __m256 a = _mm512_maskz_cvtpd_ps(0xFF, lo), b = _mm512_maskz_cvtpd_ps(0xFF, hi);
  const __m512d low = _mm512_maskz_insertf64x4(0xFF, _mm512_setzero_pd(), _mm256_castps_pd(a), 0);
  return _mm512_castpd_ps(_mm512_maskz_insertf64x4(0xFF, low, _mm256_castps_pd(b), 1));
}

TANDEM_AVX512_INLINE __mmask8 mask8d(int64_t left) {
  return left >= 8 ? __mmask8(0xFF) : left <= 0 ? __mmask8(0) : __mmask8((1u << left) - 1);
}

TANDEM_AVX2_INLINE void load8_pd(const float* p, int64_t left, __m256d& lo, __m256d& hi) {
  split_pd(_mm256_maskload_ps(p, mask8(left)), lo, hi);
}

TANDEM_AVX2_INLINE __m256 to_ps8(__m256d lo, __m256d hi) {
  return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

// All-ones in the lanes (of 4 doubles, the first numbered `first`) below `left`.
TANDEM_AVX2_INLINE __m256d lanes_below(int64_t left, double first) {
  return _mm256_cmp_pd(_mm256_add_pd(_mm256_set1_pd(first), _mm256_setr_pd(0, 1, 2, 3)),
                       _mm256_set1_pd(double(left)), _CMP_LT_OQ);
}

// gy * gamma rounded to float as the scalar loop rounds it, then as double lanes.
TANDEM_AVX512_INLINE void scaled_g16(const float* gy, const float* gamma, int64_t n, int64_t i, __m512d& lo,
                                     __m512d& hi) {
  __m512 g = _mm512_maskz_loadu_ps(mask16(n - i), gy + i);
  if (gamma) g = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(mask16(n - i), gamma + i));
  split_pd(g, lo, hi);
}

TANDEM_AVX2_INLINE void scaled_g8(const float* gy, const float* gamma, int64_t n, int64_t i, __m256d& lo,
                                  __m256d& hi) {
  __m256 g = _mm256_maskload_ps(gy + i, mask8(n - i));
  if (gamma) g = _mm256_mul_ps(g, _mm256_maskload_ps(gamma + i, mask8(n - i)));
  split_pd(g, lo, hi);
}

// Lane sums added in lane order.
TANDEM_AVX512_INLINE double ordered_sum(__m512d a, __m512d b) {
  alignas(64) double lanes[16];
  _mm512_store_pd(lanes, a);
  _mm512_store_pd(lanes + 8, b);
  double s = 0;
  for (double v : lanes) s += v;
  return s;
}

TANDEM_AVX2_INLINE double ordered_sum(__m256d a, __m256d b) {
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, a);
  _mm256_store_pd(lanes + 4, b);
  double s = 0;
  for (double v : lanes) s += v;
  return s;
}

}  // namespace

TANDEM_AVX512 void gelu_tanh_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(v, gelu_sigmoid16(v)));
  }
}

TANDEM_AVX512 void gelu_tanh_backward_avx512(const float* x, const float* gy, float* gx, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    _mm512_mask_storeu_ps(gx + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, gy + i), gelu_slope16(v)));
  }
}

TANDEM_AVX2 void gelu_tanh_avx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, k);
    _mm256_maskstore_ps(y + i, k, _mm256_mul_ps(v, gelu_sigmoid8(v)));
  }
}

TANDEM_AVX2 void gelu_tanh_backward_avx2(const float* x, const float* gy, float* gx, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, k);
    _mm256_maskstore_ps(gx + i, k, _mm256_mul_ps(_mm256_maskload_ps(gy + i, k), gelu_slope8(v)));
  }
}

TANDEM_AVX512 double exp_shifted_sum_avx512(const float* in, float* out, int64_t n, float shift) {
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  const __m512 s = _mm512_set1_ps(shift);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, in + i), s)));
    _mm512_mask_storeu_ps(out + i, k, e);
    add_to_double_lanes(e, low, high);
  }
  alignas(64) double lanes[16];
  _mm512_store_pd(lanes, low);
  _mm512_store_pd(lanes + 8, high);
  double sum = 0;
  for (double v : lanes) sum += v;
  return sum;
}

TANDEM_AVX2 double exp_shifted_sum_avx2(const float* in, float* out, int64_t n, float shift) {
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  const __m256 s = _mm256_set1_ps(shift);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(k), exp8(_mm256_sub_ps(_mm256_maskload_ps(in + i, k), s)));
    _mm256_maskstore_ps(out + i, k, e);
    add_to_double_lanes(e, low, high);
  }
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, low);
  _mm256_store_pd(lanes + 4, high);
  double sum = 0;
  for (double v : lanes) sum += v;
  return sum;
}

TANDEM_AVX512 float row_max_avx512(const float* in, int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-__builtin_inff());
  __m512 m = lowest;
  for (int64_t i = 0; i < n; i += 16)
    m = _mm512_maskz_max_ps(kAll, m, _mm512_mask_loadu_ps(lowest, mask16(n - i), in + i));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float r = lanes[0];
  for (float v : lanes) r = v > r ? v : r;
  return r;
}

TANDEM_AVX2 float row_max_avx2(const float* in, int64_t n) {
  const __m256 lowest = _mm256_set1_ps(-__builtin_inff());
  __m256 m = lowest;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    m = _mm256_max_ps(m, _mm256_blendv_ps(lowest, _mm256_maskload_ps(in + i, k), _mm256_castsi256_ps(k)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = lanes[0];
  for (float v : lanes) r = v > r ? v : r;
  return r;
}

TANDEM_AVX512 void log_softmax_backward_avx512(const float* y, const float* g, float* out, int64_t n, float sum_g) {
  const __m512 s = _mm512_set1_ps(sum_g);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    const __m512 p = exp16(_mm512_maskz_loadu_ps(k, y + i));
    _mm512_mask_storeu_ps(out + i, k, _mm512_fnmadd_ps(p, s, _mm512_maskz_loadu_ps(k, g + i)));
  }
}

TANDEM_AVX2 void log_softmax_backward_avx2(const float* y, const float* g, float* out, int64_t n, float sum_g) {
  const __m256 s = _mm256_set1_ps(sum_g);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    const __m256 p = exp8(_mm256_maskload_ps(y + i, k));
    _mm256_maskstore_ps(out + i, k, _mm256_fnmadd_ps(p, s, _mm256_maskload_ps(g + i, k)));
  }
}

TANDEM_AVX512 void layer_norm_stats_avx512(const float* x, int64_t n, double eps, double* mean, double* invstd) {
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), a, b;
  for (int64_t i = 0; i < n; i += 16) {
    load16_pd(x + i, n - i, a, b);
    s0 = _mm512_add_pd(s0, a);
    s1 = _mm512_add_pd(s1, b);
  }
  const double m = ordered_sum(s0, s1) / double(n);
  const __m512d mv = _mm512_set1_pd(m);
  __m512d v0 = _mm512_setzero_pd(), v1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    load16_pd(x + i, n - i, a, b);
    const __m512d d0 = _mm512_maskz_sub_pd(mask8d(n - i), a, mv), d1 = _mm512_maskz_sub_pd(mask8d(n - i - 8), b, mv);
    v0 = _mm512_fmadd_pd(d0, d0, v0);
    v1 = _mm512_fmadd_pd(d1, d1, v1);
  }
  *mean = m;
  *invstd = 1.0 / std::sqrt(ordered_sum(v0, v1) / double(n) + eps);
}

TANDEM_AVX512 void layer_norm_apply_avx512(const float* x, float* y, int64_t n, double mean, double invstd,
                                           const float* gamma, const float* beta) {
  const __m512d mv = _mm512_set1_pd(mean), iv = _mm512_set1_pd(invstd);
  __m512d a, b;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask16(n - i);
    load16_pd(x + i, n - i, a, b);
    __m512 h = to_ps16(_mm512_mul_pd(_mm512_sub_pd(a, mv), iv), _mm512_mul_pd(_mm512_sub_pd(b, mv), iv));
    if (gamma) h = _mm512_mul_ps(h, _mm512_maskz_loadu_ps(k, gamma + i));
    if (beta) h = _mm512_add_ps(h, _mm512_maskz_loadu_ps(k, beta + i));
    _mm512_mask_storeu_ps(y + i, k, h);
  }
}

TANDEM_AVX512 void layer_norm_backward_row_avx512(const float* x, const float* gy, const float* gamma, float* gx,
                                                  int64_t n, double mean, double invstd) {
  const __m512d mv = _mm512_set1_pd(mean), iv = _mm512_set1_pd(invstd);
  __m512d sg0 = _mm512_setzero_pd(), sg1 = _mm512_setzero_pd(), sx0 = _mm512_setzero_pd(), sx1 = _mm512_setzero_pd();
  __m512d a, b, g0, g1;
  for (int64_t i = 0; i < n; i += 16) {
    load16_pd(x + i, n - i, a, b);
    scaled_g16(gy, gamma, n, i, g0, g1);
    sg0 = _mm512_add_pd(sg0, g0);
    sg1 = _mm512_add_pd(sg1, g1);
    sx0 = _mm512_fmadd_pd(g0, _mm512_mul_pd(_mm512_sub_pd(a, mv), iv), sx0);
    sx1 = _mm512_fmadd_pd(g1, _mm512_mul_pd(_mm512_sub_pd(b, mv), iv), sx1);
  }
  const double M = double(n);
  const __m512d sum_g = _mm512_set1_pd(ordered_sum(sg0, sg1)), sum_gx = _mm512_set1_pd(ordered_sum(sx0, sx1));
  const __m512d scale = _mm512_set1_pd(invstd / M), mm = _mm512_set1_pd(M);
  for (int64_t i = 0; i < n; i += 16) {
    load16_pd(x + i, n - i, a, b);
    scaled_g16(gy, gamma, n, i, g0, g1);
    const __m512d r0 = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(mm, g0), sum_g),
                                     _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(a, mv), iv), sum_gx));
    const __m512d r1 = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(mm, g1), sum_g),
                                     _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(b, mv), iv), sum_gx));
    _mm512_mask_storeu_ps(gx + i, mask16(n - i), to_ps16(_mm512_mul_pd(scale, r0), _mm512_mul_pd(scale, r1)));
  }
}

TANDEM_AVX2 void layer_norm_stats_avx2(const float* x, int64_t n, double eps, double* mean, double* invstd) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), a, b;
  for (int64_t i = 0; i < n; i += 8) {
    load8_pd(x + i, n - i, a, b);
    s0 = _mm256_add_pd(s0, a);
    s1 = _mm256_add_pd(s1, b);
  }
  const double m = ordered_sum(s0, s1) / double(n);
  const __m256d mv = _mm256_set1_pd(m);
  __m256d v0 = _mm256_setzero_pd(), v1 = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    load8_pd(x + i, n - i, a, b);
    const __m256d d0 = _mm256_and_pd(lanes_below(n - i, 0), _mm256_sub_pd(a, mv));
    const __m256d d1 = _mm256_and_pd(lanes_below(n - i, 4), _mm256_sub_pd(b, mv));
    v0 = _mm256_fmadd_pd(d0, d0, v0);
    v1 = _mm256_fmadd_pd(d1, d1, v1);
  }
  *mean = m;
  *invstd = 1.0 / std::sqrt(ordered_sum(v0, v1) / double(n) + eps);
}

TANDEM_AVX2 void layer_norm_apply_avx2(const float* x, float* y, int64_t n, double mean, double invstd,
                                       const float* gamma, const float* beta) {
  const __m256d mv = _mm256_set1_pd(mean), iv = _mm256_set1_pd(invstd);
  __m256d a, b;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i k = mask8(n - i);
    load8_pd(x + i, n - i, a, b);
    __m256 h = to_ps8(_mm256_mul_pd(_mm256_sub_pd(a, mv), iv), _mm256_mul_pd(_mm256_sub_pd(b, mv), iv));
    if (gamma) h = _mm256_mul_ps(h, _mm256_maskload_ps(gamma + i, k));
    if (beta) h = _mm256_add_ps(h, _mm256_maskload_ps(beta + i, k));
    _mm256_maskstore_ps(y + i, k, h);
  }
}

TANDEM_AVX2 void layer_norm_backward_row_avx2(const float* x, const float* gy, const float* gamma, float* gx,
                                              int64_t n, double mean, double invstd) {
  const __m256d mv = _mm256_set1_pd(mean), iv = _mm256_set1_pd(invstd);
  __m256d sg0 = _mm256_setzero_pd(), sg1 = _mm256_setzero_pd(), sx0 = _mm256_setzero_pd(), sx1 = _mm256_setzero_pd();
  __m256d a, b, g0, g1;
  for (int64_t i = 0; i < n; i += 8) {
    load8_pd(x + i, n - i, a, b);
    scaled_g8(gy, gamma, n, i, g0, g1);
    sg0 = _mm256_add_pd(sg0, g0);
    sg1 = _mm256_add_pd(sg1, g1);
    sx0 = _mm256_fmadd_pd(g0, _mm256_mul_pd(_mm256_sub_pd(a, mv), iv), sx0);
    sx1 = _mm256_fmadd_pd(g1, _mm256_mul_pd(_mm256_sub_pd(b, mv), iv), sx1);
  }
  const double M = double(n);
  const __m256d sum_g = _mm256_set1_pd(ordered_sum(sg0, sg1)), sum_gx = _mm256_set1_pd(ordered_sum(sx0, sx1));
  const __m256d scale = _mm256_set1_pd(invstd / M), mm = _mm256_set1_pd(M);
  for (int64_t i = 0; i < n; i += 8) {
    load8_pd(x + i, n - i, a, b);
    scaled_g8(gy, gamma, n, i, g0, g1);
    const __m256d r0 = _mm256_sub_pd(_mm256_sub_pd(_mm256_mul_pd(mm, g0), sum_g),
                                     _mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(a, mv), iv), sum_gx));
    const __m256d r1 = _mm256_sub_pd(_mm256_sub_pd(_mm256_mul_pd(mm, g1), sum_g),
                                     _mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(b, mv), iv), sum_gx));
    _mm256_maskstore_ps(gx + i, mask8(n - i), to_ps8(_mm256_mul_pd(scale, r0), _mm256_mul_pd(scale, r1)));
  }
}

}  // namespace tandem::cpu

#else

#include <stdexcept>

namespace tandem::cpu {
// Off x86-64 cpu_supports() never reports these ISAs, so nothing calls them.
void gelu_tanh_avx512(const float*, float*, int64_t) { throw std::logic_error("gelu_tanh_avx512 called off x86-64"); }
void gelu_tanh_avx2(const float*, float*, int64_t) { throw std::logic_error("gelu_tanh_avx2 called off x86-64"); }
void gelu_tanh_backward_avx512(const float*, const float*, float*, int64_t) {
  throw std::logic_error("gelu_tanh_backward_avx512 called off x86-64");
}
void gelu_tanh_backward_avx2(const float*, const float*, float*, int64_t) {
  throw std::logic_error("gelu_tanh_backward_avx2 called off x86-64");
}
double exp_shifted_sum_avx512(const float*, float*, int64_t, float) {
  throw std::logic_error("exp_shifted_sum_avx512 called off x86-64");
}
double exp_shifted_sum_avx2(const float*, float*, int64_t, float) {
  throw std::logic_error("exp_shifted_sum_avx2 called off x86-64");
}
float row_max_avx512(const float*, int64_t) { throw std::logic_error("row_max_avx512 called off x86-64"); }
float row_max_avx2(const float*, int64_t) { throw std::logic_error("row_max_avx2 called off x86-64"); }
void log_softmax_backward_avx512(const float*, const float*, float*, int64_t, float) {
  throw std::logic_error("log_softmax_backward_avx512 called off x86-64");
}
void log_softmax_backward_avx2(const float*, const float*, float*, int64_t, float) {
  throw std::logic_error("log_softmax_backward_avx2 called off x86-64");
}
void layer_norm_stats_avx512(const float*, int64_t, double, double*, double*) {
  throw std::logic_error("layer_norm_stats_avx512 called off x86-64");
}
void layer_norm_stats_avx2(const float*, int64_t, double, double*, double*) {
  throw std::logic_error("layer_norm_stats_avx2 called off x86-64");
}
void layer_norm_apply_avx512(const float*, float*, int64_t, double, double, const float*, const float*) {
  throw std::logic_error("layer_norm_apply_avx512 called off x86-64");
}
void layer_norm_apply_avx2(const float*, float*, int64_t, double, double, const float*, const float*) {
  throw std::logic_error("layer_norm_apply_avx2 called off x86-64");
}
void layer_norm_backward_row_avx512(const float*, const float*, const float*, float*, int64_t, double, double) {
  throw std::logic_error("layer_norm_backward_row_avx512 called off x86-64");
}
void layer_norm_backward_row_avx2(const float*, const float*, const float*, float*, int64_t, double, double) {
  throw std::logic_error("layer_norm_backward_row_avx2 called off x86-64");
}
}  // namespace tandem::cpu

#endif
