// bagua async's background thread under mpirun -np 1..4 (linked into test_bagua_mpi):
//   - with the MPI Tandem initialized (MPI_THREAD_MULTIPLE) the rounds run on a thread: a round
//     completes while the training thread makes no call at all (no MPI call either, so nothing
//     but the thread can progress it), and applying it keeps the progress made meanwhile:
//     w = rank, +1 while the round is away, ends at mean + 1 on every rank;
//   - destroying the algorithm with a round in flight joins the thread; stop() right after
//     start() runs the round on every rank (a dropped round left the others waiting);
//   - CUDA weights (emulated devices, bagua_async_emulated_gpu_np2) end at mean + 1 as well;
//   - a round that times out on the thread (one rank never starts it) is a CommError on the
//     training thread that names the operation, the timeout and the missing rank.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "collectives/communicator_factory.h"
#include "engine/strategies/bagua/algorithms.h"
#include "kernels/cuda/device_query.h"
#include "mpi_test_world.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {
namespace {

using collectives::CommBackend;
using collectives::ReduceOp;
using collectives::mpitest::g_world;
using Clock = std::chrono::steady_clock;

std::shared_ptr<collectives::Communicator> own_communicator(std::chrono::milliseconds timeout) {
  collectives::CommOptions options;
  options.timeout = timeout;
  options.abort_on_timeout = false;  // the failure test ends the job cleanly itself
  return collectives::make_communicator(g_world->size() == 1 ? CommBackend::Local : CommBackend::Mpi, options);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sleeps (making no call into MPI or the algorithm) until `rounds` rounds have completed, or
// for at most 60 s; the caller asserts the count.
void wait_until_completed(const AsyncModelAverage& async, int64_t rounds) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (async.rounds_completed() < rounds && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// An interval longer than any test (23 days, also longer than this machine has been up: the
// first round must not wait for an interval to pass since steady_clock's origin, which is boot
// on Linux): the first step after the warm-up starts the only round.
const InitParams kOneRound{{"sync_interval_ms", "2000000000"}, {"warmup_steps", "0"}};

TEST(BaguaAsyncThread, ARoundCompletesWhileTheTrainingThreadIsAwayAndKeepsItsProgress) {
  const int w = g_world->size(), rank = g_world->rank();
  AsyncModelAverage async(kOneRound);
  async.set_own_communicator(own_communicator(std::chrono::seconds(60)));
  ASSERT_TRUE(async.threaded()) << async.describe();
  EXPECT_TRUE(contains(async.describe(), "background thread")) << async.describe();
  std::vector<Tensor> params = {Tensor::full({2, 3}, double(rank)), Tensor::full({5}, double(rank))};
  async.on_setup(params);
  async.after_optimizer_step(*g_world, params, 1);  // hands the snapshot (= rank) to the thread
  EXPECT_EQ(async.rounds_started(), 1);
  // The training thread is away: it neither calls the algorithm nor MPI. Only the thread can
  // complete the round (Open MPI has no progress thread of its own).
  wait_until_completed(async, 1);
  ASSERT_EQ(async.rounds_completed(), 1);
  EXPECT_EQ(async.rounds_applied(), 0);
  // Local progress meanwhile (an optimizer step would make it): +1 everywhere.
  for (Tensor& p : params) p.copy_(p + 1.0);
  async.after_optimizer_step(*g_world, params, 2);  // applies: w = (rank + 1) + (mean - rank)
  EXPECT_EQ(async.rounds_applied(), 1);
  EXPECT_EQ(async.rounds_started(), 1);  // the interval has not passed again
  const double mean = (w - 1) / 2.0;
  for (const Tensor& p : params) {
    for (float v : p.to_vector<float>()) EXPECT_FLOAT_EQ(v, float(mean + 1));
  }
  async.finish_training(*g_world, params);
  EXPECT_EQ(async.rounds_started(), 1);
  for (const Tensor& p : params) {
    for (float v : p.to_vector<float>()) EXPECT_FLOAT_EQ(v, float(mean + 1));
  }
  // A second fit starts a new thread and still pairs up.
  async.on_setup(params);
  async.after_optimizer_step(*g_world, params, 1);
  async.finish_training(*g_world, params);
  EXPECT_EQ(async.rounds_started(), 1);
  EXPECT_EQ(async.rounds_completed(), 2);
  // Destroyed with a round in flight (every rank started it): the destructor joins the thread
  // once the round completes; the weights are left alone.
  {
    AsyncModelAverage dropped(kOneRound);
    dropped.set_own_communicator(own_communicator(std::chrono::seconds(60)));
    dropped.on_setup(params);
    dropped.after_optimizer_step(*g_world, params, 1);
  }
  for (const Tensor& p : params) {
    for (float v : p.to_vector<float>()) EXPECT_FLOAT_EQ(v, float(mean + 1));
  }
}

TEST(BaguaAsyncThread, StopRightAfterStartRunsTheRoundOnEveryRank) {
  // stop() usually comes before the new thread has even picked the round up. Dropping it then
  // (as stop() once did) left the ranks whose thread had begun it waiting out the timeout.
  const int w = g_world->size(), rank = g_world->rank();
  for (int repeat = 0; repeat < 5; ++repeat) {
    AsyncRounds rounds(own_communicator(std::chrono::seconds(20)));
    ASSERT_TRUE(rounds.threaded());
    const Tensor snapshot = Tensor::full({4}, double(rank + repeat)), average = Tensor::full({4}, -1.0);
    rounds.start(snapshot, average);
    rounds.stop();
    EXPECT_EQ(rounds.completed(), 1) << "repeat " << repeat;
    EXPECT_FALSE(rounds.in_flight());
    for (float v : average.to_vector<float>()) EXPECT_FLOAT_EQ(v, float((w - 1) / 2.0 + repeat)) << "repeat " << repeat;
  }
}

TEST(BaguaAsyncThread, CudaWeightsAreAveragedThroughPinnedHostSnapshots) {
  // Run by bagua_async_emulated_gpu_np2 (emulated devices); no device here: nothing to check.
  if (cuda::visible_device_count() < 1) GTEST_SKIP() << "no CUDA device: " << cuda::device_count_note();
  const int w = g_world->size(), rank = g_world->rank();
  const Device gpu = Device::cuda(0);
  AsyncModelAverage async(kOneRound);
  async.set_own_communicator(own_communicator(std::chrono::seconds(60)));
  ASSERT_TRUE(async.threaded());
  std::vector<Tensor> params = {Tensor::full({3, 4}, double(rank)).to(gpu), Tensor::full({5}, double(rank)).to(gpu)};
  async.on_setup(params);
  async.after_optimizer_step(*g_world, params, 1);  // device -> pinned host snapshot
  wait_until_completed(async, 1);
  ASSERT_EQ(async.rounds_completed(), 1);
  for (Tensor& p : params) p.copy_(p + 1.0);  // progress on the device meanwhile
  async.after_optimizer_step(*g_world, params, 2);  // applied on the device
  EXPECT_EQ(async.rounds_applied(), 1);
  const double mean = (w - 1) / 2.0;
  async.finish_training(*g_world, params);
  for (const Tensor& p : params) {
    EXPECT_TRUE(p.device() == gpu);
    for (float v : p.to(Device::cpu()).to_vector<float>()) EXPECT_FLOAT_EQ(v, float(mean + 1));
  }
}

TEST(BaguaAsyncThread, ARoundThatTimesOutOnTheThreadIsACommErrorOnTheTrainingThread) {
  const int w = g_world->size(), rank = g_world->rank();
  if (w < 2) GTEST_SKIP() << "needs two ranks";
  const int late = w - 1;
  AsyncModelAverage async(kOneRound);
  async.set_own_communicator(own_communicator(std::chrono::seconds(3)));
  ASSERT_TRUE(async.threaded());
  std::vector<Tensor> params = {Tensor::full({7}, double(rank))};
  async.on_setup(params);
  g_world->barrier();  // every rank ready: only the late rank's absence can hold the round up
  if (rank != late) {
    async.after_optimizer_step(*g_world, params, 1);  // the round the late rank never starts
    std::string message;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (int64_t step = 2; message.empty() && Clock::now() < deadline; ++step) {
      try {
        async.after_optimizer_step(*g_world, params, step);  // training goes on meanwhile
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } catch (const CommError& e) {
        message = e.what();
      }
    }
    if (rank == 0) std::printf("  rank 0 got: %s\n", message.c_str());
    EXPECT_TRUE(contains(message, "bagua async: averaging round 1 failed on its background thread")) << message;
    EXPECT_TRUE(contains(message, "allreduce(avg, float32, 7 elements")) << message;
    EXPECT_TRUE(contains(message, "did not complete within 3.0 s")) << message;
    EXPECT_TRUE(contains(message, "ranks that did not arrive: rank " + std::to_string(late))) << message;
    EXPECT_EQ(async.rounds_applied(), 0);
    for (float v : params[0].to_vector<float>()) EXPECT_EQ(v, float(rank));  // nothing applied
    // The failure stays: the next step throws it again, and a new round cannot start.
    EXPECT_THROW(async.after_optimizer_step(*g_world, params, 1000), CommError);
  }
  // The late rank arrives once the others have failed, and completes the allreduce they
  // abandoned (their MPI progress goes on in the barrier below), so nothing stays pending.
  g_world->barrier();
  if (rank == late) {
    async.after_optimizer_step(*g_world, params, 1);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (async.rounds_applied() < 1 && Clock::now() < deadline) {
      async.after_optimizer_step(*g_world, params, 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(async.rounds_applied(), 1);
    for (float v : params[0].to_vector<float>()) EXPECT_FLOAT_EQ(v, float(w - 1) / 2);  // the others' snapshots
    async.abandon_training();  // joins the thread without a collective
  }
  g_world->barrier();
}

}  // namespace
}  // namespace tandem::bagua
