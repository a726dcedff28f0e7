// AsyncRounds: the averaging rounds of bagua's async algorithm (algorithms.h), one at a time,
// each an allreduce(avg) of a snapshot of the weights over the algorithm's own communicator.
//
// Threaded (the communicator allows_concurrent_threads(): MPI at MPI_THREAD_MULTIPLE, or the
// local world of one): a background thread, started with the first round, runs each round as
// a blocking allreduce (deadline: the communicator's timeout) while training goes on, so a
// round advances whether or not the training thread calls in. The thread touches only the two
// host tensors of the round and the communicator, never the weights: the training thread hands
// it the snapshot and takes the average back, between optimizer steps.
// Polled (a host program initialized MPI below MPI_THREAD_MULTIPLE; NCCL): the round is a
// nonblocking allreduce that advances only while the training thread polls or waits on it.
//
// Errors: a round that fails on the thread (a timeout, a dead peer) ends the thread; the next
// poll() or wait() on the training thread throws CommError with the communicator's message.
// The destructor (and stop()) joins the thread on every path: a round in flight is not
// interruptible, so joining waits for it to complete or to fail at the communicator's timeout.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/communicator.h"

namespace tandem::bagua {

class AsyncRounds {
 public:
  explicit AsyncRounds(std::shared_ptr<collectives::Communicator> comm);
  ~AsyncRounds();
  AsyncRounds(const AsyncRounds&) = delete;
  AsyncRounds& operator=(const AsyncRounds&) = delete;

  bool threaded() const { return threaded_; }
  collectives::Communicator& communicator() const { return *comm_; }

  // ---- the training thread ----
  // Starts averaging `snapshot` into `average` (same shape; both untouched until the round
  // completes). ValueError while a round is in flight; CommError after a failed round.
  void start(const Tensor& snapshot, const Tensor& average);
  bool in_flight() const { return in_flight_; }
  // Never blocks. True once the round in flight has completed (then none is in flight); throws
  // CommError when it failed.
  bool poll();
  // Blocks until the round in flight completes (at most the communicator's timeout); throws
  // CommError when it failed. Returns at once when none is in flight.
  void wait();
  // Ends the thread and joins it: at once when idle; a round handed over, begun by the thread
  // or not, first runs to its end (completes, or fails at the timeout): every rank that started
  // round k takes part in it, so no other rank's thread is left waiting for a round this one
  // dropped. None is in flight afterwards and its average is never applied. Polled: drops the
  // allreduce (its buffers stay with the communicator). A later start() starts a new thread.
  void stop();
  // stop() for a failed run, whose job ends anyway: a round handed over but not yet begun is
  // dropped instead of run (one the thread has begun still ends first).
  void abandon();

  // Rounds whose allreduce completed. Any thread may read it; in threaded mode it advances on
  // the background thread, before the training thread has seen the round.
  int64_t completed() const { return completed_.load(); }

 private:
  void run();                   // the background thread
  void end_thread(bool drop_pending);
  void throw_if_failed() const; // with mutex_ held

  std::shared_ptr<collectives::Communicator> comm_;
  const bool threaded_;
  bool in_flight_ = false;  // training thread only
  std::atomic<int64_t> completed_{0};
  int64_t started_ = 0;

  // threaded: the round handed to the thread, guarded by mutex_
  std::mutex mutex_;
  std::condition_variable cv_;
  bool job_ = false, stopping_ = false, drop_pending_ = false;
  Tensor snapshot_, average_;
  std::string failure_;  // non-empty: a round failed; the thread has ended
  std::thread thread_;

  // polled: the nonblocking allreduce in flight
  collectives::WorkHandle work_;
};

}  // namespace tandem::bagua
