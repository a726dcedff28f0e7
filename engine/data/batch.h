// Batch and the Dataset interface: the first boxes of the data path.
//   Dataset -> DataLoader (sampler shards by rank) -> Batch on host -> Strategy::batch_to_device
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::data {

// One mini-batch: inputs (float32 [B, ...]) and targets (int64 [B] class indices; undefined
// for unlabelled predict data). Everything a step needs; kept on the host by loaders.
struct Batch {
  Tensor input;
  Tensor target;
  int64_t size() const { return input.defined() ? input.size(0) : 0; }
  Batch to(Device device) const {
    return {input.defined() ? input.to(device) : Tensor(), target.defined() ? target.to(device) : Tensor()};
  }
};

// Random access to examples, gathered a batch at a time (a gather per batch, not per example).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The examples at `indices` (each in [0, size())), stacked along dim 0.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
  // What the DataLoader calls: the same examples in epoch `epoch`. A dataset whose examples are
  // drawn afresh each epoch (data::TextDataModule's random windows) overrides it.
  virtual Batch get_epoch_batch(const std::vector<int64_t>& indices, int64_t epoch) const { return get_batch(indices); }
};

}  // namespace tandem::data
