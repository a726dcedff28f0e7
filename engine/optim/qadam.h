// QAdam (Bagua's compressed Adam): Adam for warmup_steps steps, then the momentum is what the
// ranks communicate (8-bit compressed) and the variance is frozen:
//   t <= warmup_steps: Adam (adam.h) on the gradient, which the strategy has averaged
//   t >  warmup_steps: g' = g + weight_decay * p  (this rank's gradient, not averaged)
//                      m = beta1 * m + (1 - beta1) g';  m <- momentum_averager(m)  (the ranks' mean)
//                      p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^warmup_steps) + eps)
//                      (elements with v = 0, never a gradient during the warm-up, stay put)
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
