// LocalCommunicator: a world of one process, so single-process code paths (CPU training,
// one GPU, tests) call the same interface as DDP. Reductions over one rank are copies (avg
// divides by 1), broadcast needs root 0, barrier is a no-op, and send/recv to rank 0 pair up
// through an in-process mailbox by tag (in either order). Every Work completes at once,
// except a recv whose send has not been posted: waiting on it throws CommError immediately,
// since nothing else could ever complete it.
#pragma once
#include <deque>
#include <memory>

#include "collectives/communicator.h"

namespace tandem::collectives {

class LocalCommunicator : public Communicator {
 public:
  explicit LocalCommunicator(CommOptions options = {});

  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  bool allows_concurrent_threads() const override { return true; }  // its state is its own

  TANDEM_COMMUNICATOR_OVERRIDES

  struct PendingRecv;

 private:
  WorkHandle done(std::string description);
  struct Message { int tag; Tensor data; };
  std::deque<Message> unreceived_;                    // sends not yet matched by a recv
  std::deque<std::shared_ptr<PendingRecv>> waiting_;  // recvs not yet matched by a send
};

}  // namespace tandem::collectives
