// Backend: the dispatch seam between op front ends (tensor/ops) and kernels.
// One pure virtual method per kernel, generated from the kernel list (kernels/kernel_list.def,
// which also says how to add one); the CPU backend (kernels/cpu, Eigen) is the reference, the
// CUDA backend (kernels/cuda) implements the same signatures. An op front end calls
// backend_for(device).<kernel>(...); nothing outside this seam uses #ifdef.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/device.h"
#include "kernels/tensor_view.h"

namespace tandem {

enum class UnaryOp : uint8_t {
  Neg, Exp, Log, Sqrt, Abs, Relu, Sigmoid, Tanh, Gelu, GeluTanh, Pow /*scalar exponent*/,
  Clamp, Affine /*alpha*x + beta*/, Reciprocal /*alpha / x*/
};
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge
};
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min };
// The activation a linear layer may apply as part of its kernel (linear_forward).
enum class LinearActivation : uint8_t { None, Relu, GeluTanh };
// The unary op computing `act` (not None).
UnaryOp unary_op_of(LinearActivation act);

struct UnaryParams {
  double scalar = 0;               // Pow: exponent
  double lo = -1e308, hi = 1e308;  // Clamp bounds
  double alpha = 1, beta = 0;      // Affine, Reciprocal
};

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};
struct Pool2dParams {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // avg pool only
};

// The attention kernels' parameters (scaled-dot-product attention; tensor/ops/attention.cpp).
// Query row i of a head attends key j when !causal, or when j <= i + (Tk - Tq) (the causal mask
// aligned bottom-right, so a query row appended to a KV cache sees every cached key). Dropout
// on the probabilities: element (b, h, i, j) is kept when philox::uniform01(bits(seed, offset,
// ((b * H + h) * Tq + i) * Tk + j)) >= dropout_p, and kept ones are scaled by 1 / (1 - p).
struct AttentionParams {
  double scale = 1.0;  // multiplies q k^T (1/sqrt(D) from the op)
  bool causal = true;
  double dropout_p = 0.0;
  uint64_t seed = 0, offset = 0;  // the Philox draw of the dropout mask
};

// Every method of Backend is pure and generated from kernels/kernel_list.def, which holds each
// kernel's signature and contract; each backend declares its overrides from the same list.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual const char* name() const = 0;

#define TANDEM_BACKEND_MEMORY(ret, name, params, args) virtual ret name params = 0;
#define TANDEM_KERNEL(name, params, args) virtual void name params = 0;
#include "kernels/kernel_list.def"
};

// Kernels composed from other kernels, for backends without a fused version (their contracts
// are the list's linear_forward, linear_activation_backward, linear_weight_grad, sgd_step_multi
// and adam_step_multi).
// linear_forward_by_gemm: the bias copied into every row of pre (or y without one), gemm adding
// x w^T, then unary(act) into y.
void linear_forward_by_gemm(Backend& backend, const TensorView& x, const TensorView& w, const TensorView* bias,
                            const TensorView& y, LinearActivation act, const TensorView* pre);
// linear_activation_backward_by_kernels: dz by unary_backward, db by reduce(Sum).
void linear_activation_backward_by_kernels(Backend& backend, LinearActivation act, const TensorView& g,
                                           const TensorView& y, const TensorView* pre, const TensorView& dz,
                                           const TensorView* db);
// linear_weight_grad_by_gemm: dw by gemm, db by reduce(Sum) (fill 0 when there are no rows).
void linear_weight_grad_by_gemm(Backend& backend, const TensorView& g, const TensorView& x, const TensorView& dw,
                                const TensorView* db);
// One single-tensor update per list entry, in list order (ShapeError when the lists' lengths differ).
void sgd_step_each(Backend& backend, const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                   const std::vector<TensorView>& momentum_bufs, double lr, double momentum, double dampening,
                   double weight_decay, bool nesterov, bool first_step);
void adam_step_each(Backend& backend, const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                    const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs, double lr,
                    double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step);

// The backend for a device type. For CUDA in a build without CUDA, throws DeviceError
// ("Tandem was built without CUDA ...").
Backend& backend_for(DeviceType type);
// Whether float32 GEMMs and convolutions on GPUs may use TF32 tensor cores (10-bit mantissa
// products). Off by default, as in PyTorch 1.12+ for matmul: "32-true" means float32 results;
// the Trainer's --trainer.allow_tf32 turns it on.
void set_allow_tf32(bool allow);
bool allow_tf32();
inline Backend& backend_for(const Device& d) { return backend_for(d.type); }
// Makes backend_for(type) return `backend` (nullptr: the built-in one again) and returns the
// override it replaces (nullptr when there was none). For tests: the op harness wraps the CPU
// backend in a decorator that records which kernels its cases reach.
Backend* override_backend_for(DeviceType type, Backend* backend);
bool cuda_compiled();

}  // namespace tandem
