// In-memory datasets: TensorDataset (examples are rows of host tensors) and SubsetDataset (a
// view of another dataset through an index list), plus random_split for train/val splits.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/data/batch.h"

namespace tandem::data {

// Example i is (inputs[i], targets[i]). Both live on the host, contiguous, so a batch is one
// allocation per tensor and one memcpy per row: no per-example tensors.
class TensorDataset : public Dataset {
 public:
  // inputs: [N, ...] of any dtype; targets: [N] (int64 class indices for classification) or
  // undefined for unlabelled data. Both must be on the CPU; they are made contiguous and
  // detached (a dataset has no autograd history).
  explicit TensorDataset(Tensor inputs, Tensor targets = Tensor());

  int64_t size() const override { return size_; }
  // Throws ValueError for an index outside [0, size()).
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_;
  Tensor targets_;
  int64_t size_ = 0;
};

// Example i is base[indices[i]]. Holds the base alive; copies nothing.
class SubsetDataset : public Dataset {
 public:
  // Throws ValueError when an index is outside [0, base->size()).
  SubsetDataset(std::shared_ptr<Dataset> base, std::vector<int64_t> indices);

  int64_t size() const override { return int64_t(indices_.size()); }
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  const Dataset& base() const { return *base_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<Dataset> base_;
  std::vector<int64_t> indices_;
};

// torch.utils.data.random_split: disjoint subsets of the given lengths (which must sum to
// dataset->size()), drawn by a seeded permutation, so the same seed gives the same split on
// every machine. Each subset's indices are sorted, which keeps sequential reads (validation)
// in storage order.
std::vector<std::shared_ptr<SubsetDataset>> random_split(std::shared_ptr<Dataset> dataset,
                                                         const std::vector<int64_t>& lengths,
                                                         uint64_t seed);

}  // namespace tandem::data
