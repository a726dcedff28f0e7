// The built-in bagua algorithms (registered in builtin_algorithms.cpp; docs/STRATEGIES.md says
// what each sends).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/strategies/bagua/async_rounds.h"
#include "engine/strategies/bagua/bagua_algorithm.h"
#include "engine/strategies/bagua/compressed_average.h"

namespace tandem::bagua {

// Options of the algorithms that average gradient buckets.
struct GradientOptions {
  bool hierarchical = false;
  int ranks_per_node = 0;  // 0: the communicator's local size (the ranks the launcher put on a node)
};
GradientOptions parse_gradient_options(const InitParams& params);

// gradient_allreduce: ddp's allreduce(avg) of each bucket; hierarchical: exact averages inside
// each node, across node roots, then back inside (point_to_point.h).
class GradientAllreduce : public BaguaAlgorithm {
 public:
  explicit GradientAllreduce(const InitParams& params);
  std::string name() const override { return "gradient_allreduce"; }
  void validate(int world_size) const override;
  BucketAverager bucket_averager(const collectives::Communicator& comm) const override;
  std::string describe() const override;

 private:
  GradientOptions options_;
};

// bytegrad: each bucket averaged by compressed_group_average (8-bit chunks both ways); with
// hierarchical, exactly inside each node and compressed across node roots. Needs 2+ ranks.
class ByteGrad : public BaguaAlgorithm {
 public:
  explicit ByteGrad(const InitParams& params);
  std::string name() const override { return "bytegrad"; }
  void validate(int world_size) const override;
  BucketAverager bucket_averager(const collectives::Communicator& comm) const override;
  std::string describe() const override;

 private:
  GradientOptions options_;
};

// The peer of `rank` in exchange number `round` of shift_one (-1: it sits this round out).
// Round-robin ("circle method") pairing over m seats, m = the world size rounded up to even:
// round t pairs seat m-1 with seat t mod (m-1) and every other seat a with (2t - a) mod (m-1).
// The pairing is symmetric (my peer's peer is me, so the exchanges never deadlock) and every
// m-1 rounds each rank meets every other once. With an odd world size the rank paired with
// the extra seat keeps its weights that round.
int shift_one_peer(int rank, int world_size, int64_t round);

// decentralized: gradients stay local; every communication_interval optimizer steps the
// weights are averaged, with all ranks (allreduce) or with one peer (shift_one_peer).
class Decentralized : public BaguaAlgorithm {
 public:
  explicit Decentralized(const InitParams& params);
  std::string name() const override { return "decentralized"; }
  bool averages_gradients(int64_t /*step*/) const override { return false; }
  BucketAverager bucket_averager(const collectives::Communicator& /*comm*/) const override { return {}; }
  void after_optimizer_step(collectives::Communicator& comm, const std::vector<Tensor>& params, int64_t step) override;
  std::string describe() const override;

 private:
  bool shift_one_ = false;
  int64_t interval_ = 1;
};

// low_precision_decentralized: gradients stay local; every communication_interval optimizer
// steps each rank mixes with its ring neighbours (rank - 1 and rank + 1 mod N) as Bagua does
// (the compressed decentralized SGD of Tang et al. 2018, "DCD-PSGD"): each rank keeps a
// replica of its own weights and of each neighbour's, all equal to the common initial weights,
// and only compressed changes of the replicas travel:
//   z = (x - self) + ((self + left + right) / 3 - self)
//       the local optimizer steps since the last exchange, plus the move to the mean
//   q = z 8-bit compressed (min_max_uint8.h), sent to both neighbours
//   self += decode(q); left += decode(left's q); right += decode(right's q); x = self
// Every replica of rank j (its own, and the copies its neighbours keep) changes by the same
// decoded bits, so they stay equal bit for bit, and the weights are their own replica after
// each exchange: what a neighbour mixes with is what this rank holds. The ranks' mean moves by
// the mean optimizer step (plus compression error), as in gradient averaging. Needs 2+ ranks.
class LowPrecisionDecentralized : public BaguaAlgorithm {
 public:
  explicit LowPrecisionDecentralized(const InitParams& params);
  std::string name() const override { return "low_precision_decentralized"; }
  void validate(int world_size) const override;
  bool averages_gradients(int64_t /*step*/) const override { return false; }
  BucketAverager bucket_averager(const collectives::Communicator& /*comm*/) const override { return {}; }
  void on_setup(const std::vector<Tensor>& params) override;
  // A resumed checkpoint's weights (equal on every rank) become every replica again.
  void on_weights_restored(const std::vector<Tensor>& params) override;
  void after_optimizer_step(collectives::Communicator& comm, const std::vector<Tensor>& params, int64_t step) override;
  std::string describe() const override;

  // The flat replicas (float32) of this rank's own weights and of its left and right neighbours'.
  const Tensor& self_copy() const { return self_; }
  const Tensor& left_copy() const { return left_; }
  const Tensor& right_copy() const { return right_; }

 private:
  int64_t interval_ = 1;
  Tensor self_, left_, right_;
};

// qadam: the QAdam optimizer's communication (engine/optim/qadam.h). During QAdam's warm-up the
// gradients are averaged as gradient_allreduce does; after it they stay local and QAdam's
// momentum is averaged by compressed_group_average (8-bit chunks both ways) before each update,
// with error feedback: each parameter's momentum keeps its compression residuals (about 4 bytes
// per element per rank), so the compression error does not add up over the steps (without it a
// warm-up of 100 steps diverges: docs/PERFORMANCE.md, QAdam).
// The optimizer must be QAdam (ConfigError otherwise, at the first step).
class QAdamAlgorithm : public BaguaAlgorithm {
 public:
  explicit QAdamAlgorithm(const InitParams& /*params*/) {}
  std::string name() const override { return "qadam"; }
  std::optional<OptimizerRequirement> required_optimizer() const override {
    return OptimizerRequirement{"QAdam", "--trainer.strategy.algorithm=qadam communicates QAdam's compressed momentum",
                                "another bagua algorithm"};
  }
  // Before the first step connects to QAdam, its warm-up is not known; QAdam's is at least 1.
  bool averages_gradients(int64_t step) const override { return warmup_steps_ < 0 || step <= warmup_steps_; }
  BucketAverager bucket_averager(const collectives::Communicator& /*comm*/) const override { return {}; }
  void on_setup(const std::vector<Tensor>& params) override;
  void before_optimizer_step(collectives::Communicator& comm, optim::Optimizer& optimizer, int64_t step) override;
  std::string describe() const override;

 private:
  int64_t warmup_steps_ = -1;  // QAdam's, once connected
  std::map<const void*, CompressionResiduals> residuals_;  // by the address of each momentum tensor's data
};

// async: after warmup_steps optimizer steps of synchronous gradient allreduce, gradients stay
// local and the weights are averaged asynchronously on a communicator of the algorithm's own
// (AsyncRounds, async_rounds.h). At an optimizer step at least sync_interval_ms after the last
// round started (and none is in flight), the training thread copies the weights into a
// snapshot (host memory for MPI) and hands it over; a background thread averages it
// (allreduce(avg), blocking, with the communicator's timeout) while training goes on. A later
// step that finds the round complete moves the weights by (average - snapshot), keeping the
// progress made meanwhile. Only the training thread reads or writes the weights, and only
// between steps, so forward, backward, the optimizer, validation and checkpoints never race the
// thread, and device weights stay on the training thread's stream. Each rank starts rounds on
// its own clock; rounds pair up by order on the own communicator, and finish_training first
// brings every rank to the same number of rounds, then averages the weights exactly: the
// replicas end equal. When the communicator cannot be called from a second thread (a host
// program initialized MPI below MPI_THREAD_MULTIPLE; NCCL) the rounds are nonblocking
// allreduces the training thread polls between steps instead, and describe() says so.
// A round that fails on the thread surfaces as CommError at the next step (or in
// finish_training); the thread is joined on every path (finish, abandon, destruction).
class AsyncModelAverage : public BaguaAlgorithm {
 public:
  explicit AsyncModelAverage(const InitParams& params);
  std::string name() const override { return "async"; }
  bool averages_gradients(int64_t step) const override { return step <= warmup_steps_; }
  BucketAverager bucket_averager(const collectives::Communicator& /*comm*/) const override { return {}; }
  bool needs_own_communicator() const override { return true; }
  void set_own_communicator(std::shared_ptr<collectives::Communicator> comm) override;
  void on_setup(const std::vector<Tensor>& params) override;
  void after_optimizer_step(collectives::Communicator& comm, const std::vector<Tensor>& params, int64_t step) override;
  void finish_training(collectives::Communicator& comm, const std::vector<Tensor>& params) override;
  void abandon_training() override;
  std::string describe() const override;

  int64_t rounds_started() const { return rounds_started_; }
  int64_t rounds_applied() const { return rounds_applied_; }
  // Rounds whose allreduce completed, counted where it completed (the background thread when
  // threaded): it advances while the training thread is away. Any thread may read it.
  int64_t rounds_completed() const { return rounds_ ? rounds_->completed() : 0; }
  // True when a background thread runs the rounds; false when the training thread polls them.
  bool threaded() const { return rounds_ && rounds_->threaded(); }

 private:
  void start_round(const std::vector<Tensor>& params);
  void apply_round(const std::vector<Tensor>& params);

  int64_t interval_ms_ = 0;
  int64_t warmup_steps_ = 0;
  std::unique_ptr<AsyncRounds> rounds_;
  Tensor snapshot_, average_;  // the round in flight's (the background thread's until it completes)
  std::chrono::steady_clock::time_point last_start_{};
  int64_t rounds_started_ = 0, rounds_applied_ = 0;
};

}  // namespace tandem::bagua
