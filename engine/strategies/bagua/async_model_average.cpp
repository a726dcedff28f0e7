#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "engine/strategies/bagua/algorithms.h"

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

void AsyncModelAverage::on_setup(const std::vector<Tensor>& /*params*/) {
  TANDEM_CHECK(own_ == nullptr || !in_flight_, ValueError, "bagua async: a round is still in flight at setup");
  rounds_ = applied_ = 0;
  last_start_ = std::chrono::steady_clock::time_point{};
}

void AsyncModelAverage::start_round(const std::vector<Tensor>& params) {
  snapshot_ = flat_weights(params);
  average_ = Tensor::empty(snapshot_.shape(), snapshot_.dtype(), snapshot_.device());
  in_flight_ = own_->allreduce_async(snapshot_, average_, collectives::ReduceOp::Avg);
  last_start_ = std::chrono::steady_clock::now();
  rounds_ += 1;
}

void AsyncModelAverage::apply_round(const std::vector<Tensor>& params) {
  in_flight_->wait();
  in_flight_.reset();
  // The progress made since the snapshot stays: w <- w + (average - snapshot).
  write_weights(params, add(flat_weights(params), sub(average_, snapshot_)));
  applied_ += 1;
}

void AsyncModelAverage::after_optimizer_step(collectives::Communicator& /*comm*/, const std::vector<Tensor>& params,
                                             int64_t step) {
  if (step <= warmup_steps_ || params.empty()) return;
  TANDEM_CHECK(own_ != nullptr, ValueError, "bagua async: no communicator of its own was set up");
  NoGradGuard no_grad;
  if (in_flight_ && in_flight_->is_completed()) apply_round(params);
  const auto since = std::chrono::steady_clock::now() - last_start_;
  if (!in_flight_ && since >= std::chrono::milliseconds(interval_ms_)) start_round(params);
}

void AsyncModelAverage::finish_training(collectives::Communicator& comm, const std::vector<Tensor>& params) {
  if (params.empty() || own_ == nullptr) return;
  NoGradGuard no_grad;
  // Every rank must take part in the same number of rounds on the own communicator. Agree on it
  // before waiting for a round in flight: that round completes only once every rank started it.
  Tensor most = Tensor::scalar(double(rounds_), DType::Int64);
  comm.allreduce(most, collectives::ReduceOp::Max);
  if (in_flight_) apply_round(params);
  while (rounds_ < int64_t(most.item())) {
    start_round(params);
    apply_round(params);
  }
  Tensor flat = flat_weights(params);
  comm.allreduce(flat, collectives::ReduceOp::Avg);
  write_weights(params, flat);
}

std::string AsyncModelAverage::describe() const {
  return "async: weights averaged without blocking training every " + std::to_string(interval_ms_) + " ms after " +
         std::to_string(warmup_steps_) + " warm-up step(s) of gradient allreduce; " + std::to_string(rounds_) +
         " round(s) started, " + std::to_string(applied_) + " applied";
}

}  // namespace tandem::bagua
