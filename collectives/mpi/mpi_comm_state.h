// State shared by an MpiCommunicator and the Works it started (a Work may outlive its
// communicator; it then finishes without the arrival tracker).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/mpi/arrival_tracker.h"

namespace tandem::collectives::mpi {

struct MpiCommState {
  MPI_Comm comm = MPI_COMM_NULL;  // Tandem's duplicate of the caller's communicator
  MPI_Comm ctl = MPI_COMM_NULL;   // a second duplicate, for the arrival tracker only
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  CommOptions options;
  std::unique_ptr<ArrivalTracker> tracker;  // null once the communicator is destroyed
  std::string failure;                      // the first timeout or error; non-empty = failed
  bool peer_failed = false;                 // failed because another rank announced its failure

  // Requests of timed-out operations: MPI may still complete them (a late rank arrives) and
  // write into their buffers, so the buffers stay alive here until then.
  struct Abandoned {
    std::vector<MPI_Request> requests;
    std::shared_ptr<void> buffers;
  };
  std::vector<Abandoned> abandoned;
};

}  // namespace tandem::collectives::mpi
