// In-place allreduce bandwidth of three ways to call MPI, in one program so they share the same
// ranks, placement and memory: blocking MPI_Allreduce (what the plain peer uses), nonblocking
// MPI_Iallreduce polled with MPI_Test (what Tandem's MPI communicator uses), and a persistent
// request (MPIX_Allreduce_init from Open MPI's pcollreq extension, when the library has it).
// Rounds alternate the three; each prints its best algbw over 5 rounds of 20 calls, float sum.
// It answers whether a gap between allreduce_perf and mpi_allreduce_peer is the call's algorithm
// or run-to-run noise. Run with coll_libnbc_iallreduce_algorithm=1 (the ring Tandem selects):
//   OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 mpirun -np 2 --bind-to none build/bin/mpi_inplace_modes
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define TANDEM_HAVE_PERSISTENT_ALLREDUCE 1
#else
#define TANDEM_HAVE_PERSISTENT_ALLREDUCE 0
#endif

namespace {

enum class Mode { Blocking, Nonblocking, Persistent };

void wait(MPI_Request& r) {
  int done = 0;
  while (!done) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
}

// Best algbw (GB/s) over 5 rounds of 20 in-place calls on `buf`.
double algbw(Mode mode, std::vector<float>& buf) {
  const int n = int(buf.size());
  MPI_Request persistent = MPI_REQUEST_NULL;
#if TANDEM_HAVE_PERSISTENT_ALLREDUCE
  if (mode == Mode::Persistent)
    MPIX_Allreduce_init(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &persistent);
#endif
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
      if (mode == Mode::Blocking) {
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (mode == Mode::Nonblocking) {
        MPI_Request r;
        MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
        wait(r);
      } else {
        MPI_Start(&persistent);
        wait(persistent);
      }
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 20);
  }
  if (persistent != MPI_REQUEST_NULL) MPI_Request_free(&persistent);
  return double(n) * sizeof(float) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::printf("| size (MiB) | blocking GB/s | nonblocking GB/s | persistent GB/s |\n|---|---|---|---|\n");
  for (long mib : {1L, 4L, 8L, 16L, 32L, 64L}) {
    std::vector<float> buf(size_t(mib << 20) / sizeof(float), 1.0f);
    double b[3][2];
    for (int pass = 0; pass < 2; ++pass) {  // alternate, so a slow moment hits every mode
      b[0][pass] = algbw(Mode::Blocking, buf);
      b[1][pass] = algbw(Mode::Nonblocking, buf);
      b[2][pass] = TANDEM_HAVE_PERSISTENT_ALLREDUCE ? algbw(Mode::Persistent, buf) : 0.0;
    }
    if (rank == 0)
      std::printf("| %ld | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |\n", mib, b[0][0], b[0][1], b[1][0], b[1][1],
                  b[2][0], b[2][1]);
  }
  MPI_Finalize();
  return 0;
}
