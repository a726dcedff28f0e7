// What Strategy::run_training_step is given and gives back: the fit loop's side of one training
// batch. The strategy runs the batch (device, training_step, backward, the optimizer step) and
// calls these hooks where Lightning's loop would run its callbacks; the loop keeps the counters
// (accumulation, global step, schedulers) and the checks that need the whole job (the loss,
// clipping).
#pragma once
#include <cstdint>

#include "engine/data/batch.h"
#include "engine/optim/optimizer.h"
#include "tensor/tensor.h"

namespace tandem {

// The loop's hooks, in the order a batch calls them.
class TrainingStepHooks {
 public:
  virtual ~TrainingStepHooks() = default;

  // The batch enters `phase` (the step watchdog's progress; a string literal). waits_for_peers:
  // the phase blocks in collectives.
  virtual void enter(const char* phase, bool waits_for_peers) = 0;
  // The batch on the device, as training_step will see it: on_train_batch_start.
  virtual void on_batch_start(const data::Batch& batch) = 0;
  // This rank's loss value; throws when any rank's loss is not finite (a collective).
  virtual void check_finite_loss(double value) = 0;
  virtual void on_before_backward(const Tensor& loss) = 0;
  virtual void on_after_backward() = 0;
  // At a step boundary, the gradients as the optimizer will use them (averaged, unscaled):
  // on_before_optimizer_step and clipping. skipping: the precision plugin skips this step (an inf
  // or NaN under 16-mixed), so nothing is clipped.
  virtual void on_before_optimizer_step(optim::Optimizer& optimizer, bool skipping) = 0;
  virtual void on_before_zero_grad(optim::Optimizer& optimizer) = 0;
};

// Which batch this is to the loop.
struct TrainingStepRequest {
  int64_t batch_idx = 0;
  bool will_step = true;     // the batch ends an optimizer step (accumulation done, or the epoch's last)
  double loss_factor = 1.0;  // backward of loss * loss_factor (1 / accumulate_grad_batches)
};

struct TrainingStepResult {
  data::Batch batch;     // the device batch the step ran on (for on_train_batch_end)
  Tensor loss;           // undefined when training_step returned none
  bool stepped = false;  // the optimizer step ran (or the precision plugin skipped it) and gradients were zeroed
};

}  // namespace tandem
