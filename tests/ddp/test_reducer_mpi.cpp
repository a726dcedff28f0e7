// The Reducer under mpirun -np 1..4: gradients averaged across ranks exactly (small integer
// gradients, so every expected value is exact in float32), buckets in reverse parameter order
// with the caps, no_sync accumulation, parameters unused on some ranks, gradients finishing in
// a different order on different ranks, and the different-models error.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/strategies/reducer.h"
#include "mpi_test_world.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

using collectives::mpitest::g_world;

// Rank r's gradient for parameter k, element i: a small integer.
float grad_value(int rank, size_t k, int64_t i) { return float((int64_t(k) * 5 + i * 3 + rank * 7) % 13) - 6.0f; }

std::vector<Tensor> make_params(const std::vector<int64_t>& sizes) {
  std::vector<Tensor> params;
  for (int64_t n : sizes) params.push_back(Tensor::zeros({n}).requires_grad_(true));
  return params;
}

// loss = sum_k sum_i c_k[i] * p_k[i], so dloss/dp_k = c_k. `reverse` builds the terms in the
// other order, which makes autograd finish the parameters' gradients in the other order.
Tensor loss_for(const std::vector<Tensor>& params, int rank, const std::vector<bool>& used, bool reverse) {
  Tensor loss;
  for (size_t j = 0; j < params.size(); ++j) {
    const size_t k = reverse ? params.size() - 1 - j : j;
    if (!used[k]) continue;
    std::vector<float> c;
    for (int64_t i = 0; i < params[k].numel(); ++i) c.push_back(grad_value(rank, k, i));
    Tensor term = sum(mul(params[k], Tensor::from_vector(c, {params[k].numel()})));
    loss = loss.defined() ? add(loss, term) : term;
  }
  return loss;
}

// mean over ranks of rank r's gradient (times `times`, for accumulation), as MPI's avg computes
// it: a float32 sum, then a division by the world size.
float expected_avg(size_t k, int64_t i, int times, const std::vector<bool>& used_on_odd_ranks = {}) {
  float sum = 0;
  for (int r = 0; r < g_world->size(); ++r) {
    const bool used = used_on_odd_ranks.empty() || r % 2 == 0 || used_on_odd_ranks[k];
    if (used) sum += float(times) * grad_value(r, k, i);
  }
  return sum / float(g_world->size());
}

TEST(Reducer, AveragesGradientsAcrossRanks) {
  const std::vector<int64_t> sizes{3, 5, 7, 2};
  auto params = make_params(sizes);
  Reducer reducer(params, g_world, {.bucket_cap_bytes = 32, .first_bucket_cap_bytes = 16});
  const std::vector<bool> all(sizes.size(), true);
  for (int step = 0; step < 3; ++step) {
    for (auto& p : params) p.set_grad(Tensor());
    reducer.prepare_for_backward(true);
    loss_for(params, g_world->rank(), all, g_world->rank() % 2 == 1).backward();
    reducer.finalize();
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto g = params[k].grad().to_vector<float>();
      for (int64_t i = 0; i < sizes[k]; ++i) EXPECT_EQ(g[size_t(i)], expected_avg(k, i, 1)) << "k=" << k << " i=" << i;
    }
  }
  EXPECT_EQ(reducer.stats().reductions, 3);
  EXPECT_EQ(reducer.stats().bucket_launches, 3 * int64_t(reducer.buckets().size()));
  // Every bucket filled during backward launches there, in order, whatever order the hooks ran.
  EXPECT_EQ(reducer.stats().buckets_launched_in_backward, reducer.stats().bucket_launches);
}

TEST(Reducer, BucketsTakeParametersInReverseOrderUpToTheCaps) {
  // floats: p3 (8 B) + p2 (28 B) reach the 16 B first cap; p1 (20 B) + p0 (12 B) reach 32 B.
  auto params = make_params({3, 5, 7, 2});
  Reducer reducer(params, g_world, {.bucket_cap_bytes = 32, .first_bucket_cap_bytes = 16});
  ASSERT_EQ(reducer.buckets().size(), 2u);
  EXPECT_EQ(reducer.buckets()[0].params, (std::vector<size_t>{3, 2}));
  EXPECT_EQ(reducer.buckets()[0].offsets, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(reducer.buckets()[0].numel, 9);
  EXPECT_EQ(reducer.buckets()[1].params, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(reducer.buckets()[1].numel, 8);
  // The defaults (1 MiB first, 25 MiB after) put a small model in one bucket.
  Reducer defaults(make_params({1000, 1000}), g_world);
  EXPECT_EQ(defaults.buckets().size(), 1u);
  // A bucket closes on the parameter that reaches its cap (PyTorch's rule): the 1.2 MB one
  // closes the 1 MiB first bucket, the next starts a 25 MiB bucket.
  Reducer big(make_params({300000, 300000, 10}), g_world);
  ASSERT_EQ(big.buckets().size(), 2u);
  EXPECT_EQ(big.buckets()[0].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(big.buckets()[1].params, (std::vector<size_t>{0}));
}

TEST(Reducer, NoSyncAccumulatesLocallyThenReducesTheSum) {
  const std::vector<int64_t> sizes{4, 6};
  auto params = make_params(sizes);
  Reducer reducer(params, g_world, {.bucket_cap_bytes = 16, .first_bucket_cap_bytes = 16});
  const std::vector<bool> all(sizes.size(), true);
  reducer.prepare_for_backward(false);
  loss_for(params, g_world->rank(), all, false).backward();
  reducer.finalize();  // a no-op after no_sync: the local gradient stays
  for (int64_t i = 0; i < sizes[0]; ++i) EXPECT_EQ(params[0].grad().to_vector<float>()[size_t(i)], grad_value(g_world->rank(), 0, i));
  reducer.prepare_for_backward(true);
  loss_for(params, g_world->rank(), all, false).backward();
  reducer.finalize();
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto g = params[k].grad().to_vector<float>();
    for (int64_t i = 0; i < sizes[k]; ++i) EXPECT_EQ(g[size_t(i)], expected_avg(k, i, 2));
  }
}

// finalize() leaves each .grad a view of its slot in the bucket (nothing copied back). Zeroed in
// place instead of dropped (zero_grad(set_to_none=false)), the next passes accumulate into the
// slots themselves: a no_sync backward, then a synchronized one whose hooks find each gradient
// in its slot already, and the average of the sum is exact.
TEST(Reducer, GradientsAreViewsOfTheBucketAndAccumulateInPlaceExactly) {
  const std::vector<int64_t> sizes{3, 5};
  auto params = make_params(sizes);
  Reducer reducer(params, g_world);
  ASSERT_EQ(reducer.buckets().size(), 1u);
  const std::vector<bool> all(sizes.size(), true);
  reducer.prepare_for_backward(true);
  loss_for(params, g_world->rank(), all, false).backward();
  reducer.finalize();
  // Bucket order is reverse registration: p1 at offset 0, p0 right after its 5 values.
  const float* slot1 = static_cast<const float*>(params[1].grad().raw_data());
  const float* slot0 = static_cast<const float*>(params[0].grad().raw_data());
  EXPECT_EQ(slot0, slot1 + sizes[1]) << "both gradients live in the one bucket";
  for (auto& p : params) p.grad().zero_();
  reducer.prepare_for_backward(false);
  loss_for(params, g_world->rank(), all, true).backward();
  reducer.prepare_for_backward(true);
  loss_for(params, g_world->rank(), all, false).backward();
  reducer.finalize();
  EXPECT_EQ(params[1].grad().raw_data(), slot1);
  EXPECT_EQ(params[0].grad().raw_data(), slot0);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto g = params[k].grad().to_vector<float>();
    for (int64_t i = 0; i < sizes[k]; ++i) EXPECT_EQ(g[size_t(i)], expected_avg(k, i, 2)) << "k=" << k << " i=" << i;
  }
}

TEST(Reducer, ParametersUnusedOnSomeRanksStillAverageEverywhere) {
  // Parameter 1 is used only on even ranks; odd ranks contribute zeros and still end with the
  // average (a defined gradient), so every replica takes the same step.
  const std::vector<int64_t> sizes{3, 4, 5};
  auto params = make_params(sizes);
  Reducer reducer(params, g_world, {.bucket_cap_bytes = 12, .first_bucket_cap_bytes = 12});
  const std::vector<bool> used{true, g_world->rank() % 2 == 0, true};
  reducer.prepare_for_backward(true);
  loss_for(params, g_world->rank(), used, false).backward();
  reducer.finalize();
  const std::vector<bool> used_on_odd{true, false, true};
  for (size_t k = 0; k < sizes.size(); ++k) {
    ASSERT_TRUE(params[k].grad().defined()) << k;
    const auto g = params[k].grad().to_vector<float>();
    for (int64_t i = 0; i < sizes[k]; ++i) EXPECT_EQ(g[size_t(i)], expected_avg(k, i, 1, used_on_odd)) << k << "," << i;
  }
}

TEST(Reducer, TwoSynchronizedBackwardsWithoutAStepIsAnError) {
  auto params = make_params({2});
  Reducer reducer(params, g_world);
  reducer.prepare_for_backward(true);
  EXPECT_THROW(reducer.prepare_for_backward(true), AutogradError);
  reducer.finalize();  // zeros (no backward ran), reduced on every rank alike
  EXPECT_EQ(params[0].grad().to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(Reducer, ADroppedReducerTakesItsHooksWithIt) {
  // A model wrapped again and again (a sweep) must not collect dead hooks on its parameters.
  auto params = make_params({3, 5});
  const std::vector<bool> all(params.size(), true);
  for (int wrap = 0; wrap < 3; ++wrap) {
    Reducer reducer(params, g_world);
    for (const Tensor& p : params) EXPECT_EQ(p.impl().post_accumulate_hooks.size(), 1u);
    for (auto& p : params) p.set_grad(Tensor());
    reducer.prepare_for_backward(true);
    loss_for(params, g_world->rank(), all, false).backward();
    reducer.finalize();
    EXPECT_EQ(params[1].grad().to_vector<float>()[2], expected_avg(1, 2, 1));
  }
  for (const Tensor& p : params) EXPECT_EQ(p.impl().post_accumulate_hooks.size(), 0u);
}

TEST(Reducer, DifferentModelsOnDifferentRanksAreAConfigErrorEverywhere) {
  if (g_world->size() == 1) GTEST_SKIP() << "needs two ranks";
  auto params = make_params(g_world->rank() == 1 ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{3, 5});
  try {
    Reducer reducer(params, g_world);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("different models"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
