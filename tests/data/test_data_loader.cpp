// DataLoader: batch counts, coverage, seeded shuffles, exact resume, prefetch equivalence,
// bounded prefetch, and errors that surface without hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "base/error.h"
#include "data_test_util.h"
#include "engine/data/data_loader.h"
#include "engine/data/tensor_dataset.h"
#include "kernels/pinned_host.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::data {
namespace {

using testing::run_with_deadline;

// Example i: input [2] = {i, -i} (float), target i.
std::shared_ptr<TensorDataset> counting_dataset(int64_t n) {
  std::vector<float> in;
  std::vector<int64_t> target;
  for (int64_t i = 0; i < n; ++i) {
    in.push_back(float(i));
    in.push_back(-float(i));
    target.push_back(i);
  }
  return std::make_shared<TensorDataset>(Tensor::from_vector(in, {n, 2}), Tensor::from_vector(target, {n}));
}

// The targets of every batch of one epoch, batch by batch.
std::vector<std::vector<int64_t>> epoch_targets(DataLoader& loader, int64_t epoch, int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<std::vector<int64_t>> batches;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->input.size(0), b->target.size(0));
    const auto t = b->target.to_vector<int64_t>();
    const auto in = b->input.to_vector<float>();
    for (size_t r = 0; r < t.size(); ++r) EXPECT_EQ(in[2 * r], float(t[r]));  // input matches target row
    batches.push_back(t);
  }
  return batches;
}

DataLoaderOptions opts(int64_t bs, bool shuffle, bool drop_last, int prefetch, uint64_t seed = 0) {
  DataLoaderOptions o;
  o.batch_size = bs;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.prefetch = prefetch;
  o.seed = seed;
  return o;
}

TEST(DataLoader, BatchCountsAndSizes) {
  struct Case { int64_t n, bs; bool drop_last; int64_t batches, last; };
  for (Case c : {Case{10, 3, false, 4, 1}, Case{10, 3, true, 3, 3}, Case{9, 3, false, 3, 3},
                 Case{9, 3, true, 3, 3}, Case{2, 5, false, 1, 2}, Case{2, 5, true, 0, 0},
                 Case{0, 4, false, 0, 0}}) {
    for (int prefetch : {0, 2}) {
      DataLoader loader(counting_dataset(c.n), opts(c.bs, true, c.drop_last, prefetch));
      EXPECT_EQ(loader.num_batches(), c.batches) << c.n << "/" << c.bs << " drop_last " << c.drop_last;
      const auto batches = epoch_targets(loader, 0);
      ASSERT_EQ(int64_t(batches.size()), c.batches);
      for (size_t i = 0; i + 1 < batches.size(); ++i) EXPECT_EQ(int64_t(batches[i].size()), c.bs);
      if (!batches.empty()) {
        EXPECT_EQ(int64_t(batches.back().size()), c.last);
      }
      EXPECT_FALSE(loader.next().has_value());  // stays finished
    }
  }
}

// pin_memory gives the same batches; they are page-locked exactly when a CUDA device is visible
// (a build without CUDA, or this CI machine: ordinary memory, no copy).
TEST(DataLoader, PinMemoryGivesTheSameBatches) {
  for (int prefetch : {0, 2}) {
    DataLoaderOptions plain = opts(7, true, false, prefetch, 3), pinned = plain;
    pinned.pin_memory = true;
    DataLoader a(counting_dataset(30), plain), b(counting_dataset(30), pinned);
    EXPECT_EQ(epoch_targets(a, 1), epoch_targets(b, 1));
    b.start_epoch(2);
    while (auto batch = b.next()) {
      EXPECT_TRUE(batch->input.device().is_cpu());
      EXPECT_EQ(batch->input.is_pinned(), pinned_host_available());
      EXPECT_EQ(batch->target.is_pinned(), pinned_host_available());
    }
  }
}

TEST(DataLoader, EveryIndexOncePerEpoch) {
  for (bool shuffle : {false, true})
    for (int prefetch : {0, 2}) {
      DataLoader loader(counting_dataset(103), opts(8, shuffle, false, prefetch, 5));
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        std::vector<int64_t> all;
        for (auto& b : epoch_targets(loader, epoch)) all.insert(all.end(), b.begin(), b.end());
        std::sort(all.begin(), all.end());
        std::vector<int64_t> expected(103);
        std::iota(expected.begin(), expected.end(), int64_t{0});
        EXPECT_EQ(all, expected) << "shuffle " << shuffle << " prefetch " << prefetch << " epoch " << epoch;
      }
    }
  // drop_last: 103 = 12*8 + 7; 96 distinct examples, the 7 dropped ones change per epoch.
  DataLoader loader(counting_dataset(103), opts(8, true, true, 2, 5));
  std::vector<int64_t> all;
  for (auto& b : epoch_targets(loader, 0)) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all.size(), 96u);
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
}

TEST(DataLoader, ShuffleIsAFunctionOfSeedAndEpoch) {
  auto data = counting_dataset(50);
  DataLoader a(data, opts(10, true, false, 2, 11)), b(data, opts(10, true, false, 0, 11)),
      other(data, opts(10, true, false, 2, 12)), sequential(data, opts(10, false, false, 2, 11));
  const auto a1 = epoch_targets(a, 1);
  EXPECT_EQ(epoch_targets(a, 0), epoch_targets(b, 0));
  EXPECT_EQ(a1, epoch_targets(b, 1));
  EXPECT_EQ(a1, epoch_targets(a, 1));  // replaying an epoch gives it again
  EXPECT_NE(epoch_targets(a, 0), a1);   // different across epochs
  EXPECT_NE(epoch_targets(other, 1), a1);  // different across seeds
  EXPECT_EQ(epoch_targets(sequential, 4)[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DataLoader, SkipBatchesResumesExactly) {
  for (int prefetch : {0, 2}) {
    DataLoader loader(counting_dataset(37), opts(5, true, false, prefetch, 3));
    const auto full = epoch_targets(loader, 2);
    ASSERT_EQ(full.size(), 8u);
    for (int64_t skip : {1, 3, 7, 8}) {
      DataLoader resumed(counting_dataset(37), opts(5, true, false, prefetch, 3));
      const auto rest = epoch_targets(resumed, 2, skip);
      EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(full.begin() + skip, full.end())) << "skip " << skip;
    }
    expect_error<ValueError>([&] { loader.start_epoch(0, 9); }, {"skip_batches", "[0, 8]", "9"});
    expect_error<ValueError>([&] { loader.start_epoch(0, -1); }, {"skip_batches", "-1"});
  }
}

TEST(DataLoader, PositionForCheckpoints) {
  DataLoader loader(counting_dataset(20), opts(4, true, false, 2));
  loader.start_epoch(3, 2);
  EXPECT_EQ(loader.epoch(), 3);
  EXPECT_EQ(loader.batch_index(), 2);
  loader.next();
  EXPECT_EQ(loader.batch_index(), 3);
}

TEST(DataLoader, PrefetchProducesIdenticalBatches) {
  auto data = counting_dataset(77);
  DataLoader sync(data, opts(6, true, false, 0, 9)), ahead(data, opts(6, true, false, 2, 9)),
      deep(data, opts(6, true, false, 16, 9));
  for (int64_t epoch : {0, 1}) {
    sync.start_epoch(epoch);
    ahead.start_epoch(epoch);
    deep.start_epoch(epoch);
    int64_t count = 0;
    while (auto s = sync.next()) {
      auto p = ahead.next(), d = deep.next();
      ASSERT_TRUE(p && d);
      EXPECT_EQ(s->input.to_vector<float>(), p->input.to_vector<float>());
      EXPECT_EQ(s->target.to_vector<int64_t>(), p->target.to_vector<int64_t>());
      EXPECT_EQ(s->target.to_vector<int64_t>(), d->target.to_vector<int64_t>());
      ++count;
    }
    EXPECT_EQ(count, sync.num_batches());
    EXPECT_FALSE(ahead.next().has_value());
    EXPECT_FALSE(deep.next().has_value());
  }
}

TEST(DataLoader, NextWithoutStartEpochStartsEpochZero) {
  auto data = counting_dataset(12);
  DataLoader implicit(data, opts(4, true, false, 2, 1)), explicit_(data, opts(4, true, false, 2, 1));
  explicit_.start_epoch(0);
  EXPECT_EQ(implicit.next()->target.to_vector<int64_t>(), explicit_.next()->target.to_vector<int64_t>());
}

// Counts get_batch calls; throws on the call that gathers `poison`, sleeps `delay_ms` per call.
class InstrumentedDataset : public Dataset {
 public:
  InstrumentedDataset(int64_t n, int64_t poison = -1) : base_(counting_dataset(n)), poison_(poison) {}
  int64_t size() const override { return base_->size(); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    ++calls;
    for (int64_t i : indices)
      if (i == poison_) throw DataError("example " + std::to_string(i) + " is unreadable");
    return base_->get_batch(indices);
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  std::shared_ptr<TensorDataset> base_;
  int64_t poison_;
};

TEST(DataLoader, DatasetErrorSurfacesFromNext) {
  for (int prefetch : {0, 2}) {
    run_with_deadline([prefetch] {
      auto data = std::make_shared<InstrumentedDataset>(40, /*poison=*/17);
      DataLoader loader(data, opts(4, false, false, prefetch));  // 17 is in batch 4
      loader.start_epoch(0);
      for (int i = 0; i < 4; ++i) ASSERT_TRUE(loader.next().has_value());
      expect_error<DataError>([&] { loader.next(); }, {"example 17 is unreadable"});
      EXPECT_FALSE(loader.next().has_value());  // the epoch ended with the error
      // The loader is still usable: skipping past the bad batch works.
      loader.start_epoch(0, 5);
      int64_t rest = 0;
      while (loader.next()) ++rest;
      EXPECT_EQ(rest, 5);
    }, 30);
  }
}

TEST(DataLoader, PrefetchIsBoundedAndAbandonedEpochsDoNotHang) {
  run_with_deadline([] {
    auto data = std::make_shared<InstrumentedDataset>(1000);
    auto loader = std::make_unique<DataLoader>(data, opts(1, true, false, 3));
    loader->start_epoch(0);
    ASSERT_TRUE(loader->next().has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // One consumed + 3 queued + at most 1 in the producer's hands, waiting for space.
    EXPECT_LE(data->calls.load(), 1 + 3 + 1);
    EXPECT_GE(data->calls.load(), 1 + 3);
    loader->start_epoch(1);  // abandons epoch 0 while its producer is blocked on a full queue
    ASSERT_TRUE(loader->next().has_value());
    loader.reset();          // and destroys a loader whose producer is blocked
  }, 30);
}

// Every other example: a stand-in for DDP's DistributedSampler.
class EvenSampler : public Sampler {
 public:
  explicit EvenSampler(int64_t n) : n_(n) {}
  std::vector<int64_t> indices(int64_t) const override {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n_; i += 2) v.push_back(i);
    return v;
  }
  int64_t size() const override { return (n_ + 1) / 2; }

 private:
  int64_t n_;
};

TEST(DataLoader, SetSamplerChangesOrderAndCount) {
  DataLoader loader(counting_dataset(10), opts(2, true, false, 2));
  EXPECT_EQ(loader.num_batches(), 5);
  loader.start_epoch(0);
  loader.next();
  loader.set_sampler(std::make_shared<EvenSampler>(10));
  EXPECT_FALSE(loader.next().has_value());  // the old epoch is over
  EXPECT_EQ(loader.num_batches(), 3);
  EXPECT_EQ(epoch_targets(loader, 0), (std::vector<std::vector<int64_t>>{{0, 2}, {4, 6}, {8}}));
  EXPECT_EQ(loader.sampler().size(), 5);
}

TEST(DataLoader, OptionErrors) {
  auto data = counting_dataset(4);
  expect_error<ValueError>([&] { DataLoader(data, opts(0, false, false, 2)); }, {"batch_size", ">= 1", "0"});
  expect_error<ValueError>([&] { DataLoader(data, opts(2, false, false, -1)); }, {"prefetch", ">= 0", "-1"});
  expect_error<ValueError>([&] { DataLoader(nullptr, opts(2, false, false, 2)); }, {"null"});
  DataLoader loader(data, opts(2, false, false, 2));
  expect_error<ValueError>([&] { loader.set_sampler(nullptr); }, {"null"});
  EXPECT_EQ(loader.batch_size(), 2);
  EXPECT_EQ(&loader.dataset(), data.get());
  EXPECT_EQ(loader.dataset_ptr(), data);
}

}  // namespace
}  // namespace tandem::data
