// Samplers, TensorDataset, SubsetDataset and random_split.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "base/error.h"
#include "engine/data/sampler.h"
#include "engine/data/tensor_dataset.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::data {
namespace {

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// inputs[i] = [[i*100 + j*10 + k]] for a [n, 2, 3] float tensor, targets[i] = 1000 + i.
std::shared_ptr<TensorDataset> numbered_dataset(int64_t n) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) values.push_back(float(i * 100 + j * 10 + k));
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) targets.push_back(1000 + i);
  return std::make_shared<TensorDataset>(Tensor::from_vector(values, {n, 2, 3}),
                                         Tensor::from_vector(targets, {n}));
}

TEST(Samplers, SequentialIsIdentityEveryEpoch) {
  SequentialSampler s(5);
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.indices(0), iota(5));
  EXPECT_EQ(s.indices(7), iota(5));
  EXPECT_TRUE(SequentialSampler(0).indices(0).empty());
  expect_error<ValueError>([] { SequentialSampler(-1); }, {"-1", ">= 0"});
}

TEST(Samplers, RandomIsAPermutationPureInSeedAndEpoch) {
  RandomSampler a(1000, 7), b(1000, 7), other_seed(1000, 8);
  const auto e0 = a.indices(0);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(1000));
  EXPECT_NE(e0, iota(1000));
  EXPECT_EQ(e0, b.indices(0));       // a fresh sampler with the same seed
  EXPECT_EQ(a.indices(3), b.indices(3));
  EXPECT_EQ(a.indices(3), a.indices(3));  // no hidden state between calls
  EXPECT_NE(e0, a.indices(1));
  EXPECT_NE(e0, other_seed.indices(0));
}

TEST(Samplers, RandomIsRoughlyUniform) {
  // Over 4000 epochs each of 4 items lands in each position ~1000 times (std ~27).
  RandomSampler s(4, 123);
  int counts[4][4] = {};
  for (int64_t e = 0; e < 4000; ++e) {
    const auto order = s.indices(e);
    for (int pos = 0; pos < 4; ++pos) ++counts[order[size_t(pos)]][pos];
  }
  for (auto& row : counts)
    for (int c : row) EXPECT_NEAR(c, 1000, 150);
}

TEST(TensorDataset, GathersRowsInIndexOrder) {
  auto ds = numbered_dataset(6);
  EXPECT_EQ(ds->size(), 6);
  Batch b = ds->get_batch({4, 0, 4, 5});
  EXPECT_EQ(b.size(), 4);
  EXPECT_EQ(b.input.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(b.input.dtype(), DType::Float32);
  EXPECT_EQ(b.target.dtype(), DType::Int64);
  const auto in = b.input.to_vector<float>();
  const std::vector<int64_t> rows = {4, 0, 4, 5};
  for (size_t r = 0; r < rows.size(); ++r)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(in[r * 6 + size_t(j * 3 + k)], float(rows[r] * 100 + j * 10 + k));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{1004, 1000, 1004, 1005}));
  EXPECT_EQ(ds->get_batch({}).size(), 0);
}

TEST(TensorDataset, NonContiguousInputsAndNoTargets) {
  // A transposed view is made contiguous at construction, so rows are the view's rows.
  Tensor m = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).t();  // [3, 2]
  TensorDataset ds(m);
  Batch b = ds.get_batch({2, 0});
  EXPECT_EQ(b.input.to_vector<float>(), (std::vector<float>{2, 5, 0, 3}));
  EXPECT_FALSE(b.target.defined());
}

TEST(TensorDataset, Errors) {
  auto ds = numbered_dataset(3);
  expect_error<ValueError>([&] { ds->get_batch({0, 3}); }, {"index 3", "[0, 3)"});
  expect_error<ValueError>([&] { ds->get_batch({-1}); }, {"index -1"});
  expect_error<ShapeError>([] { TensorDataset(Tensor::zeros({3, 2}), Tensor::zeros({4}, DType::Int64)); },
                           {"[3]", "[4]"});
  expect_error<ShapeError>([] { TensorDataset{Tensor()}; }, {"undefined"});
  expect_error<ShapeError>([] { TensorDataset(Tensor::scalar(1.0)); }, {"0-dim"});
}

TEST(SubsetDataset, MapsThroughItsIndices) {
  auto base = numbered_dataset(10);
  SubsetDataset subset(base, {9, 2, 5});
  EXPECT_EQ(subset.size(), 3);
  EXPECT_EQ(subset.get_batch({2, 0}).target.to_vector<int64_t>(), (std::vector<int64_t>{1005, 1009}));
  expect_error<ValueError>([&] { subset.get_batch({3}); }, {"SubsetDataset", "index 3", "[0, 3)"});
  expect_error<ValueError>([&] { SubsetDataset(base, {0, 10}); }, {"index 10", "[0, 10)"});
}

TEST(RandomSplit, DisjointCoveringDeterministic) {
  auto base = numbered_dataset(100);
  auto parts = random_split(base, {70, 20, 10}, 42);
  ASSERT_EQ(parts.size(), 3u);
  std::set<int64_t> seen;
  for (auto& p : parts) {
    EXPECT_TRUE(std::is_sorted(p->indices().begin(), p->indices().end()));
    seen.insert(p->indices().begin(), p->indices().end());
  }
  EXPECT_EQ(parts[0]->size() + parts[1]->size() + parts[2]->size(), 100);
  EXPECT_EQ(seen.size(), 100u);  // disjoint and covering
  EXPECT_EQ(random_split(base, {70, 20, 10}, 42)[1]->indices(), parts[1]->indices());
  EXPECT_NE(random_split(base, {70, 20, 10}, 43)[1]->indices(), parts[1]->indices());
  // Not simply the first 70: the split is random.
  EXPECT_NE(parts[0]->indices(), std::vector<int64_t>(iota(70)));
  expect_error<ValueError>([&] { random_split(base, {70, 20}, 1); }, {"[70, 20]", "sum to 90", "100"});
  expect_error<ValueError>([&] { random_split(base, {110, -10}, 1); }, {"-10"});
}

}  // namespace
}  // namespace tandem::data
