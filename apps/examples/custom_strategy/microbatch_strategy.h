// MicroBatchStrategy: a user's own strategy, registered under a new name with no change to the
// Trainer. It trains on one device but runs every batch as `chunks` sequential micro-batches
// (forward and backward of one chunk at a time, so activations of only one chunk are alive),
// each chunk's loss weighted by its share of the batch: the gradients equal one pass over the
// whole batch. Used by microbatch_cli.cpp (a user program that registers it and runs Tandem's
// command line) and by tests/strategies.
//
//   microbatch_cli fit --trainer.strategy=microbatch --trainer.accelerator=cpu ...
#pragma once
#include <memory>
#include <string>

#include "base/error.h"
#include "engine/strategies/strategy.h"
#include "tensor/ops/ops.h"

namespace microbatch_example {

class MicroBatchStrategy : public tandem::Strategy {
 public:
  explicit MicroBatchStrategy(const tandem::InitParams& params)
      : chunks_(std::stoi(params.count("chunks") ? params.at("chunks") : "2")) {
    if (chunks_ < 1) throw tandem::ConfigError("strategy=microbatch: chunks=" + std::to_string(chunks_) + " must be >= 1");
  }

  std::string name() const override { return "microbatch"; }
  int processes_per_node(int) const override { return 1; }
  void validate(const tandem::StrategyContext& c) const override {
    if (c.num_devices != 1 || c.num_nodes != 1) {
      throw tandem::ConfigError("strategy=microbatch runs on one device; got " + std::to_string(c.num_devices) +
                                " device(s) x " + std::to_string(c.num_nodes) + " node(s)");
    }
  }

  // The chunks' losses are kept for backward; the value returned is their weighted sum.
  tandem::Tensor training_step(tandem::trainer::LightningModule& module, const tandem::data::Batch& batch,
                               int64_t batch_idx) override {
    losses_.clear();
    weights_.clear();
    const int64_t total = batch.size();
    const int64_t n = std::max<int64_t>(1, std::min<int64_t>(chunks_, total));
    double value = 0.0;
    for (int64_t i = 0, start = 0; i < n; ++i) {
      const int64_t size = total / n + (i < total % n ? 1 : 0);
      const tandem::data::Batch chunk{batch.input.narrow(0, start, size), batch.target.narrow(0, start, size)};
      start += size;
      const tandem::Tensor loss = call_training_step(module, chunk, batch_idx);
      if (!loss.defined()) return loss;
      losses_.push_back(loss);
      weights_.push_back(double(size) / double(total));
      value += weights_.back() * loss.item();
    }
    combined_ = tandem::Tensor::scalar(value, losses_.front().dtype()).to(root_device());
    return combined_;
  }

  void backward(const tandem::Tensor& loss, double factor, bool will_step) override {
    if (!loss.same_impl(combined_)) return Strategy::backward(loss, factor, will_step);
    for (size_t i = 0; i < losses_.size(); ++i) precision_plugin().scale_loss(losses_[i] * (weights_[i] * factor)).backward();
    losses_.clear();
  }

  int64_t chunks() const { return chunks_; }

 private:
  int chunks_;
  std::vector<tandem::Tensor> losses_;
  std::vector<double> weights_;
  tandem::Tensor combined_;
};

inline void register_microbatch(tandem::StrategyRegistry& registry) {
  registry.add("microbatch", "one device, each batch run as sequential micro-batches (example)",
               [](const tandem::InitParams& p) { return std::make_unique<MicroBatchStrategy>(p); }, {{"chunks", "2"}});
}

}  // namespace microbatch_example
