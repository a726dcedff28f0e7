// Fail-fast across ranks (docs/COLLECTIVES.md, "When one rank fails"). An error that only one
// rank meets (a file it cannot write, an exception in its step) would leave the other ranks
// waiting in their next collective until the timeout; instead the failing rank announces it,
// and the collectives the others are waiting in stop at once with PeerFailedError.
#pragma once
#include <string>

#include "base/error.h"

namespace tandem::collectives {

// A collective stopped because another rank of the job failed and said so; that rank reports
// its own error, so this message only says which rank failed and with what type of error.
class PeerFailedError : public CommError {
 public:
  using CommError::CommError;
};

// Tells the other ranks of every live MPI communicator of this process that this rank failed
// with an error of `error_type` ("DataError", ...) that it reports itself. Their waits then
// throw PeerFailedError within milliseconds instead of at the timeout. When Tandem initialized
// MPI, this process's exit ends the job: MPI_Abort(exit_code) instead of MPI_Finalize, without
// a further message (a rank stopped by the notice aborts the job itself only if that has not
// happened 10 s after its own exit began). For an error only this rank meets: a notice that no
// rank is waiting for stays queued and would stop a later collective of the same communicator.
// Never throws; nothing happens without MPI or without another rank.
void announce_rank_failure(const std::string& error_type, int exit_code);

}  // namespace tandem::collectives
