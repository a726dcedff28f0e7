// The scaling model (engine/strategies/scaling_model.h) against values derived by hand from its
// formulas: collective costs, which allreduce NCCL's rule picks, and how buckets overlap
// backward.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/strategies/scaling_model.h"

namespace tandem::scaling {
namespace {

Cluster one_node(int ranks, double alpha_s, double bytes_per_s) {
  Cluster c;
  c.ranks_per_node = ranks;
  c.intra = {alpha_s, bytes_per_s};
  return c;
}

TEST(ScalingModel, RingAllreduceIsTwoPMinusOneStepsOfAPthOfTheBytes) {
  const Cluster c = one_node(4, 1e-5, 1e9);
  // 2 * 3 * 1e-5 + 2 * 3 / 4 * 4e6 / 1e9
  EXPECT_DOUBLE_EQ(ring_allreduce_s(4'000'000, c), 6e-5 + 6e-3);
  // One node: the tree pays 2 n / B, more than the ring's 2 (p - 1) / p n / B.
  EXPECT_DOUBLE_EQ(tree_allreduce_s(4'000'000, c), 2 * 3 * 1e-5 + 8e-3);
  EXPECT_DOUBLE_EQ(allreduce_s(4'000'000, c), ring_allreduce_s(4'000'000, c));
  EXPECT_DOUBLE_EQ(reduce_scatter_s(4'000'000, c) + all_gather_s(4'000'000, c), ring_allreduce_s(4'000'000, c));
  EXPECT_EQ(allreduce_s(4'000'000, one_node(1, 1e-5, 1e9)), 0.0);
}

TEST(ScalingModel, ManyNodesTakeTheTreeForSmallMessagesAndTheSlowerLinksBandwidth) {
  Cluster c;
  c.nodes = 128;
  c.ranks_per_node = 8;
  c.intra = {2e-6, 370e9};
  c.inter = {6e-6, 400e9};
  // Ring: 2 * 1023 steps at the inter-node latency; the bandwidth is the smaller one, 370e9.
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1024, c), 2.0 * 1023 * 6e-6 + 2.0 * 1023 / 1024 * 1024 / 370e9);
  // Tree: 2 * (7 levels * 6e-6 + 7 chain hops * 2e-6) + 2 * 1024 / 370e9.
  EXPECT_DOUBLE_EQ(tree_allreduce_s(1024, c), 2 * (7 * 6e-6 + 7 * 2e-6) + 2048 / 370e9);
  EXPECT_DOUBLE_EQ(allreduce_s(1024, c), tree_allreduce_s(1024, c));
  // Even 1 GB: the ring's 2 * 1023 latencies (12 ms) outweigh what its bandwidth term saves.
  EXPECT_DOUBLE_EQ(allreduce_s(1'000'000'000, c), tree_allreduce_s(1'000'000'000, c));
  // Two nodes, 1 GB: 30 latencies (0.18 ms) and 2 * 15 / 16 GB beat the tree's 2 GB (0.34 ms more).
  Cluster two = c;
  two.nodes = 2;
  EXPECT_DOUBLE_EQ(allreduce_s(1'000'000'000, two), 30 * 6e-6 + 2.0 * 15 / 16 * 1e9 / 370e9);
  // A neighbour exchange across nodes shares the node's NICs among its 8 ranks: 400e9 / 8.
  EXPECT_DOUBLE_EQ(neighbour_exchange_s(5'000'000, c), 6e-6 + 5e6 / 50e9);
}

TEST(ScalingModel, BucketsThatFinishBeforeBackwardEndsAreHidden) {
  StepProfile profile{.forward_s = 0.01, .backward_s = 0.02, .optimizer_s = 0.005, .bucket_bytes = {1'000'000, 1'000'000}};
  // Each bucket: 2 * 1 / 2 * 1e6 / 1e9 = 1 ms. Ready at 0.02 and 0.03 s, done at 0.021 and 0.031.
  const StepPrediction fast = predict_step(profile, one_node(2, 0.0, 1e9), Averaging::Allreduce);
  ASSERT_EQ(fast.bucket_done_s.size(), 2u);
  EXPECT_DOUBLE_EQ(fast.bucket_done_s[0], 0.021);
  EXPECT_DOUBLE_EQ(fast.bucket_done_s[1], 0.031);
  EXPECT_NEAR(fast.exposed_s, 0.001, 1e-15);
  EXPECT_DOUBLE_EQ(fast.compute_s, 0.035);
  EXPECT_NEAR(fast.step_s, 0.036, 1e-15);
  EXPECT_NEAR(fast.efficiency, 0.035 / 0.036, 1e-12);
  EXPECT_DOUBLE_EQ(fast.communication_s, 0.002);

  // A slow link: 1 s a bucket, queued one after the other: done at 1.02 and 2.02 s.
  const StepPrediction slow = predict_step(profile, one_node(2, 0.0, 1e6), Averaging::Allreduce);
  EXPECT_DOUBLE_EQ(slow.bucket_done_s[1], 2.02);
  EXPECT_NEAR(slow.exposed_s, 2.02 - 0.03, 1e-12);

  // One rank: nothing to send, efficiency 1.
  const StepPrediction alone = predict_step(profile, one_node(1, 1e-5, 1e9), Averaging::Allreduce);
  EXPECT_EQ(alone.exposed_s, 0.0);
  EXPECT_DOUBLE_EQ(alone.efficiency, 1.0);
}

TEST(ScalingModel, HostCpuPerByteLengthensBackwardByWhatTheRankSends) {
  StepProfile profile{.forward_s = 0.01, .backward_s = 0.02, .optimizer_s = 0.005, .bucket_bytes = {1'000'000, 1'000'000}};
  Cluster c = one_node(4, 0.0, 1e9);
  c.host_s_per_byte = 2e-9;
  // 4 ranks send 2 * 3 / 4 * 2e6 = 3e6 bytes during backward: 6 ms of the computing cores.
  // Backward becomes 26 ms; the buckets (1.5 ms each) are ready at 0.01 + 0.013 and 0.036.
  const StepPrediction p = predict_step(profile, c, Averaging::Allreduce);
  EXPECT_NEAR(p.host_s, 0.006, 1e-15);
  EXPECT_NEAR(p.compute_s, 0.041, 1e-15);
  EXPECT_NEAR(p.bucket_done_s[0], 0.0245, 1e-15);
  EXPECT_NEAR(p.bucket_done_s[1], 0.0375, 1e-15);
  EXPECT_NEAR(p.exposed_s, 0.0015, 1e-15);
  EXPECT_NEAR(p.step_s, 0.0425, 1e-15);
  EXPECT_NEAR(p.efficiency, 0.035 / 0.0425, 1e-12);
  // ZeRO-1 sends half of it during backward; the all-gather after the step is exposed whole.
  EXPECT_NEAR(predict_step(profile, c, Averaging::ShardedOptimizer).host_s, 0.003, 1e-15);
  // Decentralized averaging exchanges weights after the step: nothing overlaps backward.
  EXPECT_EQ(predict_step(profile, c, Averaging::Decentralized).host_s, 0.0);
  // One rank sends nothing.
  EXPECT_EQ(predict_step(profile, one_node(1, 0.0, 1e9), Averaging::Allreduce).host_s, 0.0);
}

TEST(ScalingModel, EachAveragingPaysWhatItSends) {
  const StepProfile profile{.forward_s = 0.01, .backward_s = 0.02, .optimizer_s = 0.005, .bucket_bytes = {2'000'000}};
  const Cluster c = one_node(2, 0.0, 1e9);
  // ZeRO-1: reduce-scatter 1 ms after backward (ready at 0.03), all-gather 1 ms after the step,
  // half of the optimizer step.
  const StepPrediction sharded = predict_step(profile, c, Averaging::ShardedOptimizer);
  EXPECT_NEAR(sharded.exposed_s, 0.002, 1e-15);
  EXPECT_DOUBLE_EQ(sharded.compute_s, 0.03 + 0.0025);
  // bytegrad: a byte per value, the allreduce of 500,000 bytes: 0.5 ms.
  const StepPrediction bytegrad = predict_step(profile, c, Averaging::CompressedAllreduce);
  EXPECT_NEAR(bytegrad.exposed_s, 0.0005, 1e-15);
  // decentralized: the weights to one peer after the step, whole: 2 ms; low precision: 0.5 ms.
  EXPECT_NEAR(predict_step(profile, c, Averaging::Decentralized).exposed_s, 0.002, 1e-15);
  EXPECT_NEAR(predict_step(profile, c, Averaging::LowPrecisionDecentralized).exposed_s, 0.0005, 1e-15);
  // async: the allreduce runs, the step does not wait for it.
  const StepPrediction async = predict_step(profile, c, Averaging::Asynchronous);
  EXPECT_EQ(async.exposed_s, 0.0);
  EXPECT_DOUBLE_EQ(async.communication_s, 0.002);
}

TEST(ScalingModel, NamesRoundTripAndUnknownOnesSayWhatIsAllowed) {
  for (const char* name : {"allreduce", "sharded", "bytegrad", "decentralized", "low_precision_decentralized", "async"})
    EXPECT_EQ(averaging_name(averaging_from_name(name)), name);
  try {
    averaging_from_name("ring");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'ring' is not known; choose one of allreduce, sharded"), std::string::npos) << e.what();
  }
  StepProfile profile{.forward_s = 0.01, .backward_s = 0.02, .optimizer_s = 0.0, .bucket_bytes = {1}};
  EXPECT_THROW(predict_step(profile, one_node(2, 0.0, 0.0), Averaging::Allreduce), ConfigError);
  EXPECT_THROW(predict_step(profile, one_node(0, 0.0, 1e9), Averaging::Allreduce), ConfigError);
}

}  // namespace
}  // namespace tandem::scaling
