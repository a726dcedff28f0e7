#include "collectives/mpi/mpi_runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"

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

// Fail-fast state, under g_failure_mutex.
std::mutex g_failure_mutex;
std::vector<std::weak_ptr<MpiCommState>> g_comm_states;  // every MpiCommunicator's, expired ones pruned
int g_failure_exit_code = 0;       // non-zero: this rank failed and told the others
int g_peer_failure_exit_code = 0;  // non-zero: a notice of another rank's failure arrived
MPI_Comm g_abort_comm = MPI_COMM_NULL;  // the largest live communicator when the failure became known
// Notices in flight: MPI owns the buffers until the sends complete, and the process is ending.
struct Notice { MPI_Request request; std::string text; };
std::list<Notice>* g_notices = new std::list<Notice>;

// The rank that failed ends the job (MPI_Abort at its exit, after it reported the error). A rank
// that received its notice waits this long at exit before it aborts the job itself, in case the
// failing rank cannot: an abort from here could cut the failing rank's report short, and Open
// MPI 4.1's mpirun hangs or crashes when ranks abort while another is in MPI_Finalize.
constexpr auto kPeerFailureGrace = std::chrono::seconds(10);

// The largest communicator still alive (its MPI_Abort reaches every process of the job, ddp_spawn's
// spawned ones included); with g_failure_mutex held.
void choose_abort_comm() {
  int largest = 0;
  for (const auto& weak : g_comm_states) {
    if (auto s = weak.lock(); s && s->comm != MPI_COMM_NULL && s->size > largest) {
      largest = s->size;
      g_abort_comm = s->comm;
    }
  }
}

[[noreturn]] void end_failed_job(int exit_code, bool wait_for_failing_rank) {
  if (wait_for_failing_rank) std::this_thread::sleep_for(kPeerFailureGrace);
  MPI_Comm comm = MPI_COMM_WORLD;
  {
    std::lock_guard<std::mutex> lock(g_failure_mutex);
    if (g_abort_comm != MPI_COMM_NULL) comm = g_abort_comm;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(comm, exit_code);
  std::_Exit(exit_code);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  int failure_exit_code = 0, peer_failure_exit_code = 0;
  {
    std::lock_guard<std::mutex> lock(g_failure_mutex);
    failure_exit_code = g_failure_exit_code;
    peer_failure_exit_code = g_peer_failure_exit_code;
  }
  // This rank failed and told the others (it has printed its error by now): MPI_Finalize would
  // wait for ranks whose collectives stopped unfinished; end the job quietly with the exit code.
  if (failure_exit_code != 0) end_failed_job(failure_exit_code, false);
  if (peer_failure_exit_code != 0) end_failed_job(peer_failure_exit_code, true);
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
                    ", below MPI_THREAD_FUNNELED (Tandem runs its CPU thread pool and data-loader threads beside the main thread, "
                    "which calls MPI); use an MPI library built with thread support");
}

bool tandem_owns_mpi() { return g_owned; }

void register_comm_state(const std::shared_ptr<MpiCommState>& state) {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  std::erase_if(g_comm_states, [](const std::weak_ptr<MpiCommState>& s) { return s.expired(); });
  g_comm_states.push_back(state);
}

void announce_rank_failure(const std::string& error_type, int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  bool told = false;
  for (const auto& weak : g_comm_states) {
    const auto s = weak.lock();
    if (!s || s->ctl == MPI_COMM_NULL || s->size < 2) continue;
    for (int r = 0; r < s->size; ++r) {
      if (r == s->rank) continue;
      g_notices->push_back({MPI_REQUEST_NULL, std::to_string(exit_code) + " " + error_type});
      Notice& n = g_notices->back();
      MPI_Isend(n.text.data(), int(n.text.size()), MPI_CHAR, r, ArrivalTracker::kFailureNoticeTag, s->ctl, &n.request);
      told = true;
    }
  }
  if (!told) return;  // no other rank: the error ends this process as any other
  if (g_failure_exit_code == 0) g_failure_exit_code = exit_code;
  choose_abort_comm();
}

void note_peer_failure(int exit_code) {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  if (g_peer_failure_exit_code == 0) g_peer_failure_exit_code = exit_code;
  if (g_abort_comm == MPI_COMM_NULL) choose_abort_comm();
}

bool job_failing() {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  return g_failure_exit_code != 0 || g_peer_failure_exit_code != 0;
}

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
