// Optimizer updates with PyTorch's formulas (torch.optim.SGD / Adam / AdamW, non-foreach,
// non-amsgrad), one pass over each parameter. SGD's multi-tensor form runs the single-tensor
// update once per list entry (sgd_step_each). Adam's runs the whole list as one job on the
// thread pool, float32 vectorized (optim_adam_vector.h), with the same bits as the
// single-tensor kernel, which is the same code on a list of one.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/optim_adam_vector.h"

namespace tandem {

namespace {

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  int64_t step;
};

// Elements per block: the unit a job hands out, a multiple of every vector width, so whether an
// element runs in a full or a masked vector depends only on its index in its tensor (results do
// not depend on the thread count, nor on a tensor being updated alone or in a list).
constexpr int64_t kAdamBlock = 4096;

// fp-contract=off, as in the vector paths (optim_adam_vector.cpp): built for a CPU with FMA
// (TANDEM_NATIVE_ARCH), the compiler would otherwise fuse the multiply-adds and change the bits.
template <typename T>
__attribute__((optimize("fp-contract=off"))) void adam_scalar(T* p, const T* g, T* m, T* v, int64_t n,
                                                              const AdamHyper& h) {
  const double bc1 = 1 - std::pow(h.beta1, double(h.step));
  const double bc2 = 1 - std::pow(h.beta2, double(h.step));
  const T step_size = T(h.lr / bc1);
  const T bc2_sqrt = T(std::sqrt(bc2));
  const T decay = T(h.decoupled ? 1 - h.lr * h.weight_decay : 1);
  const T l2 = T(h.decoupled ? 0 : h.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    const T gi = g[i] + l2 * p[i];
    m[i] = T(h.beta1) * m[i] + T(1 - h.beta1) * gi;
    v[i] = T(h.beta2) * v[i] + T(1 - h.beta2) * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + T(h.eps));
  }
}

cpu::AdamCoefficients adam_coefficients(const AdamHyper& h) {
  return {float(h.decoupled ? 1 - h.lr * h.weight_decay : 1), float(h.decoupled ? 0 : h.weight_decay),
          float(h.beta1), float(1 - h.beta1), float(h.beta2), float(1 - h.beta2),
          float(h.lr / (1 - std::pow(h.beta1, double(h.step)))), float(std::sqrt(1 - std::pow(h.beta2, double(h.step)))),
          float(h.eps)};
}

// Adam over `count` tensors as one job: every tensor's blocks in one sequence, cut into one run
// of blocks per thread (a run may span tensors); float32 in AVX-512 or AVX2 registers.
template <typename T>
void adam_lists_typed(const TensorView* params, const TensorView* grads, const TensorView* ms, const TensorView* vs,
                      size_t count, const AdamHyper& h) {
  thread_local std::vector<int64_t> first_block_of;  // kept between steps: no allocation per step
  std::vector<int64_t>& first = first_block_of;      // this thread's, for the tasks on other threads
  first.resize(count + 1);
  first[0] = 0;
  for (size_t i = 0; i < count; ++i) first[i + 1] = first[i] + (params[i].numel() + kAdamBlock - 1) / kAdamBlock;
  cpu::CpuIsa isa = cpu::CpuIsa::Portable;
  if constexpr (std::is_same_v<T, float>) isa = cpu::active_isa();
  const cpu::AdamCoefficients c = adam_coefficients(h);
  auto update = [&](size_t i, int64_t e0, int64_t e1) {
    T* p = params[i].ptr<T>() + e0;
    const T* g = grads[i].ptr<T>() + e0;
    T* m = ms[i].ptr<T>() + e0;
    T* v = vs[i].ptr<T>() + e0;
    if constexpr (std::is_same_v<T, float>) {
      if (isa == cpu::CpuIsa::Avx512) return cpu::adam_update_avx512(p, g, m, v, e1 - e0, c);
      if (isa == cpu::CpuIsa::Avx2) return cpu::adam_update_avx2(p, g, m, v, e1 - e0, c);
    }
    adam_scalar<T>(p, g, m, v, e1 - e0, h);
  };
  cpu::parallel_for(first[count], cpu::kParallelGrain / kAdamBlock, [&](int64_t b0, int64_t b1) {
    size_t i = size_t(std::upper_bound(first.begin(), first.end(), b0) - first.begin()) - 1;
    for (int64_t b = b0; b < b1; b = first[++i]) {
      while (first[i + 1] <= b) ++i;  // skip empty tensors
      const int64_t n = params[i].numel(), end = std::min(b1, first[i + 1]);
      update(i, (b - first[i]) * kAdamBlock, std::min(n, (end - first[i]) * kAdamBlock));
    }
  });
}

void adam_lists(const TensorView* params, const TensorView* grads, const TensorView* ms, const TensorView* vs,
                size_t count, const AdamHyper& h) {
  if (count == 0) return;
  cpu::dispatch_float(params[0].dtype, "adam_step", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    adam_lists_typed<T>(params, grads, ms, vs, count, h);
  });
}

void check_lists(const char* kernel, size_t n, std::initializer_list<size_t> sizes) {
  for (size_t s : sizes)
    if (s != n)
      throw ShapeError(std::string(kernel) + ": every list must have one entry per parameter (" +
                       std::to_string(n) + "), got a list of " + std::to_string(s));
}

}  // namespace

void CpuBackend::sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf,
                          double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                          bool first_step) {
  cpu::dispatch_float(param.dtype, "sgd_step", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    T* p = param.ptr<T>();
    const T* g = grad.ptr<T>();
    T* buf = momentum_buf ? momentum_buf->ptr<T>() : nullptr;
    const int64_t n = param.numel();
    cpu::parallel_loop(n, n >= cpu::kParallelGrain, [&](int64_t i) {
      T d = g[i] + T(weight_decay) * p[i];
      if (buf) {
        buf[i] = first_step ? d : T(momentum) * buf[i] + T(1 - dampening) * d;
        d = nesterov ? d + T(momentum) * buf[i] : buf[i];
      }
      p[i] -= T(lr) * d;
    });
  });
}

void CpuBackend::adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                           const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps,
                           double weight_decay, bool decoupled, int64_t step) {
  const AdamHyper h{lr, beta1, beta2, eps, weight_decay, decoupled, step};
  adam_lists(&param, &grad, &exp_avg, &exp_avg_sq, 1, h);
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
  check_lists("adam_step_multi", params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size()});
  const AdamHyper h{lr, beta1, beta2, eps, weight_decay, decoupled, step};
  adam_lists(params.data(), grads.data(), exp_avgs.data(), exp_avg_sqs.data(), params.size(), h);
}

}  // namespace tandem
