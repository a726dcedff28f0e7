// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without
// a gradient are skipped.
#pragma once
#include <limits>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::optim {

// The p-norm of all gradients taken together (as if concatenated), accumulated in float64:
// (sum_i |g_i|^p)^(1/p), or max_i |g_i| for p = infinity. 0 when no parameter has a gradient.
double total_grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0);

// Scales every gradient by max_norm / (total + 1e-6) when that is below 1, so the total norm
// becomes (just under) max_norm. Returns the total norm before clipping. norm_type is > 0 or
// std::numeric_limits<double>::infinity(). With error_if_nonfinite, a NaN or infinite total
// norm throws instead of scaling every gradient into NaN.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient element into [-clip_value, clip_value] (clip_value >= 0).
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace tandem::optim
