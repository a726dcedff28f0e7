// FashionMNISTDataModule: on small synthetic IDX files (always), and on the real dataset when
// the Debian package dataset-fashion-mnist is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "base/error.h"
#include "data_test_util.h"
#include "engine/data/fashion_mnist.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::data {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_bytes;

uint8_t pixel(int64_t image, int64_t p) { return uint8_t((image * 31 + p) % 256); }

// Writes <prefix>-images-idx3-ubyte(.gz) with n 28x28 images and <prefix>-labels-idx1-ubyte(.gz)
// with n_labels labels (label i = i % 10 unless bad_label).
void write_split(const TempDir& dir, const std::string& prefix, uint32_t n, bool gzip,
                 uint32_t n_labels = ~0u, uint8_t bad_label = 0) {
  if (n_labels == ~0u) n_labels = n;
  std::vector<uint8_t> images(size_t(n) * 784), labels(n_labels);
  for (uint32_t i = 0; i < n; ++i)
    for (int p = 0; p < 784; ++p) images[size_t(i) * 784 + size_t(p)] = pixel(i, p);
  for (uint32_t i = 0; i < n_labels; ++i) labels[i] = uint8_t(i % 10);
  if (bad_label) labels[n_labels / 2] = bad_label;
  const std::string ext = gzip ? ".gz" : "";
  write_bytes(dir.file(prefix + "-images-idx3-ubyte" + ext), idx_bytes(0x08, {n, 28, 28}, images), gzip);
  write_bytes(dir.file(prefix + "-labels-idx1-ubyte" + ext), idx_bytes(0x08, {n_labels}, labels), gzip);
}

FashionMNISTOptions small_options(const TempDir& dir) {
  FashionMNISTOptions o;
  o.root = dir.str();
  o.batch_size = 4;
  o.val_size = 5;
  return o;
}

TEST(FashionMNISTSynthetic, SplitsShapesAndNormalization) {
  TempDir dir;
  write_split(dir, "train", 20, /*gzip=*/true);
  write_split(dir, "t10k", 10, /*gzip=*/false);  // raw files are found too
  FashionMNISTDataModule dm(small_options(dir));
  dm.setup("fit");
  dm.setup("fit");  // idempotent
  EXPECT_EQ(dm.train_dataset()->size(), 15);
  EXPECT_EQ(dm.val_dataset()->size(), 5);
  EXPECT_EQ(dm.test_dataset()->size(), 10);

  auto test_loader = dm.test_dataloader();
  EXPECT_EQ(test_loader->num_batches(), 3);
  test_loader->start_epoch(0);
  Batch b = *test_loader->next();
  EXPECT_EQ(b.input.shape(), (Shape{4, 1, 28, 28}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  const auto x = b.input.to_vector<float>();
  for (int64_t i : {0, 3})
    for (int64_t p : {0, 5, 783}) {
      const float expected = (pixel(i, p) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
      EXPECT_FLOAT_EQ(x[size_t(i * 784 + p)], expected);
    }

  auto o = small_options(dir);
  o.flatten = true;
  o.normalize = false;
  FashionMNISTDataModule flat(o);
  Batch fb = flat.test_dataset()->get_batch({3});
  EXPECT_EQ(fb.input.shape(), (Shape{1, 784}));
  EXPECT_FLOAT_EQ(fb.input.to_vector<float>()[100], pixel(3, 100) / 255.0f);
}

TEST(FashionMNISTSynthetic, LoadersFollowOptions) {
  TempDir dir;
  write_split(dir, "train", 20, true);
  auto o = small_options(dir);
  o.prefetch = 0;
  FashionMNISTDataModule dm(o);
  auto train = dm.train_dataloader();  // setup("fit") runs on demand
  EXPECT_EQ(train->num_batches(), 4);  // 15 examples, batch 4
  EXPECT_TRUE(train->options().shuffle);
  EXPECT_EQ(train->options().seed, 42u);
  EXPECT_EQ(train->options().prefetch, 0);
  EXPECT_FALSE(dm.val_dataloader()->options().shuffle);
  EXPECT_EQ(dm.val_dataloader()->num_batches(), 2);
}

TEST(FashionMNISTSynthetic, MissingFilesSayHowToGetThem) {
  TempDir dir;
  FashionMNISTDataModule dm(small_options(dir));
  expect_error<DataError>([&] { dm.setup("fit"); },
                          {"train-images-idx3-ubyte", dir.file("train-images-idx3-ubyte.gz"),
                           "apt-get install dataset-fashion-mnist", "--data.root=DIR"});
  write_split(dir, "train", 20, true);
  expect_error<DataError>([&] { dm.setup("test"); }, {"t10k-images-idx3-ubyte", "apt-get install"});
  auto o = small_options(dir);
  o.root = dir.file("no_such_dir");
  expect_error<DataError>([&] { FashionMNISTDataModule(o).setup("test"); }, {"does not exist"});
}

TEST(FashionMNISTSynthetic, MalformedData) {
  TempDir dir;
  write_split(dir, "train", 20, true, /*n_labels=*/19);
  expect_error<DataError>([&] { FashionMNISTDataModule(small_options(dir)).setup("fit"); },
                          {"20 images", "19 labels", "must match"});
  write_split(dir, "t10k", 10, true, 10, /*bad_label=*/12);
  expect_error<DataError>([&] { FashionMNISTDataModule(small_options(dir)).setup("test"); },
                          {"label 12", "index 5", "0..9"});
}

TEST(FashionMNISTSynthetic, OptionErrors) {
  TempDir dir;
  write_split(dir, "train", 20, true);
  auto o = small_options(dir);
  o.val_size = 20;
  expect_error<ConfigError>([&] { FashionMNISTDataModule(o).setup("fit"); },
                            {"--data.val_size", "20", "20 images"});
  o.val_size = -1;
  expect_error<ConfigError>([&] { FashionMNISTDataModule{o}; }, {"--data.val_size", ">= 0", "-1"});
  o = small_options(dir);
  o.batch_size = 0;
  expect_error<ConfigError>([&] { FashionMNISTDataModule{o}; }, {"--data.batch_size", ">= 1"});
  expect_error<ConfigError>([&] { FashionMNISTDataModule(small_options(dir)).setup("train"); },
                            {"'train'", "fit, validate, test and predict"});
}

TEST(FashionMNISTOptions, JsonRoundTripAndErrors) {
  FashionMNISTOptions o;
  o.root = "/data/fm";
  o.batch_size = 256;
  o.flatten = true;
  o.seed = 7;
  const nlohmann::json j = o.to_json();
  EXPECT_EQ(j["batch_size"], 256);
  EXPECT_EQ(j["root"], "/data/fm");
  const auto back = FashionMNISTOptions::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(FashionMNISTDataModule(o).hparams(), j);
  EXPECT_EQ(FashionMNISTOptions::from_json(nlohmann::json::object()).to_json(), FashionMNISTOptions().to_json());
  expect_error<ConfigError>([] { FashionMNISTOptions::from_json({{"batchsize", 3}}); },
                            {"'batchsize'", "batch_size", "val_size"});
  expect_error<ConfigError>([] { FashionMNISTOptions::from_json({{"flatten", "yes"}}); },
                            {"--data.flatten", "true or false", "\"yes\""});
  expect_error<ConfigError>([] { FashionMNISTOptions::from_json({{"pin_memory", 1}}); },
                            {"--data.pin_memory", "true or false"});
  expect_error<ConfigError>([] { FashionMNISTOptions::from_json({{"pinmemory", true}}); }, {"'pinmemory'", "pin_memory"});
  expect_error<ConfigError>([] { FashionMNISTOptions::from_json({{"batch_size", 0}}); }, {"--data.batch_size"});
}

// ---- the real dataset ----

const char* kRealRoot = "/usr/share/datasets/fashion-mnist";

class FashionMNISTReal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kRealRoot)) return;
    module_ = new FashionMNISTDataModule();
    module_->setup("fit");
    module_->setup("test");
  }
  static void TearDownTestSuite() {
    delete module_;
    module_ = nullptr;
  }
  void SetUp() override {
    if (!module_) GTEST_SKIP() << kRealRoot << " is missing: apt-get install dataset-fashion-mnist";
  }
  static FashionMNISTDataModule* module_;
};
FashionMNISTDataModule* FashionMNISTReal::module_ = nullptr;

TEST_F(FashionMNISTReal, Sizes) {
  EXPECT_EQ(module_->train_dataset()->size(), 55000);
  EXPECT_EQ(module_->val_dataset()->size(), 5000);
  EXPECT_EQ(module_->test_dataset()->size(), 10000);
  EXPECT_EQ(module_->train_dataloader()->num_batches(), (55000 + 63) / 64);
}

TEST_F(FashionMNISTReal, SplitIsDeterministicForASeed) {
  auto val_indices = [](FashionMNISTDataModule& m) {
    auto subset = std::dynamic_pointer_cast<SubsetDataset>(m.val_dataset());
    EXPECT_NE(subset, nullptr);
    return subset ? subset->indices() : std::vector<int64_t>{};
  };
  FashionMNISTDataModule again;
  const auto first = val_indices(*module_);
  EXPECT_EQ(first, val_indices(again));
  FashionMNISTOptions o;
  o.seed = 43;
  FashionMNISTDataModule other(o);
  EXPECT_NE(first, val_indices(other));
  // The same examples, not just the same indices: the val batches agree.
  EXPECT_EQ(module_->val_dataset()->get_batch({0, 4999}).target.to_vector<int64_t>(),
            again.val_dataset()->get_batch({0, 4999}).target.to_vector<int64_t>());
}

TEST_F(FashionMNISTReal, TestLabelsAreBalanced) {
  auto ds = module_->test_dataset();
  std::vector<int64_t> all(size_t(ds->size()));
  std::iota(all.begin(), all.end(), int64_t{0});
  const auto labels = ds->get_batch(all).target.to_vector<int64_t>();
  std::vector<int64_t> counts(10, 0);
  for (int64_t l : labels) {
    ASSERT_GE(l, 0);
    ASSERT_LE(l, 9);
    ++counts[size_t(l)];
  }
  for (int64_t c : counts) EXPECT_NEAR(double(c), 1000.0, 100.0);
}

TEST_F(FashionMNISTReal, NormalizedTrainSetHasZeroMeanUnitStd) {
  auto loader = module_->train_dataloader();
  loader->start_epoch(0);
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  while (auto b = loader->next()) {
    const float* x = b->input.data_ptr<float>();
    for (int64_t i = 0, n = b->input.numel(); i < n; ++i) {
      sum += x[i];
      sum_sq += double(x[i]) * x[i];
    }
    count += b->input.numel();
  }
  EXPECT_EQ(count, 55000 * 784);
  const double mean = sum / double(count);
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(std::sqrt(sum_sq / double(count) - mean * mean), 1.0, 0.05);
}

}  // namespace
}  // namespace tandem::data
