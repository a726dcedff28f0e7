#include "engine/strategies/bagua/async_rounds.h"

#include "base/error.h"

namespace tandem::bagua {

AsyncRounds::AsyncRounds(std::shared_ptr<collectives::Communicator> comm)
    : comm_(std::move(comm)), threaded_(comm_ != nullptr && comm_->allows_concurrent_threads()) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "bagua async: no communicator for the averaging rounds");
}

AsyncRounds::~AsyncRounds() { stop(); }

void AsyncRounds::throw_if_failed() const {
  if (!failure_.empty()) {
    throw CommError("bagua async: averaging round " + std::to_string(started_) +
                    " failed on its background thread: " + failure_);
  }
}

void AsyncRounds::start(const Tensor& snapshot, const Tensor& average) {
  TANDEM_CHECK(!in_flight_, ValueError, "bagua async: a round is already in flight; poll() or wait() for it first");
  if (!threaded_) {
    work_ = comm_->allreduce_async(snapshot, average, collectives::ReduceOp::Avg);
    started_ += 1;
    in_flight_ = true;
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  if (!thread_.joinable()) {
    stopping_ = drop_pending_ = false;
    thread_ = std::thread([this] { run(); });
  }
  snapshot_ = snapshot;
  average_ = average;
  job_ = true;
  started_ += 1;
  in_flight_ = true;
  cv_.notify_all();
}

void AsyncRounds::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return job_ || stopping_; });
    // A round handed over is run even when stop() came first: the other ranks' threads run
    // their copy of it, and would wait for this rank's until the timeout if it were dropped.
    if (!job_ || drop_pending_) return;
    const Tensor snapshot = snapshot_, average = average_;
    lock.unlock();
    // Blocking, with the communicator's deadline: nothing here waits forever, and nothing
    // escapes the thread (an exception leaving it would be std::terminate).
    std::string failure;
    try {
      comm_->allreduce(snapshot, average, collectives::ReduceOp::Avg);
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "an exception without a message";
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    lock.lock();
    job_ = false;
    if (failure.empty()) {
      completed_ += 1;
    } else {
      failure_ = failure;
    }
    cv_.notify_all();
    if (!failure_.empty()) return;  // the communicator is failed: no later round can run
  }
}

bool AsyncRounds::poll() {
  if (!in_flight_) return false;
  if (!threaded_) {
    if (!work_->is_completed()) return false;  // throws CommError when it failed
    work_.reset();
    completed_ += 1;
    in_flight_ = false;
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  if (job_) return false;
  in_flight_ = false;
  return true;
}

void AsyncRounds::wait() {
  if (!in_flight_) return;
  if (!threaded_) {
    work_->wait();
    work_.reset();
    completed_ += 1;
    in_flight_ = false;
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // Bounded: the thread's allreduce ends, one way or the other, by the communicator's timeout.
  cv_.wait(lock, [this] { return !job_ || !failure_.empty(); });
  throw_if_failed();
  in_flight_ = false;
}

void AsyncRounds::stop() { end_thread(/*drop_pending=*/false); }

void AsyncRounds::abandon() { end_thread(/*drop_pending=*/true); }

void AsyncRounds::end_thread(bool drop_pending) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    drop_pending_ = drop_pending;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  job_ = false;
  snapshot_ = Tensor();
  average_ = Tensor();
  work_.reset();  // polled: an unfinished allreduce's buffers stay with the communicator
  in_flight_ = false;
}

}  // namespace tandem::bagua
