// The linear family on the CPU. linear_forward: y[rows, out] = x[rows, in] w[out, in]^T + bias;
// in float32 the packed GEMM (kernels/cpu/gemm) adds the bias as each tile is stored, with no
// pass that copies the bias into y first; float64 composes the gemm kernel with a bias copy
// (linear_forward_by_gemm). linear_weight_grad: dw = g^T x and db = sum of g's rows, composed from
// the gemm and reduce kernels (linear_weight_grad_by_gemm in kernels/backend.cpp).
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/sgemm_packed.h"

namespace tandem {

void CpuBackend::linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias,
                                const TensorView& y) {
  if (x.dtype != DType::Float32) {
    linear_forward_by_gemm(*this, x, w, bias, y);
    return;
  }
  const int64_t rows = x.shape[0], in_f = x.shape[1], out_f = w.shape[0];
  cpu::sgemm(false, true, rows, out_f, in_f, 1.0f, x.ptr<float>(), in_f, w.ptr<float>(), in_f, 0.0f, y.ptr<float>(),
             out_f, bias ? bias->ptr<float>() : nullptr, cpu::max_threads());
}

void CpuBackend::linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw,
                                    const TensorView* db) {
  linear_weight_grad_by_gemm(*this, g, x, dw, db);
}

}  // namespace tandem
