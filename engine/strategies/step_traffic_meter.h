// What a strategy's communicators sent during training steps (StepTraffic, strategy.h): the
// strategy calls begin() at a step's first before_training_step and end() at the end of its
// optimizer_step, each with the communicators' running count; the meter sums the differences.
// ddp (and the strategies built on it) and ddp2 report it in their fit summary.
#pragma once
#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "engine/strategies/strategy.h"

namespace tandem {

class StepTrafficMeter {
 public:
  // The first call of a step takes the count; later calls in the same step (micro-batches of an
  // accumulated step) leave it.
  void begin(const collectives::CommTraffic& so_far) {
    if (!started_) started_ = so_far;
  }
  // Closes the step. A step that was never begun (a test calling optimizer_step alone) is not
  // counted.
  void end(const collectives::CommTraffic& so_far) {
    if (!started_) return;
    total_.sent += so_far - *started_;
    total_.steps += 1;
    started_.reset();
  }
  const StepTraffic& total() const { return total_; }
  // "; sent 123 bytes per step (this rank, over 40 steps; 2.0 allreduce, 1.0 broadcast per step)"
  std::string summary() const;

 private:
  StepTraffic total_;
  std::optional<collectives::CommTraffic> started_;  // set while a step is under way
};

}  // namespace tandem
