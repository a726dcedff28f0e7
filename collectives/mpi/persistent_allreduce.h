// In-place allreduces of large host buffers through persistent MPI requests (MPI 4's
// MPI_Allreduce_init; Open MPI 4.1 has it as MPIX_Allreduce_init, in its pcollreq extension).
// Why: Open MPI's nonblocking ring (libnbc) allocates, and page-faults, a scratch buffer on every
// in-place call; a persistent request allocates it once. Repeated reductions of the same buffer
// (DDP buckets, allreduce_perf) then run about 2x at 32-64 MiB
// (bench/peers/mpi_inplace_modes.cpp, docs/PERFORMANCE.md).
// A request is bound to (buffer, count, datatype, op, communicator) and reused while idle.
#pragma once
#include <mpi.h>

#include <memory>
#include <vector>

namespace tandem::collectives::mpi {

class PersistentAllreduces {
 public:
  struct Entry {
    void* buffer = nullptr;
    int count = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    bool busy = false;  // started and not yet seen complete (its Work clears it)
  };

  // Whether this MPI library has persistent allreduces at all.
  static bool available();
  // An idle request for an in-place allreduce of `buffer`, made on first use and marked busy;
  // null when the library has none, making one fails, or the one for this buffer is still
  // running: the caller then uses the nonblocking call.
  std::shared_ptr<Entry> acquire(MPI_Comm comm, void* buffer, int count, MPI_Datatype type, MPI_Op op);
  // Frees the idle requests (before the communicator is freed). A busy one belongs to an
  // operation that never completed: it is left to MPI, like that operation's buffers.
  // The owner calls it while MPI is still initialized (nothing is freed on destruction).
  void free_idle();

 private:
  static constexpr size_t kMaxEntries = 8;  // buckets of one model; older idle ones are freed
  std::vector<std::shared_ptr<Entry>> entries_;
};

}  // namespace tandem::collectives::mpi
