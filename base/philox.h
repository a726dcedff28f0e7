// Counter-based Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// A random number is a pure function of (key, counter), so the CPU and the CUDA backend
// produce the same stream: element i of a draw at (seed, offset) uses the block
// counter = {lo32(offset + i/4), hi32(offset + i/4), 0, 0}, key = {lo32(seed), hi32(seed)},
// and takes lane i % 4. A draw of n elements advances the offset by ceil(n / 4).
// Written host/device so kernels/cuda can include it unchanged.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

namespace tandem::philox {

struct U32x4 { uint32_t v[4]; };

TANDEM_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
TANDEM_HD U32x4 philox4x32_10(U32x4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(M0, c.v[0], hi0, lo0);
    mulhilo(M1, c.v[2], hi1, lo1);
    c = U32x4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

// The 32 random bits for element i of the draw starting at block `offset`.
TANDEM_HD uint32_t bits(uint64_t seed, uint64_t offset, uint64_t i) {
  uint64_t block = offset + i / 4;
  U32x4 c{{uint32_t(block), uint32_t(block >> 32), 0u, 0u}};
  U32x4 r = philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32));
  return r.v[i % 4];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float32).
TANDEM_HD float uniform01(uint32_t b) { return float(b >> 8) * (1.0f / 16777216.0f); }

// ---- standard normals that are bit-identical on the CPU and on CUDA ----
// libm's logf/sinf/cosf and CUDA's differ in the last bit for some inputs, so Box-Muller
// is computed here from IEEE operations only (add, multiply, divide, sqrt, fused
// multiply-add), each written as an explicit call so that neither compiler can fuse or
// reorder them differently (host: -ffp-contract=fast would otherwise turn a*b+c into an
// fma on FMA machines; device: nvcc fuses by default). Everything runs in double and is
// rounded to float once, so the result is the float nearest to the exact deviate in all
// but rare ties of the last bit, and the same bits on both sides.
namespace detail {
TANDEM_HD double fma_d(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
TANDEM_HD double mul_d(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;  // never the operand of a plain add below, so never contracted
#endif
}
TANDEM_HD double div_d(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
TANDEM_HD double sqrt_d(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
// Index of the highest set bit of v > 0.
TANDEM_HD int top_bit(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(int(v));
#else
  return 31 - __builtin_clz(v);
#endif
}

// Box-Muller radius sqrt(-2 ln(1 - u1)) for u1 = uniform01(b1), in double.
// 1 - u1 = N / 2^24 with the integer N = 2^24 - (b1 >> 8) in [1, 2^24]. Write N = m * 2^e
// with m in [sqrt(1/2), sqrt(2)), so ln(1 - u1) = (e - 24) ln 2 + ln m, and
// ln m = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), s = (m - 1)/(m + 1), |s| < 0.1716:
// ten terms leave a truncation error below 1e-17. m - 1 and m + 1 are exact.
TANDEM_HD double box_muller_radius(uint32_t b1) {
  const uint32_t n = (1u << 24) - (b1 >> 8);
  int e = top_bit(n);
  double m = div_d(double(n), double(1u << e));  // exact: a power-of-two divisor
  if (m > 1.4142135623730951) {
    m = div_d(m, 2.0);
    e += 1;
  }
  const double s = div_d(m - 1.0, m + 1.0);
  const double s2 = mul_d(s, s);
  double p = 1.0 / 19.0;
  p = fma_d(p, s2, 1.0 / 17.0);
  p = fma_d(p, s2, 1.0 / 15.0);
  p = fma_d(p, s2, 1.0 / 13.0);
  p = fma_d(p, s2, 1.0 / 11.0);
  p = fma_d(p, s2, 1.0 / 9.0);
  p = fma_d(p, s2, 1.0 / 7.0);
  p = fma_d(p, s2, 1.0 / 5.0);
  p = fma_d(p, s2, 1.0 / 3.0);
  p = fma_d(p, s2, 1.0);
  constexpr double kLn2 = 0.6931471805599453;
  const double log_x = fma_d(double(e - 24), kLn2, mul_d(2.0 * s, p));  // <= 0
  const double r2 = mul_d(-2.0, log_x);
  return sqrt_d(r2 > 0.0 ? r2 : 0.0);
}

template <int N>
TANDEM_HD double horner(double y, const double (&coeffs)[N]) {
  double p = coeffs[0];
  for (int i = 1; i < N; ++i) p = fma_d(p, y, coeffs[i]);
  return p;
}

// sin and cos of 2 pi u2 for u2 = uniform01(b2) = k / 2^24. The quadrant is taken in exact
// integer arithmetic: k = q 2^22 + f with f in [-2^21, 2^21), so the angle is
// q pi/2 + phi, phi = f pi / 2^23 in [-pi/4, pi/4), where Taylor series to the 19th
// (sin) and 18th (cos) power are accurate to below 1e-17.
TANDEM_HD void sin_cos_2pi(uint32_t b2, double& sin_out, double& cos_out) {
  const int32_t k = int32_t(b2 >> 8);
  const int32_t q = (k + (1 << 21)) >> 22;  // 0..4
  const int32_t f = k - q * (1 << 22);
  constexpr double kPiOver2Pow23 = 3.141592653589793 / 8388608.0;
  const double phi = mul_d(double(f), kPiOver2Pow23);
  const double y = mul_d(phi, phi);
  // Horner's rule from the highest power down, one fma per coefficient.
  const double sin_coeffs[] = {-1.0 / 121645100408832000.0, 1.0 / 355687428096000.0, -1.0 / 1307674368000.0,
                               1.0 / 6227020800.0,          -1.0 / 39916800.0,      1.0 / 362880.0,
                               -1.0 / 5040.0,               1.0 / 120.0,            -1.0 / 6.0,
                               1.0};  // sin(phi) / phi in phi^2, from -1/19!
  const double cos_coeffs[] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                               1.0 / 479001600.0,         -1.0 / 3628800.0,      1.0 / 40320.0,
                               -1.0 / 720.0,              1.0 / 24.0,            -1.0 / 2.0,
                               1.0};  // cos(phi) in phi^2, from -1/18!
  const double sin_phi = mul_d(phi, horner(y, sin_coeffs));
  const double cos_phi = horner(y, cos_coeffs);
  switch (q & 3) {
    case 0: sin_out = sin_phi; cos_out = cos_phi; break;
    case 1: sin_out = cos_phi; cos_out = -sin_phi; break;
    case 2: sin_out = -sin_phi; cos_out = -cos_phi; break;
    default: sin_out = -cos_phi; cos_out = sin_phi; break;
  }
}
}  // namespace detail

// The two standard normals of a lane pair (2j, 2j+1) whose random bits are b_even, b_odd:
// Box-Muller with u1 = uniform01(b_even), u2 = uniform01(b_odd); the even lane takes the
// cosine branch, the odd lane the sine branch.
TANDEM_HD void normal_pair(uint32_t b_even, uint32_t b_odd, float& z_even, float& z_odd) {
  const double radius = detail::box_muller_radius(b_even);
  double s, c;
  detail::sin_cos_2pi(b_odd, s, c);
  z_even = float(detail::mul_d(radius, c));
  z_odd = float(detail::mul_d(radius, s));
}

// Standard normal for element i: normal_pair on the lane pair (2j, 2j+1) of i's block.
TANDEM_HD float normal(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t pair = i & ~uint64_t(1);
  float z_even, z_odd;
  normal_pair(bits(seed, offset, pair), bits(seed, offset, pair + 1), z_even, z_odd);
  return (i & 1) ? z_odd : z_even;
}

}  // namespace tandem::philox
