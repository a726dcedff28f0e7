// MetricsSink: where LightningModule::log sends its values (the Trainer's LoggerConnector), and
// how a CUDA graph step (engine/strategies/cuda_graph_step.h) holds them back: between
// begin_deferring and end_deferring, values are recorded instead of logged, tensors without
// reading them on the host; log_deferred logs a recording after the step (reading each tensor
// then), and again after every replay.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::trainer {

enum class ReduceFx { Mean, Sum, Max, Min };

// How a logged value is aggregated and shown (Lightning's self.log arguments).
struct LogOptions {
  // on_step / on_epoch: unset means Lightning's default for the current hook (training_step:
  // step only; validation/test steps and epoch-end hooks: epoch only).
  std::optional<bool> on_step;
  std::optional<bool> on_epoch;
  bool prog_bar = false;
  ReduceFx reduce_fx = ReduceFx::Mean;
  bool sync_dist = false;       // reduce across ranks (takes effect with DDP)
  bool rank_zero_only = false;  // only rank 0 logs it (takes effect with DDP)
  bool logger = true;           // write to the loggers (metrics.csv)
  // Weight of this value in a mean over the epoch; unset: the size of the current batch.
  std::optional<int64_t> batch_size;
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;

  // Records one value.
  virtual void log(const std::string& name, double value, const LogOptions& options) = 0;

  struct DeferredValue {
    std::string name;
    Tensor tensor;        // a one-element tensor, or undefined when a number was logged
    double number = 0.0;
    LogOptions options;
  };
  void begin_deferring();
  std::vector<DeferredValue> end_deferring();
  bool deferring() const { return deferring_; }
  void defer(DeferredValue value) { deferred_.push_back(std::move(value)); }
  void log_deferred(const std::vector<DeferredValue>& values);

 private:
  bool deferring_ = false;
  std::vector<DeferredValue> deferred_;
};

}  // namespace tandem::trainer
