// QAdam (Bagua's compressed Adam): Adam for warmup_steps steps, then the momentum is what the
// ranks communicate (8-bit compressed) and the variance is frozen:
//   t <= warmup_steps: Adam (adam.h) on the gradient, which the strategy has averaged
//   t >  warmup_steps: g' = g + weight_decay * p  (this rank's gradient, not averaged)
//                      m = beta1 * m + (1 - beta1) g';  m <- momentum_averager(m)  (the ranks' mean)
//                      d = m / (1 - beta1^t) / (sqrt(v) / sqrt(1 - beta2^warmup_steps) + eps)
//                      p -= lr * clamp(d, -B, B),  B = max(1, (1 - beta1) / sqrt(1 - beta2))
//                      (elements with v = 0, never a gradient during the warm-up, stay put)
// B is the bound Adam's own step obeys (Kingma & Ba, section 2.1: |step| <~ lr * B), since its v
// grows with the gradient. Frozen, v no longer does: an element whose gradient was ~0 during the
// warm-up (v down to 1e-26 for a unit that was inactive) has a denominator of about eps, and a
// momentum it gains later (or a compression error of 1e-7) becomes a step of 10-10^4 x lr. Bagua's
// QAdam has no such bound; without it the Fashion-MNIST MLP's weights grow from 0.08 to 241 with
// the momentum averaged exactly, and the loss becomes NaN with it compressed (docs/PERFORMANCE.md).
// The averager is set by the strategy that carries the communication (bagua with
// algorithm=qadam); stepping without one is a ConfigError naming that strategy.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/optim/adam.h"

namespace tandem::optim {

class QAdam : public Adam {
 public:
  // Replaces exp_avg by the mean over the ranks, in place; every rank gets the same values.
  using MomentumAverager = std::function<void(const Tensor& exp_avg)>;

  QAdam(std::vector<Tensor> params, AdamOptions options = {}, int64_t warmup_steps = 100);
  std::string name() const override { return "QAdam"; }
  int64_t warmup_steps() const { return warmup_steps_; }
  void set_momentum_averager(MomentumAverager averager) { averager_ = std::move(averager); }

 protected:
  void update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& options) override;

 private:
  int64_t warmup_steps_;
  MomentumAverager averager_;
};

}  // namespace tandem::optim
