// StepExecutor: how the forward and backward of one training step execute, a plugin of the
// strategy like its precision. Without one the strategy runs them eagerly, as they come;
// CudaGraphStep (engine/trainer/cuda_graph_step.h, trainer option cuda_graph=true) captures them
// into a CUDA graph once and replays it.
#pragma once
#include <functional>
#include <optional>

#include "engine/data/batch.h"
#include "engine/tensor/tensor.h"

namespace tandem {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;

  // The device batch the step runs on: the executor's own tensors refilled from `batch` when it
  // keeps some (a graph's static inputs); nullopt to run this batch eagerly as it is.
  virtual std::optional<data::Batch> stage(const data::Batch& batch) = 0;

  struct Outcome {
    bool ran = false;  // false: nothing ran (the executor gave up just now): run the batch eagerly
    Tensor loss;       // undefined when training_step returned none
  };
  // Runs forward_backward (training_step and backward on the staged batch, returning the loss)
  // the executor's way.
  virtual Outcome run(const std::function<Tensor()>& forward_backward) = 0;

  // After fit: what the executor holds (a graph, its memory, static tensors) goes.
  virtual void release() = 0;
};

}  // namespace tandem
