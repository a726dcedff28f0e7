// The linear family on the CPU: y = x w^T + bias and the weight gradients, composed from the
// gemm and reduce kernels (linear_forward_by_gemm, linear_weight_grad_by_gemm in
// kernels/backend.cpp); the CPU has no fused version.
#include "kernels/cpu/cpu_backend.h"

namespace tandem {

void CpuBackend::linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias,
                                const TensorView& y) {
  linear_forward_by_gemm(*this, x, w, bias, y);
}

void CpuBackend::linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw,
                                    const TensorView* db) {
  linear_weight_grad_by_gemm(*this, g, x, dw, db);
}

}  // namespace tandem
