// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) { Backend::batch_norm_train(x, outer, c, inner, gamma, beta, eps, y, save_mean, save_invstd); }
void CudaBackend::batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView& mean, const TensorView& invstd, const TensorView* gamma, const TensorView* beta, const TensorView& y) { Backend::batch_norm_apply(x, outer, c, inner, mean, invstd, gamma, beta, y); }
void CudaBackend::batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c, int64_t inner, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) { Backend::batch_norm_backward(x, gy, outer, c, inner, save_mean, save_invstd, gamma, gx, ggamma, gbeta); }
void CudaBackend::layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) { Backend::layer_norm(x, rows, cols, gamma, beta, eps, y, save_mean, save_invstd); }
void CudaBackend::layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) { Backend::layer_norm_backward(x, gy, rows, cols, save_mean, save_invstd, gamma, gx, ggamma, gbeta); }

}  // namespace tandem
