// An "HPC host code" that owns MPI: it initializes MPI itself, splits its own communicator,
// hands it to Tandem, and finalizes MPI itself. Checks that Tandem neither initializes nor
// finalizes MPI nor frees the host's communicator. Exit 0 on every rank when all holds.
#include <mpi.h>

#include <cstdio>

#include "collectives/communicator_factory.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_runtime.h"

using namespace tandem;
using namespace tandem::collectives;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bad = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "[rank %d] embed check failed: %s\n", rank, what);
      bad = 1;
    }
  };
  MPI_Comm mine;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &mine);
  init_comm_runtime(CommBackend::Mpi, &argc, &argv);  // must join, not call MPI_Init again
  check(!mpi::tandem_owns_mpi(), "Tandem claims to own an MPI the host initialized");
  {
    MpiCommunicator comm(mine);
    Tensor t = Tensor::ones({16});
    comm.allreduce(t, ReduceOp::Sum);
    check(t.to_vector<double>()[0] == double(comm.size()), "allreduce on the host's communicator");
    auto world = make_communicator(CommBackend::Mpi);
    Tensor w = Tensor::scalar(1, DType::Int32);
    world->allreduce(w, ReduceOp::Sum);
    check(int(w.item()) == size, "allreduce on the world communicator");
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  check(!finalized, "Tandem finalized MPI");
  int n = 0;
  check(MPI_Comm_size(mine, &n) == MPI_SUCCESS && MPI_Barrier(mine) == MPI_SUCCESS, "host communicator unusable");
  MPI_Comm_free(&mine);
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("embedding: %s\n", any_bad ? "FAILED" : "passed");
  MPI_Finalize();
  return any_bad;
}
