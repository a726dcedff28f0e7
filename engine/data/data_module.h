// DataModule: Lightning's LightningDataModule. Owns the datasets of each stage and hands out
// their loaders; the Trainer calls setup(stage) once before the stage's loop runs.
#pragma once
#include <memory>
#include <string>

#include "nlohmann/json.hpp"

namespace tandem::data {

class DataLoader;

class DataModule {
 public:
  virtual ~DataModule() = default;
  // stage: "fit" (train + val), "validate", "test" or "predict". Idempotent.
  virtual void setup(const std::string& stage) = 0;
  virtual std::shared_ptr<DataLoader> train_dataloader() = 0;
  virtual std::shared_ptr<DataLoader> val_dataloader() = 0;
  virtual std::shared_ptr<DataLoader> test_dataloader() = 0;
  virtual std::shared_ptr<DataLoader> predict_dataloader() { return test_dataloader(); }
  // True when each rank's loaders already hold only that rank's data (a host program that
  // partitioned its data, host_array_data_module.h): the Trainer then gives them no
  // DistributedSampler, and checks that every rank has the same number of batches.
  virtual bool per_rank_data() const { return false; }
  // The settings, for hparams.yaml and checkpoints.
  virtual nlohmann::json hparams() const { return nlohmann::json::object(); }
};

}  // namespace tandem::data
