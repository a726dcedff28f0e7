// Tensor::from_external (views over memory the caller owns) and HostArrayDataModule (training
// on a host program's arrays): no copy, the split, the batches, the typed errors.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "base/error.h"
#include "engine/data/host_array_data_module.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::data {
namespace {

TEST(FromExternal, ViewsTheCallersMemoryWithoutCopyingOrFreeing) {
  std::vector<float> host{1, 2, 3, 4, 5, 6};
  {
    Tensor t = Tensor::from_external(host.data(), {2, 3}, DType::Float32);
    EXPECT_EQ(t.raw_data(), static_cast<void*>(host.data()));
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.to_vector<float>(), host);
    host[4] = 50;  // the host writes; the view sees it
    EXPECT_EQ(t.to_vector<float>()[4], 50.0f);
    t.fill_(7.0);  // writes through the view land in the host's array
  }
  // The tensor is gone and the vector is intact (freeing it would crash or corrupt here).
  EXPECT_EQ(host, std::vector<float>(6, 7.0f));
  host.push_back(8);  // still the vector's own memory to grow and free
}

TEST(FromExternal, RejectsNullDataAndBadShapes) {
  EXPECT_THROW(Tensor::from_external(nullptr, {2}, DType::Float32), ValueError);
  float x = 0;
  EXPECT_THROW(Tensor::from_external(&x, {-1}, DType::Float32), ShapeError);
}

struct HostData {
  std::vector<float> x;  // row i = [i, 10 i]
  std::vector<int64_t> y;  // 1000 + i
  explicit HostData(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      x.push_back(float(i));
      x.push_back(float(10 * i));
      y.push_back(1000 + i);
    }
  }
  HostArrays arrays() const { return {x.data(), {int64_t(y.size()), 2}, DType::Float32, y.data()}; }
};

// Every example an epoch of `loader` yields, by its target; checks each row matches its target.
std::vector<int64_t> targets_seen_in_epoch(DataLoader& loader, int64_t epoch) {
  std::vector<int64_t> seen;
  loader.start_epoch(epoch);
  while (auto b = loader.next()) {
    const auto x = b->input.to_vector<float>();
    const auto y = b->target.to_vector<int64_t>();
    for (size_t r = 0; r < y.size(); ++r) {
      const int64_t i = y[r] - 1000;
      EXPECT_EQ(x[2 * r], float(i));
      EXPECT_EQ(x[2 * r + 1], float(10 * i));
      seen.push_back(y[r]);
    }
  }
  return seen;
}

TEST(HostArrayDataModule, ViewsTheArraysAndSplitsTrainAndValidation) {
  HostData host(23);
  HostArrayOptions o;
  o.batch_size = 4;
  o.val_size = 5;
  o.prefetch = 0;
  HostArrayDataModule dm(host.arrays(), o);
  EXPECT_TRUE(dm.per_rank_data());
  EXPECT_EQ(dm.dataset()->inputs().raw_data(), static_cast<const void*>(host.x.data()));
  EXPECT_EQ(dm.dataset()->targets().raw_data(), static_cast<const void*>(host.y.data()));
  auto train = dm.train_dataloader();
  auto val = dm.val_dataloader();
  ASSERT_TRUE(train && val);
  EXPECT_EQ(train->num_batches(), 5);  // 18 examples in batches of 4
  EXPECT_EQ(val->num_batches(), 2);
  std::vector<int64_t> t0 = targets_seen_in_epoch(*train, 0), t1 = targets_seen_in_epoch(*train, 1), v = targets_seen_in_epoch(*val, 0);
  EXPECT_EQ(t0.size(), 18u);
  EXPECT_EQ(v.size(), 5u);
  EXPECT_NE(t0, t1);  // shuffled per epoch
  std::set<int64_t> all(t0.begin(), t0.end());
  EXPECT_EQ(std::set<int64_t>(t1.begin(), t1.end()), all);
  for (int64_t y : v) EXPECT_EQ(all.count(y), 0u) << "example " << y << " is in both splits";
  all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 23u);
}

TEST(HostArrayDataModule, WithoutValidationAndShufflingKeepsTheHostsOrder) {
  HostData host(6);
  HostArrayOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.prefetch = 0;
  HostArrayDataModule dm(host.arrays(), o);
  EXPECT_EQ(dm.val_dataloader(), nullptr);
  auto train = dm.train_dataloader();
  EXPECT_EQ(targets_seen_in_epoch(*train, 0), (std::vector<int64_t>{1000, 1001, 1002, 1003, 1004, 1005}));
}

TEST(HostArrayDataModule, BadInputIsAConfigErrorNamingIt) {
  HostData host(6);
  HostArrayOptions o;
  o.val_size = 6;
  expect_error<ConfigError>([&] { HostArrayDataModule dm(host.arrays(), o); }, {"val_size=6 leaves no training example of the 6"});
  o.val_size = 0;
  o.batch_size = 0;
  expect_error<ConfigError>([&] { HostArrayDataModule dm(host.arrays(), o); }, {"batch_size must be >= 1, got 0"});
  o.batch_size = 2;
  HostArrays null_inputs = host.arrays();
  null_inputs.inputs = nullptr;
  expect_error<ConfigError>([&] { HostArrayDataModule dm(null_inputs, o); }, {"inputs is a null pointer"});
  HostArrays no_rows = host.arrays();
  no_rows.input_shape = {0, 2};
  expect_error<ConfigError>([&] { HostArrayDataModule dm(no_rows, o); }, {"got [0, 2]"});
}

}  // namespace
}  // namespace tandem::data
