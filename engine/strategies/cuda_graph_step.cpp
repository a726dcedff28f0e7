#include "engine/strategies/cuda_graph_step.h"

#include <cstdio>

#include "kernels/cuda/step_graph.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/host_checks.h"

namespace tandem::trainer {

namespace {

bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || (a.shape() == b.shape() && a.dtype() == b.dtype());
}

}  // namespace

CudaGraphStep::CudaGraphStep(int device, MetricsSink& logs, int warmup_steps)
    : device_(device), logs_(logs), warmup_steps_(warmup_steps) {}

CudaGraphStep::~CudaGraphStep() = default;

std::optional<data::Batch> CudaGraphStep::stage(const data::Batch& batch) {
  if (phase_ == Phase::Off) return std::nullopt;
  if (!static_batch_.input.defined()) {
    // Tensors of our own, never the caller's: Tensor::to returns a batch already on this device
    // as it is, and every later stage() overwrites the static tensors in place.
    NoGradGuard no_grad;
    auto own_copy = [&](const Tensor& t) {
      if (!t.defined()) return Tensor();
      Tensor copy = Tensor::empty(t.shape(), t.dtype(), Device::cuda(device_));
      copy.copy_(t);
      return copy;
    };
    static_batch_ = data::Batch{own_copy(batch.input), own_copy(batch.target)};
    return static_batch_;
  }
  if (!same_layout(static_batch_.input, batch.input) || !same_layout(static_batch_.target, batch.target))
    return std::nullopt;
  // Queued on the compute stream behind the previous step's kernels, which read these tensors.
  NoGradGuard no_grad;
  static_batch_.input.copy_(batch.input);
  if (batch.target.defined()) static_batch_.target.copy_(batch.target);
  return static_batch_;
}

CudaGraphStep::Outcome CudaGraphStep::run(const std::function<Tensor()>& forward_backward) {
  switch (phase_) {
    case Phase::Warmup: return warmup_step(forward_backward, logs_);
    case Phase::Capture: return capture_step(forward_backward, logs_);
    case Phase::Captured: return replay(logs_);
    case Phase::Off: break;
  }
  return {};
}

// An eager step with the capture's rules (deferred host checks and logs), counting what a
// replay could not repeat.
CudaGraphStep::Outcome CudaGraphStep::warmup_step(const std::function<Tensor()>& forward_backward,
                                                  MetricsSink& logs) {
  const uint64_t reads = cuda::host_read_count(), draws = cuda::random_launch_count();
  Tensor loss;
  logs.begin_deferring();
  try {
    ops::DeferHostChecks defer;
    loss = forward_backward();
  } catch (...) {
    logs.end_deferring();
    throw;
  }
  const auto recorded = logs.end_deferring();
  if (!loss.defined()) {
    turn_off("training_step returned no loss for a batch (a step that may be skipped cannot be replayed)");
  } else if (cuda::host_read_count() != reads) {
    turn_off("training_step or backward reads device values on the host (item(), to(cpu), a check of values), "
             "which a CUDA graph cannot contain");
  } else if (cuda::random_launch_count() != draws) {
    turn_off("the step draws random numbers (dropout, rand, randn); a replay would repeat the same ones");
  } else if (++warmup_done_ >= warmup_steps_) {
    phase_ = Phase::Capture;
  }
  logs.log_deferred(recorded);
  return {true, loss};
}

CudaGraphStep::Outcome CudaGraphStep::capture_step(const std::function<Tensor()>& forward_backward,
                                                   MetricsSink& logs) {
  Tensor loss;
  logs.begin_deferring();
  try {
    ops::DeferHostChecks defer;
    graph_ = cuda::StepGraph::capture(device_, [&] { loss = forward_backward(); });
  } catch (const std::exception& e) {
    // Nothing the capture queued has run: the gradients are as they were, so the caller can run
    // this batch eagerly (training_step's host code then runs a second time).
    logs.end_deferring();
    graph_.reset();
    turn_off(std::string("the capture failed: ") + e.what());
    return {false, Tensor()};
  }
  recorded_logs_ = logs.end_deferring();
  if (!loss.defined()) {
    graph_.reset();
    turn_off("training_step returned no loss while being captured");
    return {false, Tensor()};
  }
  static_loss_ = loss.detach();
  phase_ = Phase::Captured;
  return replay(logs);
}

CudaGraphStep::Outcome CudaGraphStep::replay(MetricsSink& logs) {
  graph_->replay();
  ++replays_;
  logs.log_deferred(recorded_logs_);
  // A copy: the next replay overwrites the static loss, and callbacks may keep this one.
  return {true, static_loss_.clone()};
}

void CudaGraphStep::release() {
  graph_.reset();
  static_loss_ = Tensor();
  recorded_logs_.clear();
  static_batch_ = data::Batch();
}

void CudaGraphStep::turn_off(const std::string& reason) {
  phase_ = Phase::Off;
  off_reason_ = reason;
  std::fprintf(stderr, "Tandem: cuda_graph is off for this run: %s; training goes on without graphs\n", reason.c_str());
}

}  // namespace tandem::trainer
