// Row-major batched GEMM on the CPU. float32 runs the packed GEMM
// (kernels/cpu/gemm/: GotoBLAS-style packing, micro-kernels for AVX-512, AVX2 + FMA and portable
// code chosen by CPUID or TANDEM_CPU_ISA). float64 runs Eigen, the reference the tests compare
// against. Neither uses a library's own parallel GEMM: Eigen's threads spin-wait on each other
// while packing shared blocks, which on a 2-vCPU VM made a small MLP step ~25x slower than one
// thread. Instead each task of the thread pool (kernels/cpu/thread_pool.h) computes an
// independent rectangle (float32) or band of rows (float64) of C with no synchronization until
// the job ends; batched small products run one matrix per task.
#include <Eigen/Core>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/sgemm_packed.h"
#include "kernels/cpu/gemm_serial.h"

namespace tandem {

namespace {

// From this many multiply-adds a float64 product is cut into bands of rows over the threads.
constexpr int64_t kDgemmThreadedWork = int64_t(1) << 24;
// The products of a batch below this many multiply-adds each run whole on one thread, the batch
// split over the threads (no product's packing shared); from it on, one after another, each split.
constexpr int64_t kBatchProductThreadedWork = int64_t(1) << 24;

using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedD = Eigen::Map<const RowMatD, 0, Eigen::OuterStride<>>;

// Rows [r0, r1) of C = alpha * op(A) op(B) + beta * C in float64 through Eigen, operands with
// row strides (A stored [m,k] or [k,m] when ta, B stored [k,n] or [n,k] when tb).
void dgemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc, int64_t r0, int64_t r1) {
  StridedD A(a, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  StridedD B(b, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  auto C = Eigen::Map<RowMatD, 0, Eigen::OuterStride<>>(c, m, n, Eigen::OuterStride<>(ldc)).middleRows(r0, r1 - r0);
  if (k == 0) {  // empty sum: C = beta * C
    if (beta == 0.0) C.setZero(); else C *= beta;
    return;
  }
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (beta == 0.0) {
      C.noalias() = alpha * (lhs * rhs);
    } else {
      if (beta != 1.0) C *= beta;
      C.noalias() += alpha * (lhs * rhs);
    }
  };
  if (ta && tb) run(A.transpose().middleRows(r0, r1 - r0), B.transpose());
  else if (ta) run(A.transpose().middleRows(r0, r1 - r0), B);
  else if (tb) run(A.middleRows(r0, r1 - r0), B.transpose());
  else run(A.middleRows(r0, r1 - r0), B);
}

void dgemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
               double beta, double* c) {
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  const int threads = cpu::max_threads();
  if (threads <= 1 || m * n * k < kDgemmThreadedWork || m < 2 * threads || cpu::in_parallel_region()) {
    dgemm_rows(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n, 0, m);
    return;
  }
  // Bands of rows, multiples of 16 so Eigen's register blocks stay whole.
  const int64_t band = ((m + threads - 1) / threads + 15) / 16 * 16;
  cpu::parallel_tasks(threads, [&](int64_t t) {
    const int64_t r0 = std::min<int64_t>(m, band * t), r1 = std::min<int64_t>(m, r0 + band);
    if (r1 > r0) dgemm_rows(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n, r0, r1);
  });
}

void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, const float* b,
              double beta, float* c, int threads) {
  cpu::sgemm(ta, tb, m, n, k, float(alpha), a, ta ? m : k, b, tb ? k : n, float(beta), c, n, nullptr, threads);
}

void gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
              double beta, double* c, int) {
  dgemm_one(ta, tb, m, n, k, alpha, a, b, beta, c);
}

}  // namespace

void cpu::gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr, 1);
}

void cpu::gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                      int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  dgemm_rows(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0, m);
}

void CpuBackend::gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                      const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c,
                      int64_t stride_c, int64_t batch) {
  cpu::dispatch_float(dtype, "gemm", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* cp = static_cast<T*>(c);
    if (m == 0 || n == 0) return;
    // Small products of a batch run one per thread; large ones one after another, each threaded.
    const bool per_thread = batch > 1 && m * n * k < kBatchProductThreadedWork;
    if (std::is_same_v<T, float>) cpu::active_isa();  // a bad TANDEM_CPU_ISA throws here, not in a task
    cpu::parallel_loop(batch, per_thread, [&](int64_t i) {
      gemm_one(trans_a, trans_b, m, n, k, alpha, ap + i * stride_a, bp + i * stride_b, beta, cp + i * stride_c,
               per_thread ? 1 : cpu::max_threads());
    });
  });
}

}  // namespace tandem
