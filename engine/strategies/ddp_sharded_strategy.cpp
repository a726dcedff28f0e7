#include "engine/strategies/ddp_sharded_strategy.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "engine/optim/clip_grad.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem {

namespace {
std::vector<Tensor> optimizer_params(const optim::Optimizer& optimizer) {
  std::vector<Tensor> params;
  for (const auto& group : optimizer.param_groups()) params.insert(params.end(), group.params.begin(), group.params.end());
  return params;
}
}  // namespace

DDPShardedStrategy::DDPShardedStrategy() = default;
DDPShardedStrategy::~DDPShardedStrategy() = default;

void DDPShardedStrategy::setup_module(trainer::LightningModule& module) { setup_replica(module); }

void DDPShardedStrategy::backward(const Tensor& loss, double factor, bool will_step) {
  Strategy::backward(loss, factor, will_step);
}

OptimizerShard& DDPShardedStrategy::shard_for(optim::Optimizer& optimizer) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "strategy=ddp_sharded: the optimizer is used before setup_environment");
  if (!shard_ || !shard_->serves(optimizer)) shard_ = std::make_unique<OptimizerShard>(optimizer, comm_);
  return *shard_;
}

void DDPShardedStrategy::setup_optimizer(optim::Optimizer& optimizer) { shard_for(optimizer); }

void DDPShardedStrategy::optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) {
  OptimizerShard& shard = shard_for(optimizer);
  shard.reduce_gradients();
  const std::vector<Tensor> params = optimizer_params(optimizer);
  // 16-mixed: each rank unscaled and checked only its part, so the skip decision is taken together.
  bool skipping = !precision_.unscale(params);
  if (precision_.grad_scaler()) skipping = reduce_any(skipping);
  if (before_step) before_step(skipping);
  if (!skipping) shard.step();
  precision_.update(skipping);
  end_step_traffic();
}

double DDPShardedStrategy::clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm >= 0)) throw ValueError("clip_grad_norm_: max_norm must be >= 0, got " + optim::format_number(max_norm));
  // .grad is this rank's part of the averaged gradient (zeros elsewhere): the parts' squares add
  // up to the whole gradient's.
  const double mine = optim::total_grad_norm(params, 2.0);
  Tensor squares = Tensor::scalar(mine * mine, DType::Float64).to(comm_device_);
  comm_->allreduce(squares, collectives::ReduceOp::Sum);
  const double total = std::sqrt(squares.item());
  const double coef = max_norm / (total + 1e-6);  // clip_grad_norm_'s rule
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) g.copy_(g.detach() * coef);
    }
  }
  return total;
}

optim::OptimizerStateDict DDPShardedStrategy::optimizer_state(const optim::Optimizer& optimizer) const {
  if (shard_ && shard_->serves(optimizer)) return shard_->gather_state();
  return optimizer.state_dict();
}

void DDPShardedStrategy::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerStateDict& state) {
  shard_for(optimizer).load_state(state);
}

int64_t DDPShardedStrategy::optimizer_state_bytes(const optim::Optimizer& optimizer) const {
  if (shard_ && shard_->serves(optimizer)) return shard_->state_bytes();
  return optimizer.state_bytes();
}

std::string DDPShardedStrategy::summary() const {
  char line[256];
  std::snprintf(line, sizeof line, "%s: %d ranks over %s; this rank holds the optimizer state of %lld of %lld elements (%.2f MB)",
                name().c_str(), comm_->size(), comm_->backend_name().c_str(),
                static_cast<long long>(shard_ ? shard_->shard_numel() : 0), static_cast<long long>(shard_ ? shard_->numel() : 0),
                double(shard_ ? shard_->state_bytes() : 0) / 1e6);
  return line + step_traffic_.summary();
}

}  // namespace tandem
