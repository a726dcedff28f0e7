// BatchPrefetcher: one background thread that produces batches first..end-1 in order into a
// bounded queue, so loading batch b+1 overlaps the training step on batch b. The queue holds
// at most `capacity` ready batches, which caps the memory a slow consumer can pile up.
//
// A producer exception is queued in its batch's place and rethrown by next() on the
// consumer's thread; the thread then stops. Destroying the prefetcher stops and joins the
// thread even when it is blocked on a full queue, so an abandoned epoch never hangs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/data/batch.h"

namespace tandem::data {

class BatchPrefetcher {
 public:
  using Producer = std::function<Batch(int64_t batch_index)>;

  // Starts the thread at once. capacity >= 1.
  BatchPrefetcher(Producer produce, int64_t first, int64_t end, int capacity);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch in order; nullopt once end is reached (or after a rethrown error).
  std::optional<Batch> next();

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  void run();

  Producer produce_;
  const int64_t first_, end_;
  const size_t capacity_;
  int64_t delivered_ = 0;  // batches handed out by next() (consumer thread only)
  bool failed_ = false;    // consumer thread only

  std::mutex mutex_;
  std::condition_variable ready_;  // a slot was queued
  std::condition_variable space_;  // a slot was taken, or stop was requested
  std::deque<Slot> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every member above is constructed
};

}  // namespace tandem::data
