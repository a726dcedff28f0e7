#include "base/error.h"
#include "engine/strategies/bagua/algorithms.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {

namespace {

Tensor flat_weights(const std::vector<Tensor>& params) {
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  Tensor flat = Tensor::empty({total}, params.front().dtype(), params.front().device());
  int64_t offset = 0;
  for (const Tensor& p : params) {
    flat.narrow(0, offset, p.numel()).copy_(p.detach().contiguous().view({p.numel()}));
    offset += p.numel();
  }
  return flat;
}

void write_weights(const std::vector<Tensor>& params, const Tensor& flat) {
  int64_t offset = 0;
  for (const Tensor& p : params) {
    Tensor target = p;
    target.copy_(flat.narrow(0, offset, p.numel()).view(p.shape()));
    offset += p.numel();
  }
}

}  // namespace

AsyncModelAverage::AsyncModelAverage(const InitParams& params) {
  interval_ms_ = parse_int_option(params, "sync_interval_ms", 1, "milliseconds between the starts of two averaging rounds");
  warmup_steps_ = parse_int_option(params, "warmup_steps", 0, "optimizer steps of synchronous gradient allreduce first");
}

void AsyncModelAverage::set_own_communicator(std::shared_ptr<collectives::Communicator> comm) {
  rounds_.reset();  // joins a thread over an earlier communicator
  if (comm) rounds_ = std::make_unique<AsyncRounds>(std::move(comm));
}

void AsyncModelAverage::on_setup(const std::vector<Tensor>& /*params*/) {
  TANDEM_CHECK(rounds_ == nullptr || !rounds_->in_flight(), ValueError,
               "bagua async: a round is still in flight at setup");
  rounds_started_ = rounds_applied_ = 0;
}

void AsyncModelAverage::start_round(const std::vector<Tensor>& params) {
  Tensor flat = flat_weights(params);
  // NCCL averages device tensors; MPI reduces on the host (it stages device tensors there
  // anyway), so the round's tensors are host ones the thread can use without touching a
  // device: pinned, so the copy below is one DMA, finished when copy_ returns.
  if (rounds_->communicator().needs_device_tensors() || flat.device().is_cpu()) {
    snapshot_ = flat;
    average_ = Tensor::empty(flat.shape(), flat.dtype(), flat.device());
  } else {
    snapshot_ = Tensor::empty_pinned(flat.shape(), flat.dtype());
    snapshot_.copy_(flat);
    average_ = Tensor::empty_pinned(flat.shape(), flat.dtype());
  }
  rounds_->start(snapshot_, average_);
  last_start_ = std::chrono::steady_clock::now();
  rounds_started_ += 1;
}

void AsyncModelAverage::apply_round(const std::vector<Tensor>& params) {
  // The progress made since the snapshot stays: w <- w + (average - snapshot).
  Tensor delta = sub(average_, snapshot_);
  if (delta.device() != params.front().device()) delta = delta.to(params.front().device());
  write_weights(params, add(flat_weights(params), delta));
  snapshot_ = average_ = Tensor();
  rounds_applied_ += 1;
}

void AsyncModelAverage::after_optimizer_step(collectives::Communicator& /*comm*/, const std::vector<Tensor>& params,
                                             int64_t step) {
  if (step <= warmup_steps_ || params.empty()) return;
  TANDEM_CHECK(rounds_ != nullptr, ValueError, "bagua async: no communicator of its own was set up");
  NoGradGuard no_grad;
  if (rounds_->in_flight() && rounds_->poll()) apply_round(params);  // CommError when the round failed
  // The first round of a fit starts at once: steady_clock counts from an unspecified origin
  // (Linux: boot), so "interval since a default time point" would hold the first round back for
  // as long as sync_interval_ms exceeds the machine's uptime.
  const bool interval_passed = rounds_started_ == 0 ||
                               std::chrono::steady_clock::now() - last_start_ >= std::chrono::milliseconds(interval_ms_);
  if (!rounds_->in_flight() && interval_passed) start_round(params);
}

void AsyncModelAverage::finish_training(collectives::Communicator& comm, const std::vector<Tensor>& params) {
  if (params.empty() || rounds_ == nullptr) return;
  NoGradGuard no_grad;
  try {
    // Every rank must take part in the same number of rounds on the own communicator. Agree on
    // it before waiting for a round in flight: that round completes only once every rank
    // started it (with the thread, this allreduce runs beside the thread's).
    Tensor most = Tensor::scalar(double(rounds_started_), DType::Int64);
    comm.allreduce(most, collectives::ReduceOp::Max);
    if (rounds_->in_flight()) {
      rounds_->wait();
      apply_round(params);
    }
    while (rounds_started_ < int64_t(most.item())) {
      start_round(params);
      rounds_->wait();
      apply_round(params);
    }
    rounds_->stop();
  } catch (...) {
    rounds_->stop();
    throw;
  }
  Tensor flat = flat_weights(params);
  comm.allreduce(flat, collectives::ReduceOp::Avg);
  write_weights(params, flat);
}

void AsyncModelAverage::abandon_training() {
  if (rounds_) rounds_->abandon();
}

std::string AsyncModelAverage::describe() const {
  std::string how = "by rounds on a background thread";
  if (rounds_ && !rounds_->threaded()) {
    const std::string backend = rounds_->communicator().backend_name();
    const std::string why = backend == "mpi"
                                ? "MPI runs below MPI_THREAD_MULTIPLE, the level the program that initialized it chose"
                                : "the " + backend + " communicator is not called from a second thread";
    how = "by rounds the training thread polls between steps (no background thread: " + why + ")";
  }
  return "async: weights averaged without blocking training every " + std::to_string(interval_ms_) + " ms " + how +
         ", after " + std::to_string(warmup_steps_) + " warm-up step(s) of gradient allreduce; " +
         std::to_string(rounds_started_) + " round(s) started, " + std::to_string(rounds_applied_) + " applied";
}

}  // namespace tandem::bagua
