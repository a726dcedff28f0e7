// gemm_lt.cuh's lt_matmul in the emulation build (dtype_info is gemm_cuda.cu's): the products
// cuBLASLt would compute, by the CPU backend's GEMM on the same memory (see library_on_cpu.h).
// The bias epilogue adds bias[j] to every row before the single rounding, as cuBLASLt's does; it
// never falls back (lt_matmul returns true). Float32 computes in float32 whatever allow_tf32().
#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/emulation/library_on_cpu.h"
#include "kernels/cuda/gemm_lt.cuh"

namespace tandem {

bool gemm_lt::lt_matmul(DType dtype, const DTypeInfo&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta,
                        void* c, int64_t stride_c, int64_t batch, Epilogue epilogue, const void* bias) {
  const bool fused = epilogue != Epilogue::None;
  if (fused && (bias == nullptr || batch != 1 || beta != 0))
    throw DeviceError("gemm: the bias epilogue takes one product, a bias pointer and beta = 0");
  // Elements each operand spans over the batch (a stride of 0 repeats one matrix).
  const auto span = [=](int64_t stride, int64_t per_matrix) { return (batch - 1) * stride + per_matrix; };
  emu::on_compute_stream("cublasLtMatmul", [=] {
    emu::FloatOperand fa(a, dtype, span(stride_a, m * k)), fb(b, dtype, span(stride_b, k * n));
    emu::FloatOperand fc(c, dtype, span(stride_c, m * n));
    cpu_backend().gemm(fa.compute_dtype(), trans_a, trans_b, m, n, k, alpha, fa.data(), stride_a, fb.data(), stride_b,
                       beta, fc.data(), stride_c, batch);
    if (fused) {
      emu::FloatOperand fbias(bias, dtype, n);
      const TensorView out = fc.shaped({m, n});
      const TensorView row = fbias.shaped({1, n});
      cpu_backend().binary(BinaryOp::Add, out, TensorView{row.data, row.dtype, {m, n}, {0, 1}}, out);
    }
    fc.store();
  });
  return true;
}

}  // namespace tandem
