// SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD:
//   g' = g + weight_decay * p
//   buf = g' on the first step, else momentum * buf + (1 - dampening) * g'
//   d = nesterov ? g' + momentum * buf : buf        (d = g' when momentum = 0)
//   p -= lr * d
// State per parameter: "momentum_buffer" (only when momentum != 0).
#pragma once
#include "engine/optim/optimizer.h"

namespace tandem::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Groups with their own overrides, e.g. {{backbone, {{"lr", 1e-3}}}, {head, {}}}.
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});
  std::string name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> make_shard_optimizer(std::vector<ParamGroup> groups) const override;

 protected:
  void validate(const nlohmann::json& options) const override;
  void update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& options) override;
};

}  // namespace tandem::optim
