// Row-major batched GEMM through Eigen. Eigen's GEMM is cache-blocked and vectorized for the
// build machine (-march=native). We do not use Eigen's own OpenMP parallel GEMM: its threads
// spin-wait on each other while packing shared blocks, which on a 2-vCPU VM made a small MLP
// step ~25x slower than one thread. Instead each thread computes an independent band of rows
// of C with a sequential Eigen GEMM (no synchronization until the region ends); batched small
// products run one matrix per thread.
#include <Eigen/Core>

#include "kernels/cpu/cpu_backend.h"

namespace tandem {

namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows [r0, r1) of C = alpha * op(A) op(B) + beta * C.
template <typename T>
void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
               int64_t r0, int64_t r1) {
  // A stored [m,k] (or [k,m] when ta), B stored [k,n] (or [n,k] when tb).
  Eigen::Map<const RowMat<T>> A(a, ta ? k : m, ta ? m : k);
  Eigen::Map<const RowMat<T>> B(b, tb ? n : k, tb ? k : n);
  auto C = Eigen::Map<RowMat<T>>(c, m, n).middleRows(r0, r1 - r0);
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (beta == T(0)) {
      C.noalias() = alpha * (lhs * rhs);
    } else {
      if (beta != T(1)) C *= beta;
      C.noalias() += alpha * (lhs * rhs);
    }
  };
  if (ta && tb) run(A.transpose().middleRows(r0, r1 - r0), B.transpose());
  else if (ta) run(A.transpose().middleRows(r0, r1 - r0), B);
  else if (tb) run(A.middleRows(r0, r1 - r0), B.transpose());
  else run(A.middleRows(r0, r1 - r0), B);
}

// Below this many multiply-adds a product stays on one thread.
constexpr int64_t kParallelGemmWork = int64_t(1) << 24;

template <typename T>
void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c) {
  const int threads = omp_get_max_threads();
  if (threads <= 1 || m * n * k < kParallelGemmWork || m < 2 * threads || omp_in_parallel()) {
    gemm_rows(ta, tb, m, n, k, alpha, a, b, beta, c, 0, m);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Bands of rows, multiples of 16 so Eigen's register blocks stay whole.
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t band = ((m + nt - 1) / nt + 15) / 16 * 16;
    const int64_t r0 = std::min<int64_t>(m, band * t), r1 = std::min<int64_t>(m, r0 + band);
    if (r1 > r0) gemm_rows(ta, tb, m, n, k, alpha, a, b, beta, c, r0, r1);
  }
}

}  // namespace

void CpuBackend::gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                      const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c,
                      int64_t stride_c, int64_t batch) {
  cpu::dispatch_float(dtype, "gemm", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* cp = static_cast<T*>(c);
    if (m == 0 || n == 0) return;
    if (k == 0) {  // empty sum: C = beta * C
      for (int64_t i = 0; i < batch; ++i) {
        Eigen::Map<RowMat<T>> C(cp + i * stride_c, m, n);
        if (beta == 0) C.setZero(); else C *= T(beta);
      }
      return;
    }
    const bool small = m * n * k < kParallelGemmWork;
#pragma omp parallel for schedule(static) if (batch > 1 && small)
    for (int64_t i = 0; i < batch; ++i)
      gemm_one<T>(trans_a, trans_b, m, n, k, T(alpha), ap + i * stride_a, bp + i * stride_b, T(beta), cp + i * stride_c);
  });
}

}  // namespace tandem
