// ddp_sharded: ZeRO stage 1 (DeepSpeed's optimizer state partitioning, Lightning's
// ddp_sharded). Launched, batched and set up as ddp (one process per device, rank 0's weights
// broadcast, effective batch = batch x devices x num_nodes), but each rank keeps the optimizer
// state of its 1/W of the parameters only (optimizer_shard.h):
//
//   backward         local, no Reducer hooks (accumulation needs no no_sync)
//   optimizer_step   one reduce_scatter(avg) of all gradients: each .grad holds the average on
//                    this rank's part and zeros elsewhere; hooks and clipping see that; then the
//                    rank steps its part and one allgather brings every rank the updated weights
//   clip_grad_norm   the norm over all ranks' parts (one allreduce of the squares)
//   checkpoints      optimizer_state gathers the whole state (collective), load_optimizer_state
//                    keeps this rank's part: any world size, any strategy, either way
//
// Bytes sent per step equal ddp's (a reduce_scatter and an allgather of N elements are one
// allreduce); the optimizer state per rank is about 1/W of ddp's.
#pragma once
#include <memory>

#include "engine/strategies/ddp_strategy.h"
#include "engine/strategies/optimizer_shard.h"

namespace tandem {

class DDPShardedStrategy : public DDPStrategy {
 public:
  DDPShardedStrategy();
  ~DDPShardedStrategy() override;

  std::string name() const override { return "ddp_sharded"; }
  void setup_module(trainer::LightningModule& module) override;
  void backward(const Tensor& loss, double factor, bool will_step) override;
  void optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) override;
  double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) override;

  void setup_optimizer(optim::Optimizer& optimizer) override;
  optim::OptimizerStateDict optimizer_state(const optim::Optimizer& optimizer) const override;
  void load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerStateDict& state) override;
  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override;
  std::string summary() const override;

  // The shard of the optimizer last set up (null before setup_optimizer).
  const OptimizerShard* shard() const { return shard_.get(); }

 private:
  OptimizerShard& shard_for(optim::Optimizer& optimizer);

  std::unique_ptr<OptimizerShard> shard_;
};

}  // namespace tandem
