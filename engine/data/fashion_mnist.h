// Fashion-MNIST (Xiao et al. 2017): 60k training and 10k test 28x28 grayscale images of 10
// clothing classes, read from the four IDX files under `root` (raw or .gz). Debian ships them
// in the package dataset-fashion-mnist at /usr/share/datasets/fashion-mnist.
//
// Each split is decoded once, at setup, into one contiguous float32 tensor (normalized with
// the training set's mean and std), so every batch is a row gather; the 60k training images
// are split 55k/5k into train/val by a seeded permutation, as views (no copy).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "nlohmann/json.hpp"

namespace tandem::data {

// Fashion-MNIST's training-set pixel mean and std (of x/255), torchvision's usual constants.
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

struct FashionMNISTOptions {
  std::string root = "/usr/share/datasets/fashion-mnist";
  int64_t batch_size = 64;  // for every loader
  int64_t val_size = 5000;  // taken out of the 60k training images; 0 = no validation data
  uint64_t seed = 42;       // the train/val split and the training loader's shuffle
  bool normalize = true;    // (x/255 - mean)/std; false: x/255 in [0, 1]
  bool flatten = false;     // inputs [B, 784] instead of [B, 1, 28, 28]
  int prefetch = 2;         // batches each loader prepares ahead; 0 = synchronous
  bool pin_memory = true;   // batches in page-locked memory when a CUDA device is visible
  bool shuffle = true;      // shuffle the training loader each epoch

  // Throws ConfigError (naming the --data.<key> flag) for values out of range.
  void validate() const;
  nlohmann::json to_json() const;
  // Keys as in to_json; missing keys keep their defaults. Throws ConfigError for an unknown key
  // (listing the known ones) or a value of the wrong type.
  static FashionMNISTOptions from_json(const nlohmann::json& json);
};

class FashionMNISTDataModule : public DataModule {
 public:
  static constexpr int64_t kNumClasses = 10;
  static constexpr int64_t kImageSide = 28;

  explicit FashionMNISTDataModule(FashionMNISTOptions options = {});

  // "fit" and "validate" load the training file (train + val), "test" and "predict" the test
  // file; each file is read once, whatever the number of calls. Throws DataError when a file is
  // missing or malformed, ConfigError for an unknown stage or a val_size the data cannot hold.
  void setup(const std::string& stage) override;
  // Each call makes a new loader over the same dataset; setup runs first when it has not.
  std::shared_ptr<DataLoader> train_dataloader() override;
  std::shared_ptr<DataLoader> val_dataloader() override;
  std::shared_ptr<DataLoader> test_dataloader() override;
  nlohmann::json hparams() const override { return options_.to_json(); }

  const FashionMNISTOptions& options() const { return options_; }
  // The datasets (setup runs first when needed).
  std::shared_ptr<Dataset> train_dataset();
  std::shared_ptr<Dataset> val_dataset();
  std::shared_ptr<Dataset> test_dataset();

  // One split, decoded: prefix "train" or "t10k". inputs float32 [N, 1, 28, 28] (or [N, 784]
  // when flatten), targets int64 [N] in 0..9.
  static std::shared_ptr<TensorDataset> load_split(const std::string& root, const std::string& prefix,
                                                   bool normalize, bool flatten);

 private:
  void load_train();
  void load_test();
  std::shared_ptr<DataLoader> make_loader(std::shared_ptr<Dataset> dataset, bool shuffle) const;

  FashionMNISTOptions options_;
  std::shared_ptr<Dataset> train_, val_, test_;
};

}  // namespace tandem::data
