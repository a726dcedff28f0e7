// DataLoader: batches of a Dataset in a Sampler's order, prepared ahead by a background thread.
//
//   auto loader = std::make_shared<DataLoader>(dataset, DataLoaderOptions{.batch_size = 256,
//                                                                         .shuffle = true});
//   for (int64_t epoch = 0; epoch < 3; ++epoch) {
//     loader->start_epoch(epoch);
//     while (auto batch = loader->next()) step(*batch);
//   }
//
// An epoch's order is sampler->indices(epoch), a pure function of (seed, epoch), so
// start_epoch(e, k) after a restart yields exactly the batches k.. that an uninterrupted run
// would have seen in epoch e. Batches stay on the host; the strategy moves them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/data/batch.h"
#include "engine/data/sampler.h"

namespace tandem::data {

class BatchPrefetcher;

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;    // RandomSampler(seed) when no sampler is given
  bool drop_last = false;  // drop the last, smaller batch of an epoch
  uint64_t seed = 0;       // shuffle seed; epoch e's order depends on (seed, e) only
  int prefetch = 2;        // batches prepared ahead by a background thread; 0 = synchronous
  // Batches in page-locked memory (Tensor::empty_pinned), copied there on the loading thread,
  // so the copy to a GPU is one asynchronous DMA (PyTorch's pin_memory). Nothing happens
  // without a visible CUDA device.
  bool pin_memory = false;
};

class DataLoader {
 public:
  // Throws ValueError for a null dataset, batch_size < 1 or prefetch < 0. The sampler defaults
  // to RandomSampler(dataset size, seed) when shuffle, else SequentialSampler.
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch: ceil(sampler size / batch_size), or floor with drop_last.
  int64_t num_batches() const;
  int64_t batch_size() const { return options_.batch_size; }
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  std::shared_ptr<Dataset> dataset_ptr() const { return dataset_; }
  const Sampler& sampler() const { return *sampler_; }

  // Replaces the sampler (DDP installs its DistributedSampler here). Ends the current epoch;
  // the new sampler takes effect at the next start_epoch.
  void set_sampler(std::shared_ptr<Sampler> sampler);

  // (Re)starts iteration at epoch `epoch`, skipping its first `skip_batches` batches (exact
  // mid-epoch resume: no example of the skipped batches is loaded). A running epoch is
  // abandoned. Throws ValueError when skip_batches is outside [0, num_batches()].
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);

  // The next batch; nullopt at the end of the epoch. Without a start_epoch call, the first
  // next() starts epoch 0. A dataset's exception is rethrown here, on the caller's thread, and
  // ends the epoch.
  std::optional<Batch> next();

  // Where iteration stands, for checkpoints: the epoch started last, and the index within it of
  // the batch the next call to next() returns (skipped batches count).
  int64_t epoch() const { return epoch_; }
  int64_t batch_index() const { return next_batch_; }

 private:
  void stop_prefetch();

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;

  bool started_ = false;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;  // batch index next() returns next
  int64_t end_batch_ = 0;   // batches in the current epoch
  // The current epoch's order, shared with the prefetch thread's producer.
  std::shared_ptr<const std::vector<int64_t>> order_;
  std::unique_ptr<BatchPrefetcher> prefetcher_;  // null when prefetch == 0
};

}  // namespace tandem::data
