// bagua under mpirun -np 1..4, against hand-derived or exactly computed references:
//   - hierarchical_average with nodes of every size that divides the world: the exact mean, the
//     same bits on every rank;
//   - compressed_group_average (bytegrad's exchange): within the bound compressed_average.h
//     states of the exact mean, the same bits on every rank, for tensors shorter than the group
//     and with odd chunks; with error feedback the sum of 40 repeated averages stays within one
//     call's bound where plain compression adds its error up;
//   - decentralized: shift_one with weights = rank gives (rank + peer) / 2, all gives the mean,
//     communication_interval skips steps; low_precision_decentralized mixes ring neighbours to
//     hand-derived values and keeps its copies of a neighbour equal to the neighbour's own;
//   - through the Trainer: gradient_allreduce equals ddp bit for bit, hierarchical within 1e-5,
//     bytegrad (SGD) within 1e-2 of ddp with identical replicas, decentralized all with identical
//     replicas, low_precision_decentralized trains, async ends with equal replicas (and is ddp
//     while warming up);
//   - QAdam (warm-up 100) through the qadam algorithm on least squares whose features wake up
//     after the warm-up: as close to the target as Adam, never farther than where it started;
//   - async's rounds started on each rank's own clock pair up, and finish_training gives every
//     rank the same number of rounds and the mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "collectives/communicator_factory.h"

#include "engine/optim/lr_scheduler.h"
#include "engine/optim/qadam.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/compressed_average.h"
#include "engine/strategies/bagua/point_to_point.h"
#include "engine/trainer/checkpoint.h"
#include "mpi_test_world.h"
#include "trainer_test_util.h"

namespace tandem::bagua {
namespace {

using collectives::ReduceOp;
using collectives::mpitest::g_world;

// True when every rank holds exactly the same values.
bool same_on_every_rank(const Tensor& t) {
  Tensor lo = t.to(DType::Float64).contiguous().clone(), hi = lo.clone();
  g_world->allreduce(lo, ReduceOp::Min);
  g_world->allreduce(hi, ReduceOp::Max);
  return lo.to_vector<double>() == hi.to_vector<double>();
}

std::vector<float> rank_values(int rank, int64_t n, float spread) {
  std::mt19937 gen(1000u + unsigned(rank));
  std::normal_distribution<float> normal(0.1f * float(rank), spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(gen);
  return v;
}

TEST(BaguaHierarchical, ExactMeanOverNodesOfEveryDivisor) {
  const int w = g_world->size();
  for (int ranks_per_node = 1; ranks_per_node <= w; ++ranks_per_node) {
    if (w % ranks_per_node != 0) continue;
    const int64_t n = 37;
    Tensor t = collectives::mpitest::contribution_tensor(g_world->rank(), n, DType::Float32, ReduceOp::Avg);
    hierarchical_average(*g_world, t, ranks_per_node, exact_group_average);
    const auto got = t.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int r = 0; r < w; ++r) sum += collectives::mpitest::contribution(r, i, ReduceOp::Avg, false);
      EXPECT_NEAR(got[size_t(i)], sum / w, 1e-6) << "ranks_per_node=" << ranks_per_node << " i=" << i;
    }
    EXPECT_TRUE(same_on_every_rank(t)) << "ranks_per_node=" << ranks_per_node;
  }
  if (w == 4) EXPECT_THROW(check_node_grouping(4, 3), ConfigError);
}

TEST(BaguaByteGrad, CompressedMeanWithinTheStatedBound) {
  const int w = g_world->size();
  std::vector<int> everyone;
  for (int r = 0; r < w; ++r) everyone.push_back(r);
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(1001), int64_t(5000)}) {
    for (int64_t block : {int64_t(7), int64_t(1024)}) {
      Tensor t = Tensor::from_vector(rank_values(g_world->rank(), n, 2.0f), {n});
      compressed_group_average(*g_world, t, everyone, block);
      EXPECT_TRUE(same_on_every_rank(t)) << "n=" << n;
      // Every rank knows every rank's values (seeded by rank), so it computes the exact mean
      // and the bound for the chunk layout of compressed_average.h.
      std::vector<std::vector<float>> all;
      for (int r = 0; r < w; ++r) all.push_back(rank_values(r, n, 2.0f));
      std::vector<double> mean(size_t(n), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        for (int r = 0; r < w; ++r) mean[size_t(i)] += all[size_t(r)][size_t(i)];
        mean[size_t(i)] /= w;
      }
      const auto got = t.to_vector<float>();
      for (int owner = 0; owner < w; ++owner) {
        const int64_t first = collectives::chunk_offset(n, w, owner), count = collectives::chunk_count(n, w, owner);
        for (int64_t b = 0; b < count; b += block) {
          const int64_t len = std::min(block, count - b);
          auto range = [&](auto value_at) {
            double lo = 1e30, hi = -1e30;
            for (int64_t i = first + b; i < first + b + len; ++i) lo = std::min(lo, value_at(i)), hi = std::max(hi, value_at(i));
            return hi - lo;
          };
          double first_stage = 0;
          for (int r = 0; r < w; ++r) {
            if (r != owner) first_stage += range([&](int64_t i) { return double(all[size_t(r)][size_t(i)]); }) / 510.0;
          }
          first_stage /= w;
          // The mean that was recompressed is within first_stage of the exact one, so its range is
          // at most the exact range + 2 x first_stage.
          const double second_stage = (range([&](int64_t i) { return mean[size_t(i)]; }) + 2 * first_stage) / 510.0;
          const double tolerance = first_stage + second_stage + 1e-5;
          for (int64_t i = first + b; i < first + b + len; ++i) {
            ASSERT_LE(std::fabs(got[size_t(i)] - mean[size_t(i)]), tolerance) << "n=" << n << " block=" << block << " i=" << i;
          }
        }
      }
      if (w > 1 && n == 5000) {
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(got[size_t(i)] - mean[size_t(i)]));
        EXPECT_GT(worst, 0.0) << "a compressed exchange should not be exact on normal data";
      }
    }
  }
}

// The same values averaged 40 times. Plain, every call makes the same error, so the outputs'
// sum misses 40 x the mean by 40 x that error. With residuals, the sum telescopes (compressed_average.h):
//   sum of outputs = 40 x mean - (1/G) x sum over the senders j of r_j - R
// with each r_j and R the last residual, within half a step of its block: |error| <= one call's
// bound, (1/G) x sum_j range_j / 510 + range(mean) / 510, ranges widened by the residuals (x1.01).
TEST(BaguaQAdam, ErrorFeedbackKeepsTheSumOfRepeatedAveragesWithinOneCallsBound) {
  const int w = g_world->size();
  if (w < 2) GTEST_SKIP() << "one rank averages nothing";
  std::vector<int> everyone;
  for (int r = 0; r < w; ++r) everyone.push_back(r);
  const int64_t n = 301, block = 16, calls = 40;
  std::vector<double> mean(size_t(n), 0.0);
  double widest = 0.0;  // the largest block range of any rank's values
  for (int r = 0; r < w; ++r) {
    const std::vector<float> v = rank_values(r, n, 2.0f);
    for (int64_t i = 0; i < n; ++i) mean[size_t(i)] += double(v[size_t(i)]) / w;
    for (int64_t b = 0; b < n; b += block) {
      const auto [lo, hi] = std::minmax_element(v.begin() + b, v.begin() + std::min(n, b + block));
      widest = std::max(widest, double(*hi) - double(*lo));
    }
  }
  const double one_call = 1.01 * (double(w - 1) / w * widest / 510.0 + widest / 510.0);
  CompressionResiduals residuals;
  std::vector<double> fed_back(size_t(n), 0.0), plain(size_t(n), 0.0);
  for (int64_t c = 0; c < calls; ++c) {
    Tensor with = Tensor::from_vector(rank_values(g_world->rank(), n, 2.0f), {n});
    compressed_group_average(*g_world, with, everyone, block, &residuals);
    EXPECT_TRUE(same_on_every_rank(with));
    Tensor without = Tensor::from_vector(rank_values(g_world->rank(), n, 2.0f), {n});
    compressed_group_average(*g_world, without, everyone, block);
    const auto a = with.to_vector<float>(), b = without.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) fed_back[size_t(i)] += a[size_t(i)], plain[size_t(i)] += b[size_t(i)];
  }
  double worst_fed_back = 0.0, worst_plain = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    worst_fed_back = std::max(worst_fed_back, std::fabs(fed_back[size_t(i)] - calls * mean[size_t(i)]));
    worst_plain = std::max(worst_plain, std::fabs(plain[size_t(i)] - calls * mean[size_t(i)]));
  }
  EXPECT_LE(worst_fed_back, one_call + calls * 1e-6);
  EXPECT_GT(worst_plain, 4 * one_call) << "without feedback the same error adds up over the calls";
}

TEST(BaguaByteGrad, NonFiniteGradientsStayNonFinite) {
  const int w = g_world->size();
  if (w < 2) GTEST_SKIP() << "bytegrad needs 2 ranks";
  std::vector<int> everyone;
  for (int r = 0; r < w; ++r) everyone.push_back(r);
  std::vector<float> v(64, 1.0f);
  if (g_world->rank() == 1) v[5] = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::from_vector(v, {64});
  compressed_group_average(*g_world, t, everyone, 16);
  const auto got = t.to_vector<float>();
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_EQ(got[63], 1.0f);
}

std::vector<Tensor> rank_weights(double value) {
  return {Tensor::full({2, 3}, value), Tensor::full({4}, value)};
}

TEST(BaguaDecentralized, ShiftOneAveragesWithTheRoundsPeerAndAllWithEveryone) {
  const int w = g_world->size(), rank = g_world->rank();
  Decentralized shift_one({{"peer_selection_mode", "shift_one"}, {"communication_interval", "2"}});
  std::vector<Tensor> params = rank_weights(rank);
  shift_one.after_optimizer_step(*g_world, params, 1);  // not an exchange step
  EXPECT_EQ(params[1].to_vector<float>()[0], float(rank));
  shift_one.after_optimizer_step(*g_world, params, 2);  // exchange number 0
  const int peer = shift_one_peer(rank, w, 0);
  const float expected = peer < 0 ? float(rank) : float(rank + peer) / 2;
  for (const Tensor& p : params) {
    for (float x : p.to_vector<float>()) EXPECT_EQ(x, expected) << "rank " << rank << " peer " << peer;
  }
  // The next exchange (step 4) meets another peer: weights = rank again for a clean check.
  params = rank_weights(rank);
  shift_one.after_optimizer_step(*g_world, params, 4);
  const int next = shift_one_peer(rank, w, 1);
  if (w > 2) EXPECT_NE(next, peer);
  EXPECT_EQ(params[0].to_vector<float>()[0], next < 0 ? float(rank) : float(rank + next) / 2);

  Decentralized all({{"peer_selection_mode", "all"}, {"communication_interval", "1"}});
  params = rank_weights(rank);
  all.after_optimizer_step(*g_world, params, 1);
  EXPECT_FLOAT_EQ(params[0].to_vector<float>()[5], float(w - 1) / 2);
}

TEST(BaguaLowPrecisionDecentralized, RingMixingWithHandDerivedValuesAndConsistentReplicas) {
  const int w = g_world->size(), rank = g_world->rank();
  if (w < 2) GTEST_SKIP() << "ring neighbours need 2 ranks (refused on one: test_strategies_cli)";
  const int left = (rank + w - 1) % w, right = (rank + 1) % w;
  LowPrecisionDecentralized ring(InitParams{{"communication_interval", "1"}});
  std::vector<Tensor> params = rank_weights(1.0);
  ring.on_setup(params);  // every replica starts at the common weights, 1
  // A local step to `rank`: z = (rank - 1) + ((1 + 1 + 1) / 3 - 1) = rank - 1, constant, so it
  // compresses exactly; the weights and every replica of rank r become r.
  params = rank_weights(rank);
  ring.after_optimizer_step(*g_world, params, 1);
  EXPECT_NEAR(params[0].to_vector<float>()[0], rank, 1e-6);
  EXPECT_NEAR(ring.self_copy().to_vector<float>()[3], rank, 1e-6);
  EXPECT_NEAR(ring.left_copy().to_vector<float>()[3], left, 1e-6);
  EXPECT_NEAR(ring.right_copy().to_vector<float>()[3], right, 1e-6);
  // No local step: the weights move to the neighbourhood's mean, (r - 1 + r + r + 1) / 3 = r
  // away from the ring's seam, so the ranks' mean stays (w - 1) / 2.
  auto mix = [w](int r) { return (r + (r + w - 1) % w + (r + 1) % w) / 3.0; };
  ring.after_optimizer_step(*g_world, params, 2);
  EXPECT_NEAR(params[1].to_vector<float>()[2], mix(rank), 1e-6);
  EXPECT_NEAR(ring.left_copy().to_vector<float>()[0], mix(left), 1e-6);
  Tensor mean = Tensor::scalar(double(params[0].to_vector<float>()[0]));
  g_world->allreduce(mean, ReduceOp::Avg);
  EXPECT_NEAR(mean.item(), (w - 1) / 2.0, 1e-6);

  // Random weights (inexact compression): the weights are their own replica, and my replica of
  // my left neighbour is, bit for bit, its own.
  for (int step = 3; step < 6; ++step) {
    const auto v = rank_values(rank * 10 + step, 10, 1.0f);
    params = {Tensor::from_vector(std::vector<float>(v.begin(), v.begin() + 6), {2, 3}),
              Tensor::from_vector(std::vector<float>(v.begin() + 6, v.end()), {4})};
    ring.after_optimizer_step(*g_world, params, step);
  }
  std::vector<float> mine = params[0].to_vector<float>(), tail = params[1].to_vector<float>();
  mine.insert(mine.end(), tail.begin(), tail.end());
  EXPECT_EQ(mine, ring.self_copy().to_vector<float>());
  Tensor lefts_own = Tensor::empty(ring.self_copy().shape());
  auto recv = g_world->recv_async(lefts_own, left, 7499);
  auto send = g_world->send_async(ring.self_copy(), right, 7499);
  send->wait();
  recv->wait();
  EXPECT_EQ(lefts_own.to_vector<float>(), ring.left_copy().to_vector<float>());
}

TEST(BaguaAsync, RoundsPairUpAcrossRanksAndFinishEqualizesThem) {
  const int w = g_world->size(), rank = g_world->rank();
  collectives::CommOptions comm_options;
  comm_options.timeout = std::chrono::seconds(60);
  AsyncModelAverage async(InitParams{{"sync_interval_ms", "1"}, {"warmup_steps", "1"}});
  async.set_own_communicator(collectives::make_communicator(
      w == 1 ? collectives::CommBackend::Local : collectives::CommBackend::Mpi, comm_options));
  std::vector<Tensor> params = rank_weights(rank);
  async.on_setup(params);
  async.after_optimizer_step(*g_world, params, 1);  // warm-up: nothing
  EXPECT_EQ(async.rounds_started(), 0);
  // Rank 0 steps (and starts rounds) more often than the others: rounds on its own clock.
  const int steps = rank == 0 ? 4 : 2;
  for (int step = 2; step < 2 + steps; ++step) {
    async.after_optimizer_step(*g_world, params, step);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_GE(async.rounds_started(), 1);
  async.finish_training(*g_world, params);
  Tensor rounds = Tensor::scalar(double(async.rounds_started()), DType::Int64);
  EXPECT_TRUE(same_on_every_rank(rounds));
  EXPECT_EQ(async.rounds_applied(), async.rounds_started());
  // No training between rounds: every round moves the weights to the mean, and so does the end.
  for (const Tensor& p : params) {
    EXPECT_TRUE(same_on_every_rank(p));
    EXPECT_NEAR(p.to_vector<float>()[0], (w - 1) / 2.0, 1e-6);
  }
}

// ---- through the Trainer ----

using trainer::TrainerOptions;
using trainer::testing::SyntheticDataModule;
using trainer::testing::TinyClassifier;

// TinyClassifier with plain SGD: each step moves the weights by lr x the averaged gradient, so a
// compressed gradient's error shows up in the weights unmagnified (Adam divides tiny gradients by
// their own tiny scale).
class SgdClassifier : public TinyClassifier {
 public:
  SgdClassifier() : TinyClassifier(0.2, 0.0) {}
  trainer::OptimizerConfig configure_optimizers() override {
    trainer::OptimizerConfig c;
    c.optimizer = std::make_shared<optim::SGD>(parameters(), optim::SGDOptions{.lr = lr});
    return c;
  }
};

// TinyClassifier with QAdam (warm-up `warmup` steps, Adam's settings and scheduler otherwise).
class QAdamClassifier : public TinyClassifier {
 public:
  explicit QAdamClassifier(int64_t warmup) : TinyClassifier(0.05, 0.0), warmup_(warmup) {}
  trainer::OptimizerConfig configure_optimizers() override {
    trainer::OptimizerConfig c;
    c.optimizer = std::make_shared<optim::QAdam>(parameters(), optim::AdamOptions{.lr = lr}, warmup_);
    c.scheduler = std::make_shared<optim::StepLR>(*c.optimizer, 2, 0.5);  // TinyClassifier's
    return c;
  }

 private:
  int64_t warmup_;
};

std::vector<float> fit_weights(const std::string& strategy, const InitParams& options, bool sgd = false,
                               int64_t qadam_warmup = 0) {
  Tensor pid = Tensor::scalar(double(getpid()), DType::Int64);
  g_world->broadcast(pid, 0);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("tandem_bagua_" + std::to_string(int64_t(pid.item())))).string();
  SyntheticDataModule dm(40, 16, 4);
  manual_seed(42);
  std::unique_ptr<TinyClassifier> model;
  if (qadam_warmup > 0) {
    model = std::make_unique<QAdamClassifier>(qadam_warmup);
  } else if (sgd) {
    model = std::make_unique<SgdClassifier>();
  } else {
    model = std::make_unique<TinyClassifier>(0.05, 0.0);
  }
  TrainerOptions o = trainer::testing::quiet_options(dir);
  o.strategy = strategy;
  o.strategy_options = options;
  o.devices = g_world->size();
  o.max_epochs = 2;
  o.num_sanity_val_steps = 0;
  trainer::Trainer trainer(o);
  EXPECT_EQ(trainer.world_size(), g_world->size());
  trainer.fit(*model, dm);
  g_world->barrier();
  if (g_world->rank() == 0) std::filesystem::remove_all(dir);
  return trainer::testing::flat_weights(*model);
}

bool replicas_equal(const std::vector<float>& w) {
  return same_on_every_rank(Tensor::from_vector(w, {int64_t(w.size())}));
}

TEST(BaguaTrainer, GradientAllreduceIsDdpAndHierarchicalIsWithinRounding) {
  const std::vector<float> ddp = fit_weights("ddp", {});
  EXPECT_EQ(fit_weights("bagua", {}), ddp);
  EXPECT_EQ(fit_weights("bagua", {{"algorithm", "gradient_allreduce"}}), ddp);
  const int w = g_world->size();
  for (int ranks_per_node : {1, 2, w}) {
    if (w % ranks_per_node != 0) continue;
    const std::vector<float> h =
        fit_weights("bagua", {{"hierarchical", "true"}, {"ranks_per_node", std::to_string(ranks_per_node)}});
    EXPECT_LE(trainer::testing::max_relative_difference(h, ddp), 1e-5) << "ranks_per_node=" << ranks_per_node;
    EXPECT_TRUE(replicas_equal(h));
  }
  manual_seed(42);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_GT(trainer::testing::max_relative_difference(trainer::testing::flat_weights(untouched), ddp), 1e-3);
}

TEST(BaguaTrainer, ByteGradTrainsCloseToDdpWithIdenticalReplicas) {
  const int w = g_world->size();
  if (w < 2) GTEST_SKIP() << "bytegrad is refused on one rank (test_bagua_unit, test_strategies_cli)";
  const std::vector<float> ddp = fit_weights("ddp", {}, /*sgd=*/true);
  for (const InitParams& options : {InitParams{{"algorithm", "bytegrad"}},
                                    InitParams{{"algorithm", "bytegrad"}, {"hierarchical", "true"}, {"ranks_per_node", "2"}}}) {
    if (options.count("ranks_per_node") && w % 2 != 0) continue;
    const std::vector<float> b = fit_weights("bagua", options, /*sgd=*/true);
    EXPECT_TRUE(replicas_equal(b));
    // At most 8 SGD steps of lr 0.2; each averaged gradient is within about range / 255 of ddp's
    // (compressed_average.h), and the gradients' ranges here are below 1: the weights stay within
    // 8 x 0.2 / 255 ~ 6e-3 of ddp's, 6e-2 relative at max_relative_difference's floor of 0.1.
    // (Measured here: 1.1e-2 at 3 ranks.)
    EXPECT_LE(trainer::testing::max_relative_difference(b, ddp), 6e-2);
    // Compression changes the result unless there is only one node (all exact inside it).
    const bool compressed = !options.count("ranks_per_node") || w / 2 >= 2;
    if (compressed) EXPECT_NE(b, ddp);
    manual_seed(42);
    SgdClassifier untouched;
    EXPECT_GT(trainer::testing::max_relative_difference(trainer::testing::flat_weights(untouched), ddp), 0.3);
  }
}

TEST(BaguaTrainer, AsyncEndsWithEqualReplicasAndIsDdpWhileWarmingUp) {
  const std::vector<float> ddp = fit_weights("ddp", {});
  // Warm-up longer than the run: synchronous allreduce throughout, then the final average.
  const std::vector<float> warm = fit_weights("bagua", {{"algorithm", "async"}, {"warmup_steps", "1000"}});
  EXPECT_LE(trainer::testing::max_relative_difference(warm, ddp), 1e-6);
  const std::vector<float> async = fit_weights("bagua", {{"algorithm", "async"}, {"sync_interval_ms", "1"},
                                                         {"warmup_steps", "2"}});
  EXPECT_TRUE(replicas_equal(async));
  for (float v : async) ASSERT_TRUE(std::isfinite(v));
  manual_seed(42);
  TinyClassifier untouched(0.05, 0.0);
  EXPECT_GT(trainer::testing::max_relative_difference(trainer::testing::flat_weights(untouched), async), 1e-3);
}

TEST(BaguaTrainer, QAdamIsAdamWhileWarmingUpThenKeepsReplicasEqual) {
  const std::vector<float> ddp = fit_weights("ddp", {});
  // A warm-up longer than the run: Adam on allreduced gradients, as ddp with Adam.
  const std::vector<float> warm = fit_weights("bagua", {{"algorithm", "qadam"}}, false, /*qadam_warmup=*/1000);
  EXPECT_EQ(warm, ddp);
  // Two warm-up steps, then compressed momentum: the same on every rank, near Adam's.
  const std::vector<float> compressed = fit_weights("bagua", {{"algorithm", "qadam"}}, false, /*qadam_warmup=*/2);
  EXPECT_TRUE(replicas_equal(compressed));
  for (float v : compressed) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(compressed, ddp);
}

// Least squares shaped like what made QAdam diverge on the Fashion-MNIST MLP (docs/PERFORMANCE.md):
// features 24-31 are scaled by 1e-6 during the warm-up, as the input of a unit that is inactive
// then, so their frozen variance is ~1e-12 of the others'; after the warm-up they are ordinary.
// Feature 0 is 5x the others, so each compression block's range is set by large momenta.
// Each rank draws its own batches; Adam averages the gradients exactly every step, QAdam does
// during its 100-step warm-up and then averages its momentum through the qadam algorithm.
struct LeastSquares {
  static constexpr int64_t kFeatures = 32, kBatch = 16, kWarmUp = 100, kSteps = 300;
  std::vector<double> target = std::vector<double>(kFeatures);
  LeastSquares() {
    std::mt19937 gen(7);
    std::normal_distribution<double> normal(0.0, 0.5);
    for (auto& w : target) w = normal(gen);
  }
  // This rank's mean gradient of 0.5 (x.w - y)^2 over its batch at step t.
  std::vector<float> gradient(const std::vector<float>& w, int64_t t) const {
    std::mt19937 gen(unsigned(1000 * t + g_world->rank()));
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<float> g(kFeatures, 0.0f);
    for (int64_t b = 0; b < kBatch; ++b) {
      std::vector<double> x(kFeatures);
      double error = normal(gen) * 0.01;  // y's noise, negated
      for (int64_t i = 0; i < kFeatures; ++i) {
        x[i] = normal(gen) * (i == 0 ? 5.0 : i >= 24 && t <= kWarmUp ? 1e-6 : 1.0);
        error += x[i] * (double(w[i]) - target[i]);
      }
      for (int64_t i = 0; i < kFeatures; ++i) g[i] += float(error * x[i] / kBatch);
    }
    return g;
  }
  double distance(const std::vector<float>& w) const {
    double d = 0.0;
    for (int64_t i = 0; i < kFeatures; ++i) d += (double(w[i]) - target[i]) * (double(w[i]) - target[i]);
    return std::sqrt(d);
  }
};

TEST(BaguaQAdam, AWarmUpOf100TrainsAsAdamDoesWhenFeaturesWakeUpAfterIt) {
  const LeastSquares problem;
  const optim::AdamOptions options{.lr = 0.05};
  auto averaged = [](std::vector<float> g) {
    Tensor t = Tensor::from_vector(g, {int64_t(g.size())});
    g_world->allreduce(t, ReduceOp::Avg);
    return t;
  };
  Tensor a = Tensor::zeros({LeastSquares::kFeatures}).requires_grad_();
  Tensor q = Tensor::zeros({LeastSquares::kFeatures}).requires_grad_();
  optim::Adam adam({a}, options);
  optim::QAdam qadam({q}, options, LeastSquares::kWarmUp);
  // A cosine schedule over the run, as `tandem fit`'s default: the woken features, whose frozen
  // variance is tiny, take steps of lr x B (qadam.h) around the target, which shrink with lr.
  optim::CosineAnnealingLR adam_schedule(adam, LeastSquares::kSteps), qadam_schedule(qadam, LeastSquares::kSteps);
  QAdamAlgorithm algorithm({});
  algorithm.on_setup({q});
  double worst_qadam = 0.0;  // the farthest QAdam's weights get from the target after the warm-up
  for (int64_t t = 1; t <= LeastSquares::kSteps; ++t) {
    a.set_grad(averaged(problem.gradient(a.to_vector<float>(), t)));
    adam.step();
    adam_schedule.step();
    const std::vector<float> g = problem.gradient(q.to_vector<float>(), t);
    q.set_grad(algorithm.averages_gradients(t) ? averaged(g) : Tensor::from_vector(g, {int64_t(g.size())}));
    algorithm.before_optimizer_step(*g_world, qadam, t);
    qadam.step();
    qadam_schedule.step();
    if (t > LeastSquares::kWarmUp) worst_qadam = std::max(worst_qadam, problem.distance(q.to_vector<float>()));
  }
  EXPECT_TRUE(same_on_every_rank(q));
  const double start = problem.distance(std::vector<float>(LeastSquares::kFeatures, 0.0f));
  const double end_adam = problem.distance(a.to_vector<float>()), end_qadam = problem.distance(q.to_vector<float>());
  // Unbounded, the woken features' first steps are ~1e4 x lr (weights of ~100): worst_qadam
  // would be far above the starting distance. Bounded, every step is at most 3.2 x lr.
  EXPECT_LT(worst_qadam, start) << "QAdam moved away from the target after its warm-up";
  EXPECT_LT(end_adam, 0.1 * start);
  EXPECT_LT(end_qadam, 0.1 * start);
  EXPECT_NEAR(end_qadam, end_adam, 0.02 * start) << "adam " << end_adam << " qadam " << end_qadam << " start " << start << " worst " << worst_qadam;
}

TEST(BaguaTrainer, DecentralizedAllKeepsReplicasEqual) {
  const std::vector<float> d = fit_weights("bagua", {{"algorithm", "decentralized"}});
  EXPECT_TRUE(replicas_equal(d));
  const std::vector<float> shift = fit_weights("bagua", {{"algorithm", "decentralized"}, {"peer_selection_mode", "shift_one"}});
  EXPECT_EQ(replicas_equal(shift), g_world->size() <= 2) << "shift_one at 2 ranks is all; beyond, replicas differ";
}

// The L2 distance between two weight vectors.
double distance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum);
}

// SgdClassifier (SGD without momentum: no optimizer state) whose loss is zeroed when frozen.
class FreezableSgd : public SgdClassifier {
 public:
  Tensor training_step(const data::Batch& b, int64_t i) override {
    Tensor loss = SgdClassifier::training_step(b, i);
    return frozen ? loss * 0.0 : loss;
  }
  bool frozen = false;
};

// A resumed fit re-takes every replica from the checkpoint's weights (equal on every rank): with
// zero gradients nothing moves, so each exchange sends z = (x + x + x) / 3 - x, zero up to float32
// rounding (measured: 1 ulp, 6e-8), and the weights stay the checkpoint's. Replicas left at the
// fresh model's weights would send z = checkpoint - fresh, whose 8-bit error (up to its block's
// range / 510) would move them.
TEST(BaguaTrainer, LowPrecisionDecentralizedResumesFromTheCheckpointsWeights) {
  if (g_world->size() < 2) GTEST_SKIP() << "ring neighbours need 2 ranks (refused on one: test_strategies_cli)";
  Tensor pid = Tensor::scalar(double(getpid()), DType::Int64);
  g_world->broadcast(pid, 0);
  const std::string dir = (std::filesystem::temp_directory_path() / ("tandem_bagua_resume_" + std::to_string(int64_t(pid.item())))).string();
  SyntheticDataModule dm(40, 16, 4);
  TrainerOptions o = trainer::testing::quiet_options(dir);
  o.strategy = "bagua";
  o.strategy_options = {{"algorithm", "low_precision_decentralized"}};
  o.devices = g_world->size();
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  o.enable_checkpointing = true;
  {
    manual_seed(42);
    FreezableSgd model;
    trainer::Trainer trainer(o);
    trainer.fit(model, dm);
  }
  g_world->barrier();
  std::string checkpoint;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") checkpoint = e.path().string();
  }
  ASSERT_FALSE(checkpoint.empty());
  const auto saved = trainer::load_checkpoint(checkpoint).model;
  manual_seed(42);
  FreezableSgd frozen;
  frozen.frozen = true;
  o.max_epochs = 2;
  trainer::Trainer resumed(o);
  resumed.fit(frozen, dm, checkpoint);
  for (const auto& [name, p] : frozen.named_parameters()) {
    const auto now = p.to_vector<float>(), then = saved.at(name).to_vector<float>();
    for (size_t i = 0; i < now.size(); ++i) EXPECT_NEAR(now[i], then[i], 1e-6) << name << "[" << i << "]";
  }
  g_world->barrier();
  if (g_world->rank() == 0) std::filesystem::remove_all(dir);
}

TEST(BaguaTrainer, LowPrecisionDecentralizedTrainsAsFarAsDdp) {
  if (g_world->size() < 2) GTEST_SKIP() << "ring neighbours need 2 ranks (refused on one: test_strategies_cli)";
  const std::vector<float> ddp = fit_weights("bagua", {{"algorithm", "gradient_allreduce"}});
  const std::vector<float> ring = fit_weights("bagua", {{"algorithm", "low_precision_decentralized"}});
  for (float v : ring) ASSERT_TRUE(std::isfinite(v));
  manual_seed(42);
  TinyClassifier untouched(0.05, 0.0);
  const std::vector<float> initial = trainer::testing::flat_weights(untouched);
  // The ranks' mean moves by the mean local step, as gradient averaging's weights do: it ends as
  // near ddp's weights as full-precision decentralized averaging does (measured 1.10x, 0.86x,
  // 0.94x of its distance at 2, 3, 4 ranks; 0.23-0.37 of ddp's travel). Mixing the weights after
  // the local step, as this algorithm did before, moved the ranks' mean by a third of the mean
  // local step only (the sum of the mixes is the sum of the stepped weights plus the neighbours'
  // unstepped copies, over 3).
  Tensor mean = Tensor::from_vector(ring, {int64_t(ring.size())});
  g_world->allreduce(mean, ReduceOp::Avg);
  const std::vector<float> full = fit_weights("bagua", {{"algorithm", "decentralized"}});
  const double travel = distance(initial, ddp), apart = distance(mean.to_vector<float>(), ddp);
  EXPECT_LT(apart, 1.25 * distance(full, ddp)) << "full-precision decentralized ended " << distance(full, ddp) << " from ddp";
  EXPECT_LT(apart, 0.5 * travel) << "ddp travelled " << travel << ", the ring's mean ended " << apart << " from it";
}

}  // namespace
}  // namespace tandem::bagua
