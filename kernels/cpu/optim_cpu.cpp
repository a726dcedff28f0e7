// Optimizer updates with PyTorch's formulas (torch.optim.SGD / Adam / AdamW, non-foreach,
// non-amsgrad), one pass over each parameter; the multi-tensor forms run the single-tensor
// update once per list entry (sgd_step_each / adam_step_each).
#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace tandem {

void CpuBackend::sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf,
                          double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                          bool first_step) {
  cpu::dispatch_float(param.dtype, "sgd_step", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    T* p = param.ptr<T>();
    const T* g = grad.ptr<T>();
    T* buf = momentum_buf ? momentum_buf->ptr<T>() : nullptr;
    const int64_t n = param.numel();
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      T d = g[i] + T(weight_decay) * p[i];
      if (buf) {
        buf[i] = first_step ? d : T(momentum) * buf[i] + T(1 - dampening) * d;
        d = nesterov ? d + T(momentum) * buf[i] : buf[i];
      }
      p[i] -= T(lr) * d;
    }
  });
}

void CpuBackend::adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                           const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps,
                           double weight_decay, bool decoupled, int64_t step) {
  cpu::dispatch_float(param.dtype, "adam_step", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    T* p = param.ptr<T>();
    const T* g = grad.ptr<T>();
    T* m = exp_avg.ptr<T>();
    T* v = exp_avg_sq.ptr<T>();
    const int64_t n = param.numel();
    const double bc1 = 1 - std::pow(beta1, double(step));
    const double bc2 = 1 - std::pow(beta2, double(step));
    const T step_size = T(lr / bc1);
    const T bc2_sqrt = T(std::sqrt(bc2));
    const T decay = T(decoupled ? 1 - lr * weight_decay : 1);
    const T l2 = T(decoupled ? 0 : weight_decay);
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      p[i] *= decay;
      const T gi = g[i] + l2 * p[i];
      m[i] = T(beta1) * m[i] + T(1 - beta1) * gi;
      v[i] = T(beta2) * v[i] + T(1 - beta2) * gi * gi;
      p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + T(eps));
    }
  });
}

void CpuBackend::sgd_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                                const std::vector<TensorView>& momentum_bufs, double lr, double momentum,
                                double dampening, double weight_decay, bool nesterov, bool first_step) {
  sgd_step_each(*this, params, grads, momentum_bufs, lr, momentum, dampening, weight_decay, nesterov, first_step);
}

void CpuBackend::adam_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                                 const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                                 double lr, double beta1, double beta2, double eps, double weight_decay,
                                 bool decoupled, int64_t step) {
  adam_step_each(*this, params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, decoupled, step);
}

}  // namespace tandem
