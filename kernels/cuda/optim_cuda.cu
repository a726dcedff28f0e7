// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf, double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) { Backend::sgd_step(param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first_step); }
void CudaBackend::adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg, const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) { Backend::adam_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step); }

}  // namespace tandem
