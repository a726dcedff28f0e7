// HostArrayDataModule: training on arrays a host program already holds (an HPC code embedding
// Tandem). The inputs and targets are viewed where they are (Tensor::from_external: no copy on
// the CPU); each batch is gathered from them as from any TensorDataset. Train/val split, batch
// size and shuffling as the other data modules.
//
// The data is per rank: each process passes its own local arrays (the host partitioned its data
// already), so per_rank_data() is true and the Trainer gives its loaders no DistributedSampler.
// With several ranks, DDP averages gradients over the ranks' batches k, so every rank must have
// the same number of batches per epoch: the Trainer checks this and throws ConfigError
// otherwise. The val split is drawn from each rank's own arrays.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "nlohmann/json.hpp"

namespace tandem::data {

// The host's arrays, row-major: example i is inputs[i, ...] with target targets[i].
struct HostArrays {
  const void* inputs = nullptr;        // input_shape elements of input_dtype
  Shape input_shape;                   // [N, ...], N = examples on this rank
  DType input_dtype = DType::Float32;
  const int64_t* targets = nullptr;    // [N] (class indices); null: unlabelled
};

struct HostArrayOptions {
  int64_t batch_size = 32;
  int64_t val_size = 0;   // examples of this rank's arrays held out for validation (random split)
  bool shuffle = true;    // shuffle the training loader each epoch
  uint64_t seed = 42;     // the split and the shuffle
  int prefetch = 2;       // batches each loader prepares ahead; 0 = synchronous
  bool pin_memory = true; // batches in page-locked memory when a CUDA device is visible

  // Throws ConfigError naming the option, the value and what is allowed.
  void validate() const;
  nlohmann::json to_json() const;
};

class HostArrayDataModule : public DataModule {
 public:
  // The arrays must stay valid and unchanged while the module or its loaders are in use; Tandem
  // reads them only. Throws ConfigError for null data, a shape without examples, or a val_size
  // that leaves no training example.
  HostArrayDataModule(HostArrays arrays, HostArrayOptions options = {});

  void setup(const std::string& stage) override;
  std::shared_ptr<DataLoader> train_dataloader() override;
  // Null when val_size is 0 (the fit loop then skips validation).
  std::shared_ptr<DataLoader> val_dataloader() override;
  // The validation split (the host's arrays hold no separate test set).
  std::shared_ptr<DataLoader> test_dataloader() override { return val_dataloader(); }
  bool per_rank_data() const override { return true; }
  nlohmann::json hparams() const override { return options_.to_json(); }

  // The whole array as a dataset (its tensors view the host's memory).
  const std::shared_ptr<TensorDataset>& dataset() const { return all_; }

 private:
  std::shared_ptr<DataLoader> make_loader(std::shared_ptr<Dataset> dataset, bool shuffle) const;

  HostArrayOptions options_;
  std::shared_ptr<TensorDataset> all_;
  std::shared_ptr<Dataset> train_, val_;
};

}  // namespace tandem::data
