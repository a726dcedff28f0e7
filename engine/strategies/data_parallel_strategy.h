// dp: one process drives several devices. The model is replicated onto each device; every batch
// is split along dim 0 into per-device chunks (sizes differ by at most one, the first ones
// larger, as PyTorch's scatter); the replicas run forward and backward in parallel, one thread
// per device (on CUDA each thread makes its device current, so it runs on that device's own
// compute stream); gradients are summed onto the root device in a fixed order (root, then
// replica 1, 2, ...); the optimizer steps there; replicas are refreshed from the root (weights and
// buffers: BatchNorm statistics follow the root replica, as PyTorch's DataParallel) before every
// forward. A replica on the root's own device (CPU devices) reads the root's weights in place.
//
//   training_step   per-chunk training_step in parallel; with training_step_end, its loss over the
//                   gathered outputs (backward then runs through every replica's graph); without,
//                   the per-chunk losses weighted by their share of the batch (= one device at
//                   the whole batch), backwarded in parallel
//   validation/test per-chunk steps in parallel; what they log is merged over the whole batch
//   predict         per-chunk outputs concatenated on the root
//   logging         log() calls of the device threads are captured and merged: means weighted by
//                   chunk size, sums added, max/min over chunks
//   random numbers  device i > 0 draws (dropout) from its own part of the Philox stream, so runs
//                   are reproducible; the masks differ from one device's, as in PyTorch
//
// Devices: GPUs (accelerator=cuda), or several CPU devices in one process (accelerator=cpu,
// devices=N: N replicas on N threads, all in host memory). 16-mixed is refused (Lightning's rule).
// Effective batch = batch_size x num_nodes: each process splits its batch, it does not multiply it.
//
// ddp2 = this inside each node plus a communicator across nodes (ddp2_strategy.h).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/strategies/strategy.h"

namespace tandem {

class DataParallelStrategy : public Strategy {
 public:
  std::string name() const override { return "dp"; }
  int processes_per_node(int) const override { return 1; }
  void validate(const StrategyContext& context) const override;
  void validate_precision(Precision precision) const override;
  void setup_environment(const StrategyEnvironment& env) override;
  void setup_module(trainer::LightningModule& module) override;

  Tensor training_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) override;
  void validation_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) override;
  void test_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) override;
  Tensor predict_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx) override;
  void backward(const Tensor& loss, double factor, bool will_step) override;
  void teardown() override;

  // The replicas on devices 1..N-1 (the root module itself is the replica on device 0).
  const std::vector<std::shared_ptr<trainer::LightningModule>>& replicas() const { return replicas_; }

 protected:
  // The chunks of a (root-device) batch, one per device used; fewer than the devices when the
  // batch has fewer examples. They stay on the root until on_device() (called on the device's
  // own thread) moves chunk i to device i.
  std::vector<data::Batch> scatter(const data::Batch& batch) const;
  data::Batch on_device(const data::Batch& chunk, size_t i) const;
  // On CUDA, waits for what the calling (root) thread queued: copies between the root and the
  // other devices, whose threads otherwise run (and reuse memory) unordered with them.
  void synchronize_root() const;
  // The devices' outputs on the root, concatenated along dim 0 (0-d outputs stacked into
  // [devices]); undefined when any device returned none.
  Tensor gather_on_root(std::vector<Tensor> outputs);
  // validation_step / test_step on every device's chunk, then *_step_end over the gathered outputs.
  void evaluation_step(trainer::LightningModule& module, const data::Batch& batch, int64_t batch_idx, bool validation);
  // Runs fn(i, module_i) for every chunk, chunk i on device i's thread (0 on the calling one),
  // with the caller's grad mode and the precision's autocast; log() calls are captured per chunk
  // and merged into `root`'s log when all are done. Rethrows the first failure by device index.
  void run_on_devices(trainer::LightningModule& root, const std::vector<int64_t>& chunk_sizes,
                      const std::function<void(size_t, trainer::LightningModule&)>& fn);
  static std::vector<int64_t> chunk_sizes(const std::vector<data::Batch>& chunks);
  // Root weights, buffers and train/eval mode into every replica.
  void refresh_replicas(trainer::LightningModule& root);
  // Adds each replica's gradients into the root's, in device order, and clears the replicas'.
  void gather_gradients();
  trainer::LightningModule& module_on(size_t i, trainer::LightningModule& root) const {
    return i == 0 ? root : *replicas_[i - 1];
  }

  trainer::LightningModule* root_ = nullptr;
  std::vector<std::shared_ptr<trainer::LightningModule>> replicas_;
  // The step whose backward is pending: per-chunk losses and their weights (no training_step_end).
  struct PendingStep {
    std::vector<Tensor> losses;
    std::vector<double> weights;
    std::vector<int64_t> sizes;
    Tensor combined;  // what training_step returned
  };
  PendingStep pending_;
};

}  // namespace tandem
