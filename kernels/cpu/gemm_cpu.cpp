// Row-major batched GEMM through Eigen. Eigen's GEMM is cache-blocked, vectorized for the
// build machine (-march=native) and parallel over OpenMP threads for large products; small
// batched products run one per thread instead (Eigen stays sequential inside a parallel region).
#include <Eigen/Core>

#include "kernels/cpu/cpu_backend.h"

namespace tandem {

namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c) {
  // A stored [m,k] (or [k,m] when ta), B stored [k,n] (or [n,k] when tb).
  Eigen::Map<const RowMat<T>> A(a, ta ? k : m, ta ? m : k);
  Eigen::Map<const RowMat<T>> B(b, tb ? n : k, tb ? k : n);
  Eigen::Map<RowMat<T>> C(c, m, n);
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (beta == T(0)) {
      C.noalias() = alpha * (lhs * rhs);
    } else {
      if (beta != T(1)) C *= beta;
      C.noalias() += alpha * (lhs * rhs);
    }
  };
  if (ta && tb) run(A.transpose(), B.transpose());
  else if (ta) run(A.transpose(), B);
  else if (tb) run(A, B.transpose());
  else run(A, B);
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
    const bool small = m * n * k < (int64_t(1) << 18);
#pragma omp parallel for schedule(static) if (batch > 1 && small)
    for (int64_t i = 0; i < batch; ++i)
      gemm_one<T>(trans_a, trans_b, m, n, k, T(alpha), ap + i * stride_a, bp + i * stride_b, T(beta), cp + i * stride_c);
  });
}

}  // namespace tandem
