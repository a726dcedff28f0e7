// Autocast: the op-level half of mixed precision ("bf16-mixed", "16-mixed"), as torch.autocast.
// Inside an autocast::Guard(dtype), on CUDA tensors:
//   - matmul, linear and conv2d run in the low dtype (bfloat16 or float16): float32 operands are
//     cast on the way in (the cast is differentiable, so float32 master weights get float32
//     gradients), and the output stays in the low dtype;
//   - softmax, log_softmax, cross_entropy, nll_loss, mse_loss, batch_norm and layer_norm run in
//     float32: low-precision inputs are cast up first (range and accumulation need it);
//   - add, sub, mul and div of a low-precision and a float32 operand run in float32 (PyTorch's
//     type promotion; outside autocast mixing dtypes stays a DTypeError);
//   - everything else runs in its input's dtype.
// On CPU tensors under bfloat16 autocast (torch's CPU autocast is bfloat16 only), matmul, linear
// and conv2d see their float32 operands rounded to bfloat16 and round their output to bfloat16:
// bfloat16 inputs, float32 accumulation, bfloat16 output, as torch's CPU bf16 GEMM. The CPU
// backend has no bfloat16 arithmetic, so the rounded values stay in float32 tensors and the ops
// after them compute in float32 (torch would run them in bfloat16). The rounding is the pair of
// casts to(bfloat16).to(float32), so gradients flowing back through it are rounded too.
// Float64 is never touched. The state is per thread; Guards nest and restore the previous state.
#pragma once
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace tandem::autocast {

class Guard {
 public:
  // low: DType::BFloat16 or DType::Float16; nullopt turns autocast off inside the scope.
  explicit Guard(std::optional<DType> low);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  std::optional<DType> previous_;
};

// The low dtype while autocast is on in this thread.
std::optional<DType> low_dtype();

// True when an op of the low-precision list must cast: autocast is on and one of the defined
// operands is a CUDA float32/float16/bfloat16 tensor not already in the low dtype.
bool should_lower(std::initializer_list<const Tensor*> operands);
// t in the low dtype (undefined and non-float tensors pass through).
Tensor lower(const Tensor& t);

// True when an op of the low-precision list runs on the CPU rounded to bfloat16: autocast is
// bfloat16 and one of the defined operands is a CPU float32 tensor.
bool should_round_on_host(std::initializer_list<const Tensor*> operands);
// A CPU float32 tensor's values rounded to bfloat16 (differentiable); other tensors pass through.
Tensor round_to_bfloat16(const Tensor& t);

// True when an op of the float32 list gets a CUDA float16/bfloat16 input under autocast.
bool should_raise(const Tensor& t);
Tensor raise(const Tensor& t);  // t in float32 when should_raise(t), else t

// For binary arithmetic: both operands in float32 when autocast is on and one is a CUDA half
// type while the other is float32; nullopt otherwise.
std::optional<std::pair<Tensor, Tensor>> promoted(const Tensor& a, const Tensor& b);

}  // namespace tandem::autocast
