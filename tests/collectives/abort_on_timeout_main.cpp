// The default timeout policy end to end: rank 1 hangs (never calls the collective), rank 0
// times out, gets a CommError naming the allreduce and rank 1, catches it and then hangs too -
// and the job must still end, aborted (MPI_Abort) abort_grace after the error. ctest passes
// when the output shows both the error and the abort (the exit code is non-zero by design).
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/error.h"
#include "collectives/communicator_factory.h"

using namespace tandem;
using namespace tandem::collectives;

int main(int argc, char** argv) {
  init_comm_runtime(CommBackend::Mpi, &argc, &argv);
  CommOptions options;
  options.timeout = std::chrono::milliseconds(1000);
  options.abort_grace = std::chrono::milliseconds(1000);  // abort_on_timeout stays on (the default)
  auto comm = make_communicator(CommBackend::Mpi, options);
  if (comm->rank() == 0) {
    try {
      comm->allreduce(Tensor::ones({64}));
    } catch (const CommError& e) {
      std::printf("rank 0 caught CommError: %s\n", e.what());
      std::fflush(stdout);
    }
  }
  // Every rank now "hangs"; only the watchdog's MPI_Abort can end the job.
  for (int i = 0; i < 60; ++i) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::printf("rank %d: not aborted after 60 s\n", comm->rank());
  return 0;
}
