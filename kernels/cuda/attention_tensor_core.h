// The tensor-core attention kernels (attention_tensor_core.cu): which problems they take, and the
// two entry points CudaBackend's attention calls first. Each returns false, launching nothing,
// for a problem they do not take; the CUDA-core kernels (attention_cuda.cu) then run it.
#pragma once
#include <initializer_list>

#include "kernels/backend.h"
#include "kernels/tensor_view.h"

namespace tandem::cuda {

// bfloat16 or float16, head size 32 or 64, no dropout, at most 65535 batch x heads, and every
// operand 16-byte aligned with its first three strides multiples of 8 elements (stride 1 on D).
// The first operand is q; the others must share its dtype.
bool attention_runs_on_tensor_cores(const AttentionParams& p, std::initializer_list<const TensorView*> operands);

bool attention_forward_tensor_cores(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const AttentionParams& p, const TensorView& out, const TensorView& lse);

bool attention_backward_tensor_cores(const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& out, const TensorView& gout, const TensorView& lse,
                                     const AttentionParams& p, const TensorView& gq, const TensorView& gk,
                                     const TensorView& gv);

}  // namespace tandem::cuda
