// Adam and AdamW, as torch.optim.Adam / AdamW (amsgrad not supported):
//   Adam:  g' = g + weight_decay * p          AdamW: p *= 1 - lr * weight_decay; g' = g
//   m = beta1 * m + (1 - beta1) g';  v = beta2 * v + (1 - beta2) g'^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps),  t = step count
// State per parameter: "step" (float32 scalar on the host), "exp_avg", "exp_avg_sq".
#pragma once
#include <utility>

#include "engine/optim/optimizer.h"

namespace tandem::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::unique_ptr<Optimizer> make_shard_optimizer(std::vector<ParamGroup> groups) const override;

 protected:
  Adam(std::vector<ParamGroup> groups, const AdamWOptions& defaults, bool decoupled);
  void validate(const nlohmann::json& options) const override;
  void update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& options) override;

 private:
  bool decoupled_ = false;
};

// Adam with decoupled weight decay (Loshchilov & Hutter).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});
};

}  // namespace tandem::optim
