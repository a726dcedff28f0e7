#include "engine/optim/qadam.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::optim {

QAdam::QAdam(std::vector<Tensor> params, AdamOptions options, int64_t warmup_steps)
    : Adam(std::move(params), options), warmup_steps_(warmup_steps) {
  if (warmup_steps < 1) {
    throw ConfigError("QAdam: warmup_steps=" + std::to_string(warmup_steps) + " is not valid: expected an integer >= 1 "
                      "(Adam steps on averaged gradients that set the variance QAdam then freezes)");
  }
}

void QAdam::update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& o) {
  if (!averager_) {
    throw ConfigError("QAdam communicates compressed momentum between ranks and runs only under "
                      "--trainer.strategy=bagua --trainer.strategy.algorithm=qadam; use --optimizer=Adam with other "
                      "strategies or algorithms");
  }
  if (items.empty()) return;
  const int64_t next = items.front().state->contains("step") ? int64_t(items.front().state->at("step").item()) + 1 : 1;
  if (next <= warmup_steps_) return Adam::update_group(items, o);
  NoGradGuard no_grad;
  const double lr = o.at("lr").get<double>(), eps = o.at("eps").get<double>(), wd = o.at("weight_decay").get<double>();
  const double beta1 = o.at("betas")[0].get<double>(), beta2 = o.at("betas")[1].get<double>();
  const double frozen_correction = std::sqrt(1.0 - std::pow(beta2, double(warmup_steps_)));
  const double adam_bound = std::max(1.0, (1.0 - beta1) / std::sqrt(1.0 - beta2));  // B in qadam.h
  for (const ParamUpdate& item : items) {
    StateDict& state = *item.state;
    Tensor step = state.at("step");
    const int64_t t = int64_t(step.item()) + 1;
    step.fill_(double(t));
    Tensor param = item.param;
    Tensor m = state.at("exp_avg");
    const Tensor& v = state.at("exp_avg_sq");
    const Tensor g = wd != 0.0 ? add(item.grad, param * wd) : item.grad;
    m.copy_(add(m * beta1, g * (1.0 - beta1)));
    averager_(m);
    const Tensor denominator = sqrt(v) / frozen_correction + eps;
    // An element whose gradient was zero throughout the warm-up has no variance estimate; its
    // averaged momentum is compression error only (up to 1/510 of its block's range), which
    // eps alone would turn into a step of ~1e5 x lr. It keeps its value, as under Adam.
    const Tensor zeros = Tensor::zeros(v.shape(), v.dtype(), v.device());
    const Tensor direction = where(gt(v, zeros), div(m, denominator), zeros) * (1.0 / (1.0 - std::pow(beta1, double(t))));
    param.copy_(sub(param, clamp(direction, -adam_bound, adam_bound) * lr));
  }
}

}  // namespace tandem::optim
