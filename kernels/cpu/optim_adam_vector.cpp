#include "kernels/cpu/optim_adam_vector.h"

#if defined(__x86_64__)
#include <immintrin.h>

// fp-contract=off: the compiler must not fuse a multiply and an add into one FMA, which would
// round once where the scalar loop rounds twice.
#define TANDEM_AVX512 __attribute__((target("avx512f"), optimize("fp-contract=off")))
#define TANDEM_AVX2 __attribute__((target("avx2"), optimize("fp-contract=off")))

namespace tandem::cpu {

TANDEM_AVX512 void adam_update_avx512(float* p, const float* g, float* m, float* v, int64_t n,
                                      const AdamCoefficients& c) {
  const __m512 decay = _mm512_set1_ps(c.decay), l2 = _mm512_set1_ps(c.l2), b1 = _mm512_set1_ps(c.beta1),
               omb1 = _mm512_set1_ps(c.one_minus_beta1), b2 = _mm512_set1_ps(c.beta2),
               omb2 = _mm512_set1_ps(c.one_minus_beta2), step = _mm512_set1_ps(c.step_size),
               bc2 = _mm512_set1_ps(c.bc2_sqrt), eps = _mm512_set1_ps(c.eps);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512 pv = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), decay);
    const __m512 gi = _mm512_add_ps(_mm512_maskz_loadu_ps(k, g + i), _mm512_mul_ps(l2, pv));
    const __m512 mv = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(k, m + i)), _mm512_mul_ps(omb1, gi));
    const __m512 vv =
        _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(k, v + i)), _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    // maskz: _mm512_sqrt_ps passes an undefined vector that GCC 12 warns about.
    const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(k, vv), bc2), eps);
    pv = _mm512_sub_ps(pv, _mm512_div_ps(_mm512_mul_ps(step, mv), den));
    _mm512_mask_storeu_ps(m + i, k, mv);
    _mm512_mask_storeu_ps(v + i, k, vv);
    _mm512_mask_storeu_ps(p + i, k, pv);
  }
}

TANDEM_AVX2 void adam_update_avx2(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c) {
  const __m256 decay = _mm256_set1_ps(c.decay), l2 = _mm256_set1_ps(c.l2), b1 = _mm256_set1_ps(c.beta1),
               omb1 = _mm256_set1_ps(c.one_minus_beta1), b2 = _mm256_set1_ps(c.beta2),
               omb2 = _mm256_set1_ps(c.one_minus_beta2), step = _mm256_set1_ps(c.step_size),
               bc2 = _mm256_set1_ps(c.bc2_sqrt), eps = _mm256_set1_ps(c.eps);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const int left = n - i >= 8 ? 8 : int(n - i);
    const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);  // lanes < left
    __m256 pv = _mm256_mul_ps(_mm256_maskload_ps(p + i, k), decay);
    const __m256 gi = _mm256_add_ps(_mm256_maskload_ps(g + i, k), _mm256_mul_ps(l2, pv));
    const __m256 mv = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_maskload_ps(m + i, k)), _mm256_mul_ps(omb1, gi));
    const __m256 vv =
        _mm256_add_ps(_mm256_mul_ps(b2, _mm256_maskload_ps(v + i, k)), _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    const __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2), eps);
    pv = _mm256_sub_ps(pv, _mm256_div_ps(_mm256_mul_ps(step, mv), den));
    _mm256_maskstore_ps(m + i, k, mv);
    _mm256_maskstore_ps(v + i, k, vv);
    _mm256_maskstore_ps(p + i, k, pv);
  }
}

}  // namespace tandem::cpu

#else

#include <stdexcept>

namespace tandem::cpu {
// Off x86-64 cpu_supports() never reports these ISAs, so nothing calls them.
void adam_update_avx512(float*, const float*, float*, float*, int64_t, const AdamCoefficients&) {
  throw std::logic_error("adam_update_avx512 called off x86-64");
}
void adam_update_avx2(float*, const float*, float*, float*, int64_t, const AdamCoefficients&) {
  throw std::logic_error("adam_update_avx2 called off x86-64");
}
}  // namespace tandem::cpu

#endif
