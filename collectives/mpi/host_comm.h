// For C++ host programs that hold an MPI_Comm: the handle TrainerOptions::communicator and
// collectives::make_communicator(backend, HostComm) take (see communicator_factory.h).
#pragma once
#include <mpi.h>

#include "collectives/communicator_factory.h"

namespace tandem::collectives {

inline HostComm host_comm(MPI_Comm comm) { return HostComm{static_cast<int64_t>(MPI_Comm_c2f(comm))}; }

}  // namespace tandem::collectives
