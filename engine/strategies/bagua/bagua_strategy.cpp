#include "engine/strategies/bagua/bagua_strategy.h"

#include <exception>

#include "base/error.h"

namespace tandem {

InitParams bagua_strategy_options() {
  InitParams options{{"algorithm", "gradient_allreduce"}};
  for (const auto& entry : bagua::bagua_algorithm_registry().entries()) {
    for (const auto& [key, _] : entry.default_params) options[key] = "";
  }
  return options;
}

BaguaStrategy::BaguaStrategy(const InitParams& params) {
  const auto& registry = bagua::bagua_algorithm_registry();
  const std::string algorithm = params.count("algorithm") ? params.at("algorithm") : "gradient_allreduce";
  if (!registry.contains(algorithm)) {
    throw ConfigError("strategy=bagua: unknown algorithm '" + algorithm + "'" + registry.did_you_mean(algorithm) +
                      "; choose one of: " + registry.joined_names());
  }
  InitParams given;
  for (const auto& [key, value] : params) {
    if (key != "algorithm" && !value.empty()) given[key] = value;
  }
  const auto declared = registry.get(algorithm).default_params;
  for (const auto& [key, value] : given) {
    if (declared.count(key)) continue;
    std::string taken;
    for (const auto& [d, _] : declared) taken += (taken.empty() ? "" : ", ") + d;
    throw ConfigError("strategy=bagua: algorithm=" + lower_case(algorithm) + " does not take " + key + " (given " + key +
                      "=" + value + "); its options are: " + (taken.empty() ? "none" : taken));
  }
  algorithm_ = registry.create(algorithm, given);
}

void BaguaStrategy::validate(const StrategyContext& context) const {
  algorithm_->validate(processes_per_node(context.num_devices) * context.num_nodes);
}

void BaguaStrategy::setup_environment(const StrategyEnvironment& env) {
  DDPStrategy::setup_environment(env);
  if (algorithm_->needs_own_communicator()) {
    own_comm_ = make_world_communicator(env, name());
    algorithm_->set_own_communicator(own_comm_);
  }
}

void BaguaStrategy::setup_module(trainer::LightningModule& module) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "strategy=bagua: setup_module before setup_environment");
  reducer_options_.average_bucket = algorithm_->bucket_averager(*comm_);
  DDPStrategy::setup_module(module);
  trainable_.clear();
  for (const Tensor& p : module.parameters()) {
    if (p.requires_grad()) trainable_.push_back(p);
  }
  algorithm_->on_setup(trainable_);
  steps_ = 0;
}

void BaguaStrategy::teardown() {
  // Inside the Trainer's exception handler (a failed fit) the other ranks may be anywhere: a
  // collective here could pair with one of their unrelated operations, so none is started.
  if (steps_ > 0 && std::current_exception()) {
    algorithm_->abandon_training();
  } else if (steps_ > 0) {
    algorithm_->finish_training(*comm_, trainable_);
  }
  steps_ = 0;
  DDPStrategy::teardown();
}

void BaguaStrategy::backward(const Tensor& loss, double factor, bool will_step) {
  if (algorithm_->averages_gradients(steps_ + 1)) return DDPStrategy::backward(loss, factor, will_step);
  Strategy::backward(loss, factor, will_step);  // gradients stay on this rank
}

void BaguaStrategy::optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) {
  algorithm_->before_optimizer_step(*comm_, optimizer, steps_ + 1);
  DDPStrategy::optimizer_step(optimizer, before_step);
}

void BaguaStrategy::after_optimizer_step_communication() { algorithm_->after_optimizer_step(*comm_, trainable_, ++steps_); }

collectives::CommTraffic BaguaStrategy::traffic_so_far() const {
  collectives::CommTraffic sent = DDPStrategy::traffic_so_far();
  if (own_comm_) sent += own_comm_->traffic();  // async's rounds
  return sent;
}

void BaguaStrategy::load_state_dict(const nlohmann::json& state) {
  DDPStrategy::load_state_dict(state);
  algorithm_->on_weights_restored(trainable_);
}

std::string BaguaStrategy::summary() const { return DDPStrategy::summary() + "; " + algorithm_->describe(); }

}  // namespace tandem
