// bagua: ddp's processes, launch, data sharding and gradient buckets, with the communication
// chosen by `--trainer.strategy.algorithm=` from bagua_algorithm_registry() (bagua_algorithm.h;
// docs/STRATEGIES.md). The algorithm's bucket averager replaces the Reducer's allreduce
// (gradient_allreduce, bytegrad); an algorithm that does not average gradients leaves them local
// and works on the weights after each optimizer step (decentralized, low_precision_decentralized).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/strategies/bagua/bagua_algorithm.h"
#include "engine/strategies/ddp_strategy.h"

namespace tandem {

class BaguaStrategy : public DDPStrategy {
 public:
  // params: `algorithm` plus the options of that algorithm (others are refused by name).
  explicit BaguaStrategy(const InitParams& params);

  std::string name() const override { return "bagua"; }
  void validate(const StrategyContext& context) const override;
  // ddp's environment, plus a communicator of the algorithm's own when it asks for one.
  void setup_environment(const StrategyEnvironment& env) override;
  void setup_module(trainer::LightningModule& module) override;
  // After a fit that took steps: the algorithm's finish_training (async: replicas made equal);
  // called while an exception is handled (a failed fit), its abandon_training instead.
  void teardown() override;
  void backward(const Tensor& loss, double factor, bool will_step) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) override;
  // ddp's state (the precision plugin's), then the algorithm's on_weights_restored: a resumed
  // fit loads its weights before this.
  void load_state_dict(const nlohmann::json& state) override;
  std::string summary() const override;
  std::optional<OptimizerRequirement> required_optimizer() const override { return algorithm_->required_optimizer(); }

  const bagua::BaguaAlgorithm& algorithm() const { return *algorithm_; }

 protected:
  // The algorithm's after_optimizer_step (decentralized and async exchange weights there).
  void after_optimizer_step_communication() override;
  // ddp's count plus the algorithm's own communicator (async), so bytes per step include both.
  collectives::CommTraffic traffic_so_far() const override;

 private:
  std::unique_ptr<bagua::BaguaAlgorithm> algorithm_;
  std::shared_ptr<collectives::Communicator> own_comm_;
  std::vector<Tensor> trainable_;
  int64_t steps_ = 0;
};

// The options the bagua strategy takes: algorithm (default gradient_allreduce) and every option
// of a registered algorithm (unset unless given), for its strategy registry entry.
InitParams bagua_strategy_options();

}  // namespace tandem
