#include "kernels/cpu/gemm/sgemm_packed.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/gemm/sgemm_dot.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem::cpu {

namespace {

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  const float* bias;
  const SgemmEpilogue* epilogue;  // null: none
};

// The epilogue on the finished block of C at (i0, j0).
void finish(const Problem& P, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
  if (P.epilogue) P.epilogue->run(P.epilogue->context, P.c + i0 * P.ldc + j0, P.ldc, i0, j0, rows, cols);
}

int64_t round_down(int64_t x, int64_t unit) { return std::max(unit, x / unit * unit); }
int64_t round_up(int64_t x, int64_t unit) { return (x + unit - 1) / unit * unit; }

int64_t cache_bytes(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? int64_t(v) : fallback;
}

// A per-thread, 64-byte aligned scratch buffer that only grows (no allocation in steady state).
class PackBuffer {
 public:
  ~PackBuffer() { std::free(data_); }
  float* get(int64_t floats) {
    if (floats > size_) {
      std::free(data_);
      const size_t bytes = size_t(round_up(floats, 16)) * sizeof(float);
      data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!data_) throw std::bad_alloc();
      size_ = floats;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  int64_t size_ = 0;
};

// The non-transposing pack: dst[p*width + j] = src[p*ld + j] for p < kb, j < count, columns
// count..width-1 zero. Full panels copy a width known at compile time, which the compiler inlines
// as vector moves; a memcpy call per 56- or 128-byte row cost 5% of the MLP step.
template <int W>
void copy_full_rows(const float* src, int64_t ld, int64_t kb, float* dst) {
  for (int64_t p = 0; p < kb; ++p) std::memcpy(dst + p * W, src + p * ld, W * sizeof(float));
}

void copy_rows(const float* src, int64_t ld, int count, int width, int64_t kb, float* dst) {
  if (count == width) {
    switch (width) {
      case 4: return copy_full_rows<4>(src, ld, kb, dst);
      case 6: return copy_full_rows<6>(src, ld, kb, dst);
      case 14: return copy_full_rows<14>(src, ld, kb, dst);
      case 16: return copy_full_rows<16>(src, ld, kb, dst);
      case 32: return copy_full_rows<32>(src, ld, kb, dst);
      default: break;
    }
  }
  for (int64_t p = 0; p < kb; ++p, src += ld, dst += width) {
    for (int j = 0; j < count; ++j) dst[j] = src[j];
    for (int j = count; j < width; ++j) dst[j] = 0.0f;
  }
}

// Rows [i0, i0+mb) x depth [p0, p0+kb) of op(A) into MR-row panels: panel r holds
// dst[r*kb*MR + p*MR + i] = op(A)(i0 + r*MR + i, p0 + p), rows past mb zero.
void pack_a(const Problem& P, const SgemmKernel& K, int64_t i0, int64_t mb, int64_t p0, int64_t kb, float* dst) {
  const int mr = K.mr;
  for (int64_t ir = 0; ir < mb; ir += mr, dst += kb * mr) {
    const int rows = int(std::min<int64_t>(mr, mb - ir));
    if (!P.ta) {
      K.pack_rows(P.a + (i0 + ir) * P.lda + p0, P.lda, rows, mr, kb, dst);
    } else {
      copy_rows(P.a + p0 * P.lda + i0 + ir, P.lda, rows, mr, kb, dst);
    }
  }
}

// Depth [p0, p0+kb) x columns [j0, j0+nb) of op(B) into NR-column panels: panel r holds
// dst[r*kb*NR + p*NR + j] = op(B)(p0 + p, j0 + r*NR + j), columns past nb zero.
void pack_b(const Problem& P, const SgemmKernel& K, int64_t p0, int64_t kb, int64_t j0, int64_t nb, float* dst) {
  const int nr = K.nr;
  for (int64_t jr = 0; jr < nb; jr += nr, dst += kb * nr) {
    const int cols = int(std::min<int64_t>(nr, nb - jr));
    if (!P.tb) {
      copy_rows(P.b + p0 * P.ldb + j0 + jr, P.ldb, cols, nr, kb, dst);
    } else {
      K.pack_rows(P.b + (j0 + jr) * P.ldb + p0, P.ldb, cols, nr, kb, dst);
    }
  }
}

// A partial tile: the micro-kernel writes a full MR x NR scratch tile, this merges its rows x
// cols corner into C with alpha, beta and the bias.
void store_partial(const float* tile, int nr, int rows, int cols, float* c, int64_t ldc, float alpha, float beta,
                   const float* bias) {
  for (int i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < cols; ++j) {
      float v = alpha * tile[i * nr + j];
      if (beta != 0.0f) v += beta * row[j];
      if (bias) v += bias[j];
      row[j] = v;
    }
  }
}

// The depth of each packed block: k cut into blocks of equal depth near kc, up to 1.25 kc, so no
// block is a thin remainder (k = 784 at kc = 384: two blocks of 392, not 384 + 384 + 16, whose
// 16-deep block paid each tile's loads and stores of C for only 16 k steps).
int64_t balanced_depth(int64_t k, int64_t kc) {
  const int64_t blocks = std::max({int64_t(1), (k + kc / 2) / kc, (4 * k + 5 * kc - 1) / (5 * kc)});
  return (k + blocks - 1) / blocks;
}

// C[m0:m1, n0:n1] on the calling thread: the five loops around the micro-kernel.
void sgemm_rect(const Problem& P, const SgemmKernel& K, const SgemmBlocking& B, int64_t m0, int64_t m1, int64_t n0,
                int64_t n1) {
  thread_local PackBuffer a_buf, b_buf;
  const int mr = K.mr, nr = K.nr;
  const int64_t kc = balanced_depth(P.k, B.kc);
  float* ap = a_buf.get(round_up(std::min(B.mc, m1 - m0), mr) * kc);
  float* bp = b_buf.get(round_up(std::min(B.nc, n1 - n0), nr) * kc);
  alignas(64) float tile[32 * 32];
  for (int64_t jc = n0; jc < n1; jc += B.nc) {
    const int64_t nb = std::min(B.nc, n1 - jc);
    for (int64_t pc = 0; pc < P.k; pc += kc) {
      const int64_t kb = std::min(kc, P.k - pc);
      const float beta = pc == 0 ? P.beta : 1.0f;
      const bool last = pc + kb == P.k;
      pack_b(P, K, pc, kb, jc, nb, bp);
      for (int64_t ic = m0; ic < m1; ic += B.mc) {
        const int64_t mb = std::min(B.mc, m1 - ic);
        pack_a(P, K, ic, mb, pc, kb, ap);
        for (int64_t jr = 0; jr < nb; jr += nr) {
          const int cols = int(std::min<int64_t>(nr, nb - jr));
          const float* bias = last && P.bias ? P.bias + jc + jr : nullptr;
          const float* bpanel = bp + jr * kb;
          for (int64_t ir = 0; ir < mb; ir += mr) {
            const int rows = int(std::min<int64_t>(mr, mb - ir));
            float* c = P.c + (ic + ir) * P.ldc + jc + jr;
            const float* apanel = ap + ir * kb;
            // A micro-kernel that writes this tile straight into C: the full one, or the edge one.
            const SgemmTileFn direct = rows == mr && cols == nr ? K.tile
                                       : K.edge_tile                ? K.edge_tile(rows, cols)
                                                                    : nullptr;
            if (direct) {
              direct(kb, apanel, bpanel, c, P.ldc, P.alpha, beta, bias);
            } else {
              K.tile(kb, apanel, bpanel, tile, nr, 1.0f, 0.0f, nullptr);
              store_partial(tile, nr, rows, cols, c, P.ldc, P.alpha, beta, bias);
            }
          }
        }
        if (last) finish(P, ic, jc, mb, nb);
      }
    }
  }
}

// k == 0: C = beta * C + bias.
void scale_c(const Problem& P) {
  for (int64_t i = 0; i < P.m; ++i) {
    float* row = P.c + i * P.ldc;
    for (int64_t j = 0; j < P.n; ++j) {
      float v = P.beta != 0.0f ? P.beta * row[j] : 0.0f;
      row[j] = P.bias ? v + P.bias[j] : v;
    }
  }
}

}  // namespace

const SgemmKernel& sgemm_kernel(CpuIsa isa) {
#if defined(__x86_64__)
  if (isa == CpuIsa::Avx512) return kSgemmAvx512;
  if (isa == CpuIsa::Avx2) return kSgemmAvx2;
#endif
  return kSgemmPortable;
}

SgemmBlocking sgemm_blocking(const SgemmKernel& kernel) {
  const int64_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 512 << 10);
  const int64_t l3 = std::min<int64_t>(cache_bytes(_SC_LEVEL3_CACHE_SIZE, 8 << 20), 32 << 20);
  const int64_t f = int64_t(sizeof(float));
  SgemmBlocking b;
  b.kc = std::clamp<int64_t>(round_down(l2 / 8 / ((kernel.mr + kernel.nr) * f), 8), 64, 768);
  b.mc = std::clamp<int64_t>(round_down(l2 / 2 / (b.kc * f), kernel.mr), kernel.mr, 4096);
  b.nc = std::clamp<int64_t>(round_down(l3 / 2 / (b.kc * f), kernel.nr), kernel.nr, 4096);
  return b;
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias, int max_threads,
           const SgemmEpilogue* epilogue) {
  if (m <= 0 || n <= 0) return;
  const Problem P{trans_a, trans_b, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, bias, epilogue};
  if (k <= 0) {
    scale_c(P);
    finish(P, 0, 0, m, n);
    return;
  }
  const SgemmKernel& K = sgemm_kernel(active_isa());
  if (!trans_a && trans_b && n <= kSgemmDotMaxN && K.dot) {
    const int nt = m * n * k >= kSgemmThreadedWork ? int(std::min<int64_t>(std::max(max_threads, 1), m)) : 1;
    parallel_tasks(nt, [&](int64_t t) {
      const int64_t r0 = m * t / nt, r1 = m * (t + 1) / nt;
      K.dot(r1 - r0, n, k, alpha, a + r0 * lda, lda, b, ldb, beta, c + r0 * ldc, ldc, bias);
      if (r1 > r0) finish(P, r0, 0, r1 - r0, n);
    });
    return;
  }
  const SgemmBlocking B = sgemm_blocking(K);
  // Threads: a tm x tn grid over C in whole tiles, the longer side cut more often.
  const int64_t m_tiles = (m + K.mr - 1) / K.mr, n_tiles = (n + K.nr - 1) / K.nr;
  int threads = max_threads;
  if (m * n * k < kSgemmThreadedWork || in_parallel_region()) threads = 1;
  threads = int(std::min<int64_t>(threads, m_tiles * n_tiles));
  if (threads <= 1) {
    sgemm_rect(P, K, B, 0, m, 0, n);
    return;
  }
  int tm = 1;
  for (int d = 1; d <= threads; ++d)  // the divisor whose tiles per thread are closest to square
    if (threads % d == 0 && d <= m_tiles && threads / d <= n_tiles) {
      const double r = double(m_tiles) / d / (double(n_tiles) / (threads / d));
      const double best = double(m_tiles) / tm / (double(n_tiles) / (threads / tm));
      if (std::abs(std::log(r)) < std::abs(std::log(best)) || tm > m_tiles || threads / tm > n_tiles) tm = d;
    }
  const int tn = threads / tm;
  parallel_tasks(tm * tn, [&](int64_t t) {
    const int64_t ti = t / tn, tj = t % tn;
    const int64_t m0 = std::min(m, (m_tiles * ti / tm) * K.mr), m1 = std::min(m, (m_tiles * (ti + 1) / tm) * K.mr);
    const int64_t n0 = std::min(n, (n_tiles * tj / tn) * K.nr), n1 = std::min(n, (n_tiles * (tj + 1) / tn) * K.nr);
    if (m1 > m0 && n1 > n0) sgemm_rect(P, K, B, m0, m1, n0, n1);
  });
}

}  // namespace tandem::cpu
