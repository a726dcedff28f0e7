// DistributedSampler against PyTorch's DistributedSampler rules, worked out by hand: shard
// sizes ceil(n/W) (floor with drop_last), padding by repeating the head of the order, strided
// shards, and the property DDP's equivalence rests on: batch k of all ranks together is a
// contiguous window of padded_order().
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "engine/data/distributed_sampler.h"
#include "engine/data/sampler.h"

namespace tandem::data {
namespace {

DistributedSampler make(int64_t n, int w, int r, bool shuffle = false, bool drop_last = false, bool pad = true) {
  DistributedSamplerOptions o;
  o.num_replicas = w;
  o.rank = r;
  o.shuffle = shuffle;
  o.seed = 7;
  o.drop_last = drop_last;
  o.pad = pad;
  return DistributedSampler(n, o);
}

TEST(DistributedSampler, TenOverThreeRanksPadsWithTheHead) {
  // n=10, W=3: 4 per rank, total 12, padded = 0..9, 0, 1; rank r takes r, r+3, r+6, r+9.
  EXPECT_EQ(make(10, 3, 0).indices(0), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(make(10, 3, 1).indices(0), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(make(10, 3, 2).indices(0), (std::vector<int64_t>{2, 5, 8, 1}));
  EXPECT_EQ(make(10, 3, 2).size(), 4);
}

TEST(DistributedSampler, DropLastTruncatesToFloor) {
  // n=10, W=3, drop_last: 3 per rank, total 9: example 9 is dropped.
  EXPECT_EQ(make(10, 3, 0, false, true).indices(0), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(make(10, 3, 2, false, true).indices(0), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(make(10, 3, 1, false, true).size(), 3);
}

TEST(DistributedSampler, UnpaddedShardsCoverEachExampleOnce) {
  // predict's split: 4, 3, 3 examples; nothing repeated.
  EXPECT_EQ(make(10, 3, 0, false, false, false).indices(0), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(make(10, 3, 1, false, false, false).indices(0), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(make(10, 3, 2, false, false, false).size(), 3);
}

TEST(DistributedSampler, FewerExamplesThanRanksRepeatsTheWholeSet) {
  // n=2, W=5: one each, padded = 0, 1, 0, 1, 0.
  std::vector<int64_t> got;
  for (int r = 0; r < 5; ++r) got.push_back(make(2, 5, r).indices(0).at(0));
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 0, 1, 0}));
}

TEST(DistributedSampler, ShardsPartitionTheDatasetAndFollowTheSeededShuffle) {
  for (int64_t n : {1, 7, 12, 37, 100}) {
    for (int w : {1, 2, 3, 4}) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < w; ++r) {
        const auto shard = make(n, w, r, true).indices(3);
        EXPECT_EQ(int64_t(shard.size()), (n + w - 1) / w);
        seen.insert(shard.begin(), shard.end());
      }
      // Every example at least once; exactly total - n repeats.
      for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << "n=" << n << " w=" << w << " i=" << i;
      EXPECT_EQ(int64_t(seen.size()), ((n + w - 1) / w) * w);
      // Without padding the global order is RandomSampler's order for the same seed and epoch.
      const auto global = make(n, w, 0, true, false, false).padded_order(3);
      EXPECT_EQ(global, RandomSampler(n, 7).indices(3));
    }
  }
}

TEST(DistributedSampler, EveryRankBatchKIsAWindowOfThePaddedOrder) {
  // The equivalence DDP relies on: at batch size B, batch k of all ranks together is
  // padded_order[k*B*W, (k+1)*B*W).
  const int64_t n = 37, batch = 4;
  for (int w : {2, 3, 4}) {
    const auto padded = make(n, w, 0, true).padded_order(5);
    const int64_t per_rank = (n + w - 1) / w;
    for (int64_t k = 0; k * batch < per_rank; ++k) {
      std::multiset<int64_t> union_of_ranks, window;
      const int64_t rows = std::min(batch, per_rank - k * batch);
      for (int r = 0; r < w; ++r) {
        const auto shard = make(n, w, r, true).indices(5);
        for (int64_t j = 0; j < rows; ++j) union_of_ranks.insert(shard[size_t(k * batch + j)]);
      }
      for (int64_t i = k * batch * w; i < k * batch * w + rows * w; ++i) window.insert(padded[size_t(i)]);
      EXPECT_EQ(union_of_ranks, window) << "w=" << w << " k=" << k;
    }
  }
}

TEST(DistributedSampler, EpochsDifferAndRepeat) {
  const auto a = make(50, 2, 1, true).indices(0), b = make(50, 2, 1, true).indices(1);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, make(50, 2, 1, true).indices(0));
}

TEST(DistributedSampler, InvalidArgumentsAreValueErrors) {
  EXPECT_THROW(make(-1, 2, 0), ValueError);
  EXPECT_THROW(make(10, 0, 0), ValueError);
  EXPECT_THROW(make(10, 2, 2), ValueError);
  EXPECT_THROW(make(10, 2, -1), ValueError);
  try {
    make(10, 2, 5);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5 is outside [0, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::data
