// CudaGraphStep: `--trainer.cuda_graph=true`, the strategy's step executor
// (Strategy::setup_step_executor; without it steps run eagerly). The forward and backward of a
// training step (training_step, the loss scaling, the backward hooks, backward) are captured
// once into a CUDA graph and replayed for every later batch of the same shapes, so a small model's step costs one
// graph launch instead of a launch per kernel.
//
// What is captured and what is not:
//   - the batch is copied into the same device tensors every step (stage()); a batch of other
//     shapes (the last, short batch of an epoch) runs eagerly and leaves the graph as it is;
//   - the optimizer step, gradient zeroing (in place: the graph accumulates into the same
//     gradient buffers every time), clipping, the GradScaler's unscale and checks, schedulers
//     and callbacks outside training_step run eagerly around the replay, so they behave as
//     without graphs; the finite-loss check reads the loss after the replay;
//   - what training_step logs is recorded at capture (tensors unread) and logged again after
//     every replay with the tensors' new values; numbers logged there are replayed as they were;
//   - host code inside training_step and the backward hooks runs once, at capture.
// Phases: warm-up steps run eagerly (caches fill: cuBLASLt plans, cuDNN algorithms) and are
// checked for what a graph cannot repeat: host reads (item(), to(cpu)), random numbers
// (dropout), a step that returns no loss. Any of them turns graphs off for the run, with a
// message, and training goes on eagerly. Then one capture, then replays. A capture that CUDA
// refuses turns graphs off too, and that batch runs eagerly.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/data/batch.h"
#include "engine/module/metrics_sink.h"
#include "tensor/tensor.h"

namespace tandem::cuda { class StepGraph; }

namespace tandem::trainer {

class CudaGraphStep {
 public:
  static constexpr int kWarmupSteps = 2;

  // `logs`: where the module logs (the Trainer's LoggerConnector), deferred while a step is
  // captured or replayed.
  CudaGraphStep(int device, MetricsSink& logs, int warmup_steps = kWarmupSteps);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // The device batch for this step: the static tensors, refilled from `batch`, when it has their
  // shapes (they are made from the first batch); nullopt when graphs are off or the shapes differ
  // (run the step eagerly on a batch of its own).
  std::optional<data::Batch> stage(const data::Batch& batch);

  struct Outcome {
    bool ran = false;  // false: nothing ran (the capture failed just now): run the batch eagerly
    Tensor loss;       // undefined when training_step returned none
  };

  // Runs forward_backward in the current phase: eagerly and checked, captured then replayed, or
  // replayed. `ran` is false when the capture failed just now (run this batch eagerly); the loss
  // is undefined when training_step returned none (only during warm-up).
  Outcome run(const std::function<Tensor()>& forward_backward);

  // After fit: the graph, its memory and the static tensors go; the counters stay readable.
  void release();

  bool enabled() const { return phase_ != Phase::Off; }
  bool captured() const { return phase_ == Phase::Captured; }
  const std::string& off_reason() const { return off_reason_; }
  int64_t replays() const { return replays_; }

 private:
  enum class Phase { Warmup, Capture, Captured, Off };
  Outcome warmup_step(const std::function<Tensor()>& forward_backward, MetricsSink& logs);
  Outcome capture_step(const std::function<Tensor()>& forward_backward, MetricsSink& logs);
  Outcome replay(MetricsSink& logs);
  void turn_off(const std::string& reason);

  int device_;
  MetricsSink& logs_;
  int warmup_steps_;
  int warmup_done_ = 0;
  Phase phase_ = Phase::Warmup;
  std::string off_reason_;
  data::Batch static_batch_;
  std::unique_ptr<cuda::StepGraph> graph_;
  Tensor static_loss_;
  std::vector<MetricsSink::DeferredValue> recorded_logs_;
  int64_t replays_ = 0;
};

}  // namespace tandem::trainer
