#include "engine/data/batch_prefetcher.h"

#include <utility>

namespace tandem::data {

BatchPrefetcher::BatchPrefetcher(Producer produce, int64_t first, int64_t end, int capacity)
    : produce_(std::move(produce)),
      first_(first),
      end_(end),
      capacity_(size_t(capacity < 1 ? 1 : capacity)),
      thread_([this] { run(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  thread_.join();
}

void BatchPrefetcher::run() {
  for (int64_t b = first_; b < end_; ++b) {
    Slot slot;
    try {
      slot.batch = produce_(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
      if (stop_) return;
      queue_.push_back(std::move(slot));
    }
    ready_.notify_one();
    if (failed) return;  // the consumer rethrows; nothing after an error is produced
  }
}

std::optional<Batch> BatchPrefetcher::next() {
  if (failed_ || delivered_ >= end_ - first_) return std::nullopt;
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // The producer queues every batch or stops at an error it has queued, so this wait ends.
    ready_.wait(lock, [this] { return !queue_.empty(); });
    slot = std::move(queue_.front());
    queue_.pop_front();
  }
  space_.notify_one();
  ++delivered_;
  if (slot.error) {
    failed_ = true;
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

}  // namespace tandem::data
