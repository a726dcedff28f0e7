// Who owns MPI. Tandem never calls MPI_Init when MPI is already initialized (an HPC code that
// embeds Tandem keeps ownership) and finalizes only an MPI it initialized itself. When Tandem
// initializes, it asks for MPI_THREAD_MULTIPLE (bagua's async averages on a thread of its own,
// over a communicator of its own, while the training thread uses the world's) and accepts
// down to MPI_THREAD_FUNNELED (then everything calls MPI from the main thread, and async polls
// its rounds there). It finalizes at process exit - or aborts the job instead when a collective
// failed and left requests that can never complete (MPI_Finalize would wait for them forever).
// A host program that initialized MPI chose the level itself: MpiCommunicator::
// allows_concurrent_threads() asks MPI_Query_thread.
#pragma once
#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>

#include "collectives/mpi/mpi_comm_state.h"

namespace tandem::collectives::mpi {

// Joins an initialized MPI, or calls MPI_Init_thread(MULTIPLE) and registers finalization at
// exit. Throws CommError if MPI was already finalized or gives less than FUNNELED.
void ensure_mpi_initialized(int* argc, char*** argv);
// True when this process's MPI was initialized by Tandem (so Tandem finalizes it).
bool tandem_owns_mpi();
// Records that MPI state is unrecoverable (a timed-out collective's requests are still
// pending): at exit Tandem aborts the job instead of finalizing.
void mark_mpi_unclean(const std::string& why);
// Prints the reason on stderr and ends every rank of the job (MPI_Abort on MPI_COMM_WORLD).
[[noreturn]] void abort_job(const std::string& why);
// Starts a detached thread that calls abort_job(why) after `grace` (once per process): the
// thrown CommError gets time to be reported, and the job still ends if nobody handles it.
void arm_abort_watchdog(std::chrono::milliseconds grace, const std::string& why);

// ---- fail-fast (docs/COLLECTIVES.md, "When one rank fails") ----
// Every MpiCommunicator registers its state, so a failing rank can tell the peers of each.
void register_comm_state(const std::shared_ptr<MpiCommState>& state);
// The failing rank: sends a failure notice ("<exit_code> <error_type>",
// ArrivalTracker::kFailureNoticeTag on each live communicator's control communicator) to every
// other rank; when Tandem owns MPI, its exit is then MPI_Abort(exit_code), without a message,
// instead of MPI_Finalize. Never throws.
void announce_rank_failure(const std::string& error_type, int exit_code);
// A rank that received a notice (its collective stopped, unfinished): at exit, when Tandem owns
// MPI, it waits 10 s for the failing rank's abort, then ends the job itself the same way.
void note_peer_failure(int exit_code);
// True once this process announced or received a failure: the job is ending, and communicators
// keep their MPI communicators for the abort instead of freeing them.
bool job_failing();

// Whether the MPI library takes CUDA device pointers, as it says at run time
// (MPIX_Query_cuda_support, an Open MPI extension from <mpi-ext.h>; the headers' compile-time
// MPIX_CUDA_AWARE_SUPPORT only says how they were built). False for MPIs without the query.
bool mpi_library_cuda_aware();
// "MPI_Iallreduce failed: <MPI's error string>"
std::string mpi_error_text(const char* call, int code);

}  // namespace tandem::collectives::mpi
