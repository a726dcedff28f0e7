#include "collectives/mpi/mpi_runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "engine/core/error.h"

// Open MPI's extensions (MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support); other MPIs may lack
// the header, and then no CUDA support is assumed.
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace tandem::collectives::mpi {

bool mpi_library_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  // Asked even when the headers say 0: the library loaded at run time may differ from the one
  // the headers came with (an HPC site's CUDA-aware build of the same ABI).
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

namespace {

bool g_owned = false;
std::mutex g_unclean_mutex;
std::string g_unclean_reason;  // empty: clean
std::atomic<bool> g_watchdog_armed{false};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(g_unclean_mutex);
    reason = g_unclean_reason;
  }
  if (!reason.empty()) abort_job("exiting after a failed collective: " + reason);
  MPI_Finalize();
}

}  // namespace

std::string mpi_error_text(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return std::string(call) + " failed: " + (len ? std::string(text, size_t(len)) : "MPI error " + std::to_string(code));
}

void ensure_mpi_initialized(int* argc, char*** argv) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw CommError("MPI was already finalized in this process; create Tandem communicators before "
                    "MPI_Finalize (MPI cannot be initialized twice)");
  if (initialized) return;  // the host application owns MPI
  // Open MPI's nonblocking allreduce (libnbc) picks among 4 algorithms; the ring is the one
  // that beats blocking MPI_Allreduce at every size from 1 MiB on a node (bench/run_allreduce.sh,
  // docs/PERFORMANCE.md); the default choice ran at 0.43-0.6x. A user's own setting wins.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) throw CommError(mpi_error_text("MPI_Init_thread", rc));
  g_owned = true;
  std::atexit(finalize_at_exit);
  // An MPI built without thread support may give less than MULTIPLE: FUNNELED still trains
  // (bagua async then polls its rounds on the main thread), anything lower does not.
  if (provided < MPI_THREAD_FUNNELED)
    throw CommError("MPI_Init_thread gave thread level " + std::to_string(provided) +
                    ", below MPI_THREAD_FUNNELED (Tandem runs OpenMP and data-loader threads beside the main thread, "
                    "which calls MPI); use an MPI library built with thread support");
}

bool tandem_owns_mpi() { return g_owned; }

void mark_mpi_unclean(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_unclean_mutex);
  if (g_unclean_reason.empty()) g_unclean_reason = why;
}

void abort_job(const std::string& why) {
  int rank = -1;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "tandem [rank %d]: aborting the job: %s\n", rank, why.c_str());
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void arm_abort_watchdog(std::chrono::milliseconds grace, const std::string& why) {
  if (g_watchdog_armed.exchange(true)) return;
  // MPI_Abort from this thread is within MPI_THREAD_MULTIPLE (and outside FUNNELED's letter
  // when a host chose that level, but it only has to kill the job, which Open MPI's abort does
  // from any thread).
  std::thread([grace, why] {
    std::this_thread::sleep_for(grace);
    abort_job(why + " (still running " + std::to_string(grace.count()) + " ms after the error was thrown)");
  }).detach();
}

}  // namespace tandem::collectives::mpi
