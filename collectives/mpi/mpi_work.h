// MpiWork: one started nonblocking MPI operation. wait() polls MPI_Testall (which also drives
// MPI's progress) until the requests complete or the deadline passes; there is no blocking MPI
// call anywhere, so no rank can hang inside Tandem.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/mpi/mpi_comm_state.h"

namespace tandem::collectives::mpi {

class MpiWork : public Work {
 public:
  // seq: the collective's number (0 for send/recv); peer: the other rank of a send/recv (-1
  // for collectives). buffers: everything MPI reads or writes (tensors, count arrays), kept
  // alive until completion. finish runs once after completion (avg division, device copy-back).
  MpiWork(std::shared_ptr<MpiCommState> state, std::string description, uint64_t seq, int peer,
          std::vector<MPI_Request> requests, std::shared_ptr<void> buffers, std::function<void()> finish);
  ~MpiWork() override;

  bool is_completed() override;
  void wait(Millis timeout) override;

 private:
  bool test();
  [[noreturn]] void fail(const std::string& what, bool timed_out);
  [[noreturn]] void fail_after_peer_failure(const ArrivalTracker::FailureNotice& notice);

  std::shared_ptr<MpiCommState> state_;
  uint64_t seq_;
  int peer_;
  std::vector<MPI_Request> requests_;
  std::shared_ptr<void> buffers_;
  std::function<void()> finish_;
  bool done_ = false;
  std::string error_;  // set when this operation timed out or failed: later waits rethrow it
};

}  // namespace tandem::collectives::mpi
