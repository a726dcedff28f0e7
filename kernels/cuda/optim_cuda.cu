// Optimizer updates (Backend::sgd_step / adam_step and their multi-tensor forms) on CUDA.
//
// One kernel serves every case: a list of up to kMaxTensors tensors, each cut into chunks of
// kChunk elements, one block per chunk. The list (pointers, sizes, first block of each
// tensor) travels by value as the kernel's argument, so a whole parameter group is updated
// in ceil(#tensors / kMaxTensors) launches with no host-to-device copy and no lifetime
// question; a block finds its tensor by binary search over the first-block table.
// Each element is updated in the accumulation type (float for half types, else T) with the
// CPU's operation order (kernels/cpu/optim_cpu.cpp), so float32 results agree with the CPU
// to the last bit or, where the two compilers fuse a multiply-add differently, to ~1 ulp.
// Within a chunk, 4-element vectors are used when every operand of that tensor is aligned
// to 4 elements (checked per tensor on the device; chunk starts are multiples of 4).
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace tandem {
namespace {

constexpr int kOptimThreads = 256;
constexpr int64_t kChunk = 65536;  // elements per block; a multiple of 4

// Operand 0 is the parameter, operand 1 the gradient (read only), the rest state tensors.
template <int K>
struct TensorList {
  // As many tensors as keep the kernel's arguments within the classic 4 KB limit.
  static constexpr int kMaxTensors = (3800 - 8) / (8 * K + 8 + 4);
  void* data[K][kMaxTensors];
  int64_t numel[kMaxTensors];
  int32_t first_block[kMaxTensors + 1];  // tensor t owns blocks [first_block[t], first_block[t+1])
  int32_t count;
};

template <typename T> struct alignas(sizeof(T) * 4) Vec4 { T v[4]; };

__device__ __forceinline__ float dev_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double dev_sqrt(double v) { return sqrt(v); }

// p, g, buf as torch.optim.SGD; buf only when K == 3.
template <typename A, int K>
struct SgdUpdate {
  A lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, first_step;
  __device__ __forceinline__ void operator()(A (&x)[K]) const {
    A d = x[1] + weight_decay * x[0];
    if constexpr (K == 3) {
      x[2] = first_step ? d : momentum * x[2] + one_minus_dampening * d;
      d = nesterov ? d + momentum * x[2] : x[2];
    }
    x[0] -= lr * d;
  }
};

// p, g, m, v as torch.optim.Adam / AdamW (decay = 1 - lr*wd for AdamW, l2 = wd for Adam).
template <typename A>
struct AdamUpdate {
  A decay, l2, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
  __device__ __forceinline__ void operator()(A (&x)[4]) const {
    x[0] *= decay;
    const A g = x[1] + l2 * x[0];
    x[2] = beta1 * x[2] + one_minus_beta1 * g;
    x[3] = beta2 * x[3] + one_minus_beta2 * g * g;
    x[0] -= step_size * x[2] / (dev_sqrt(x[3]) / bc2_sqrt + eps);
  }
};

template <typename T, int K, typename Update>
__global__ void __launch_bounds__(kOptimThreads) multi_tensor_update_kernel(const TensorList<K> list, const Update update) {
  using A = cuda::acc_t<T>;
  const int32_t block = int32_t(blockIdx.x);
  int lo = 0, hi = list.count - 1;  // last tensor whose first block is <= this block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (list.first_block[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  const int t = lo;
  const int64_t n = list.numel[t];
  const int64_t begin = int64_t(block - list.first_block[t]) * kChunk;
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
  T* ptr[K];
  uintptr_t address_bits = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    ptr[k] = static_cast<T*>(list.data[k][t]);
    address_bits |= reinterpret_cast<uintptr_t>(ptr[k]);
  }
  int64_t scalar_begin = begin;
  if (address_bits % sizeof(Vec4<T>) == 0) {
    const int64_t vectors = (end - begin) / 4;
    for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
      const int64_t i = begin + 4 * v;
      Vec4<T> in[K];
#pragma unroll
      for (int k = 0; k < K; ++k) in[k] = *reinterpret_cast<const Vec4<T>*>(ptr[k] + i);
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        A x[K];
#pragma unroll
        for (int k = 0; k < K; ++k) x[k] = cuda::to_acc(in[k].v[lane]);
        update(x);
#pragma unroll
        for (int k = 0; k < K; ++k)
          if (k != 1) in[k].v[lane] = cuda::from_acc<T>(x[k]);
      }
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (k != 1) *reinterpret_cast<Vec4<T>*>(ptr[k] + i) = in[k];
    }
    scalar_begin = begin + 4 * vectors;
  }
  for (int64_t i = scalar_begin + threadIdx.x; i < end; i += blockDim.x) {
    A x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) x[k] = cuda::to_acc(ptr[k][i]);
    update(x);
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (k != 1) ptr[k][i] = cuda::from_acc<T>(x[k]);
  }
}

// Launches the update over tensors[i] (K operand pointers, numel[i] elements each), packing
// as many tensors per launch as the argument table holds. Empty tensors are skipped.
template <typename T, int K, typename Update>
void launch_multi_tensor(const std::vector<std::array<void*, K>>& tensors, const std::vector<int64_t>& numel,
                         const Update& update, const char* kernel) {
  static_assert(sizeof(TensorList<K>) + sizeof(Update) <= 4000, "kernel arguments above the 4 KB limit");
  TensorList<K> list;
  list.count = 0;
  int64_t blocks = 0;
  auto flush = [&] {
    if (list.count == 0) return;
    list.first_block[list.count] = int32_t(blocks);
    cuda::launch<multi_tensor_update_kernel<T, K, Update>>(unsigned(blocks), kOptimThreads, 0, cuda::current_stream(),
                                                           list, update);
    TANDEM_CUDA_CHECK_LAUNCH("multi_tensor_update_kernel");
    list.count = 0;
    blocks = 0;
  };
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = numel[i];
    if (n == 0) continue;
    const int64_t need = (n + kChunk - 1) / kChunk;
    if (need > kMaxBlocks)
      throw ShapeError(std::string(kernel) + ": a tensor of " + std::to_string(n) + " elements is too large");
    if (list.count == TensorList<K>::kMaxTensors || blocks + need > kMaxBlocks) flush();
    for (int k = 0; k < K; ++k) list.data[k][list.count] = tensors[i][size_t(k)];
    list.numel[list.count] = n;
    list.first_block[list.count] = int32_t(blocks);
    blocks += need;
    ++list.count;
  }
  flush();
}

void check_same_layout(const char* kernel, const TensorView& param, const TensorView& other, const char* what) {
  if (other.dtype != param.dtype || other.numel() != param.numel())
    throw ShapeError(std::string(kernel) + ": " + what + " (" + dtype_name(other.dtype) + ", " +
                     std::to_string(other.numel()) + " elements) does not match its parameter (" +
                     dtype_name(param.dtype) + ", " + std::to_string(param.numel()) + " elements)");
}

bool one_dtype(const std::vector<TensorView>& params) {
  for (const TensorView& p : params)
    if (p.dtype != params[0].dtype) return false;
  return true;
}

void run_sgd(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
             const std::vector<TensorView>& bufs, double lr, double momentum, double dampening, double weight_decay,
             bool nesterov, bool first_step) {
  const char* kernel = "sgd_step";
  const bool has_buf = !bufs.empty();
  std::vector<int64_t> numel(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    check_same_layout(kernel, params[i], grads[i], "gradient");
    if (has_buf) check_same_layout(kernel, params[i], bufs[i], "momentum buffer");
    numel[i] = params[i].numel();
  }
  cuda::dispatch_float(params[0].dtype, kernel, [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    using A = cuda::acc_t<T>;
    if (has_buf) {
      std::vector<std::array<void*, 3>> ptrs(params.size());
      for (size_t i = 0; i < params.size(); ++i) ptrs[i] = {params[i].data, grads[i].data, bufs[i].data};
      SgdUpdate<A, 3> u{A(lr), A(momentum), A(1 - dampening), A(weight_decay), nesterov, first_step};
      launch_multi_tensor<T, 3>(ptrs, numel, u, kernel);
    } else {
      std::vector<std::array<void*, 2>> ptrs(params.size());
      for (size_t i = 0; i < params.size(); ++i) ptrs[i] = {params[i].data, grads[i].data};
      SgdUpdate<A, 2> u{A(lr), A(momentum), A(1 - dampening), A(weight_decay), nesterov, first_step};
      launch_multi_tensor<T, 2>(ptrs, numel, u, kernel);
    }
  });
}

void run_adam(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
              const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs, double lr,
              double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) {
  const char* kernel = "adam_step";
  std::vector<int64_t> numel(params.size());
  std::vector<std::array<void*, 4>> ptrs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    check_same_layout(kernel, params[i], grads[i], "gradient");
    check_same_layout(kernel, params[i], exp_avgs[i], "exp_avg");
    check_same_layout(kernel, params[i], exp_avg_sqs[i], "exp_avg_sq");
    numel[i] = params[i].numel();
    ptrs[i] = {params[i].data, grads[i].data, exp_avgs[i].data, exp_avg_sqs[i].data};
  }
  // The CPU's host-side constants, rounded to the accumulation type.
  const double bc1 = 1 - std::pow(beta1, double(step));
  const double bc2 = 1 - std::pow(beta2, double(step));
  cuda::dispatch_float(params[0].dtype, kernel, [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    using A = cuda::acc_t<T>;
    AdamUpdate<A> u{A(decoupled ? 1 - lr * weight_decay : 1), A(decoupled ? 0 : weight_decay), A(beta1),
                    A(1 - beta1), A(beta2), A(1 - beta2), A(lr / bc1), A(std::sqrt(bc2)), A(eps)};
    launch_multi_tensor<T, 4>(ptrs, numel, u, kernel);
  });
}

}  // namespace

void CudaBackend::sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf, double lr,
                           double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) {
  std::vector<TensorView> bufs;
  if (momentum_buf) bufs.push_back(*momentum_buf);
  run_sgd({param}, {grad}, bufs, lr, momentum, dampening, weight_decay, nesterov, first_step);
}

void CudaBackend::adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                            const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool decoupled, int64_t step) {
  run_adam({param}, {grad}, {exp_avg}, {exp_avg_sq}, lr, beta1, beta2, eps, weight_decay, decoupled, step);
}

void CudaBackend::sgd_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                                 const std::vector<TensorView>& momentum_bufs, double lr, double momentum,
                                 double dampening, double weight_decay, bool nesterov, bool first_step) {
  const bool lists_match = grads.size() == params.size() &&
                           (momentum_bufs.empty() || momentum_bufs.size() == params.size());
  if (!lists_match || !one_dtype(params))  // sgd_step_each checks the lists and updates one tensor at a time
    return sgd_step_each(*this, params, grads, momentum_bufs, lr, momentum, dampening, weight_decay, nesterov,
                         first_step);
  if (params.empty()) return;
  run_sgd(params, grads, momentum_bufs, lr, momentum, dampening, weight_decay, nesterov, first_step);
}

void CudaBackend::adam_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                                  const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                                  double lr, double beta1, double beta2, double eps, double weight_decay,
                                  bool decoupled, int64_t step) {
  const bool lists_match = grads.size() == params.size() && exp_avgs.size() == params.size() &&
                           exp_avg_sqs.size() == params.size();
  if (!lists_match || !one_dtype(params))
    return adam_step_each(*this, params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay,
                          decoupled, step);
  if (params.empty()) return;
  run_adam(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, decoupled, step);
}

}  // namespace tandem
