#include "engine/data/data_loader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"
#include "engine/data/batch_prefetcher.h"
#include "kernels/pinned_host.h"

namespace tandem::data {
namespace {

int64_t batches_for(int64_t examples, int64_t batch_size, bool drop_last) {
  return drop_last ? examples / batch_size : (examples + batch_size - 1) / batch_size;
}

// Batch `b` of an epoch: the examples order[b*bs, min((b+1)*bs, n)), gathered by the dataset
// in one call. A free function so the prefetch thread touches no DataLoader member.
Tensor pinned_copy(const Tensor& t) {
  if (!t.defined() || t.is_pinned()) return t;
  Tensor pinned = Tensor::empty_pinned(t.shape(), t.dtype());
  pinned.copy_(t);
  return pinned;
}

Batch load_batch(const Dataset& dataset, const std::vector<int64_t>& order, int64_t epoch, int64_t batch_size,
                 int64_t b, bool pin_memory) {
  const size_t begin = size_t(b * batch_size);
  const size_t end = std::min(order.size(), begin + size_t(batch_size));
  std::vector<int64_t> indices(order.begin() + begin, order.begin() + end);
  Batch batch = dataset.get_epoch_batch(indices, epoch);
  if (pin_memory && pinned_host_available()) batch = {pinned_copy(batch.input), pinned_copy(batch.target)};
  return batch;
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(options), sampler_(std::move(sampler)) {
  if (!dataset_) throw ValueError("DataLoader: the dataset is null");
  if (options_.batch_size < 1)
    throw ValueError("DataLoader: batch_size must be >= 1, got " + std::to_string(options_.batch_size));
  if (options_.prefetch < 0)
    throw ValueError("DataLoader: prefetch must be >= 0 (0 loads batches on the calling thread), got " +
                     std::to_string(options_.prefetch));
  if (!sampler_) {
    if (options_.shuffle)
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed);
    else
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  }
}

DataLoader::~DataLoader() { stop_prefetch(); }

int64_t DataLoader::num_batches() const {
  return batches_for(sampler_->size(), options_.batch_size, options_.drop_last);
}

void DataLoader::set_sampler(std::shared_ptr<Sampler> sampler) {
  if (!sampler) throw ValueError("DataLoader::set_sampler: the sampler is null");
  stop_prefetch();
  sampler_ = std::move(sampler);
  started_ = true;  // the old epoch is over: next() says so until start_epoch
  next_batch_ = end_batch_ = 0;
}

void DataLoader::stop_prefetch() { prefetcher_.reset(); }

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  stop_prefetch();
  const int64_t batches = num_batches();
  if (skip_batches < 0 || skip_batches > batches)
    throw ValueError("DataLoader::start_epoch: skip_batches must be in [0, " + std::to_string(batches) +
                     "] (the batches in an epoch), got " + std::to_string(skip_batches));
  auto order = std::make_shared<std::vector<int64_t>>(sampler_->indices(epoch));
  if (int64_t(order->size()) != sampler_->size())
    throw ValueError("DataLoader: the sampler returned " + std::to_string(order->size()) +
                     " indices for epoch " + std::to_string(epoch) + " but its size() is " +
                     std::to_string(sampler_->size()) + "; a sampler's indices must match its size");
  order_ = std::move(order);
  started_ = true;
  epoch_ = epoch;
  next_batch_ = skip_batches;
  end_batch_ = batches;
  if (options_.prefetch > 0 && next_batch_ < end_batch_) {
    // The loading thread pins on this thread's device (pinned_host.h), not on device 0.
    const int pin_device = options_.pin_memory ? pinned_host_thread_device() : -1;
    prefetcher_ = std::make_unique<BatchPrefetcher>(
        [dataset = dataset_, order = order_, epoch, bs = options_.batch_size, pin = options_.pin_memory,
         pin_device](int64_t b) {
          pinned_host_use_device(pin_device);
          return load_batch(*dataset, *order, epoch, bs, b, pin);
        },
        next_batch_, end_batch_, options_.prefetch);
  }
}

std::optional<Batch> DataLoader::next() {
  if (!started_) start_epoch(0);
  if (next_batch_ >= end_batch_) return std::nullopt;
  if (!prefetcher_) {
    // Synchronous: an exception leaves the epoch finished, like the prefetching path.
    const int64_t b = next_batch_;
    next_batch_ = end_batch_;
    Batch batch = load_batch(*dataset_, *order_, epoch_, options_.batch_size, b, options_.pin_memory);
    next_batch_ = b + 1;
    return batch;
  }
  try {
    std::optional<Batch> batch = prefetcher_->next();
    next_batch_ = batch ? next_batch_ + 1 : end_batch_;
    return batch;
  } catch (...) {
    next_batch_ = end_batch_;
    stop_prefetch();
    throw;
  }
}

}  // namespace tandem::data
