#include "engine/optim/clip_grad.h"

#include <cmath>

#include "base/error.h"
#include "engine/optim/optimizer.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::optim {

double total_grad_norm(const std::vector<Tensor>& params, double norm_type) {
  const bool inf_norm = std::isinf(norm_type) && norm_type > 0;
  if (!inf_norm && !(norm_type > 0 && std::isfinite(norm_type)))
    throw ValueError("clip_grad_norm_: norm_type must be > 0 or infinity, got " + format_number(norm_type));
  NoGradGuard no_grad;
  // Per-gradient partial results stay on the device (one host sync at the end), summed in
  // float64 on the first gradient's device.
  Tensor total;
  for (const auto& p : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (!g.defined() || g.numel() == 0) continue;
    Tensor a = abs(g.detach().to(DType::Float64));
    Tensor part = inf_norm ? max(a) : norm_type == 2.0 ? sum(a * a) : norm_type == 1.0 ? sum(a) : sum(pow(a, norm_type));
    if (!total.defined()) total = part;
    else total = inf_norm ? maximum(total, part.to(total.device())) : total + part.to(total.device());
  }
  if (!total.defined()) return 0.0;
  const double t = total.item();
  return inf_norm || norm_type == 1.0 ? t : norm_type == 2.0 ? std::sqrt(t) : std::pow(t, 1.0 / norm_type);
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  if (!(max_norm >= 0)) throw ValueError("clip_grad_norm_: max_norm must be >= 0, got " + format_number(max_norm));
  const double total = total_grad_norm(params, norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw Error("clip_grad_norm_: the total norm of order " + format_number(norm_type) + " of the gradients is " +
                format_number(total) + "; the gradients cannot be clipped. Pass error_if_nonfinite=false to scale "
                "them anyway, or find where the loss or a gradient overflows");
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for (const auto& p : params) {
      Tensor g = p.defined() ? p.grad() : Tensor();
      if (g.defined()) g.copy_(g.detach() * coef);
    }
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0)) throw ValueError("clip_grad_value_: clip_value must be >= 0, got " + format_number(clip_value));
  NoGradGuard no_grad;
  for (const auto& p : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) g.copy_(clamp(g.detach(), -clip_value, clip_value));
  }
}

}  // namespace tandem::optim
