#include "collectives/mpi/mpi_work.h"
#include "collectives/rank_failure.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "collectives/mpi/mpi_runtime.h"

namespace tandem::collectives::mpi {

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(Millis t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", double(t.count()) / 1000.0);
  return buf;
}

// How long a timed-out rank waits for the others to say where they are.
Millis query_grace(Millis timeout) {
  return std::clamp(Millis(timeout.count() / 10), Millis(200), Millis(1000));
}

}  // namespace

MpiWork::MpiWork(std::shared_ptr<MpiCommState> state, std::string description, uint64_t seq, int peer,
                 std::vector<MPI_Request> requests, std::shared_ptr<void> buffers, std::function<void()> finish)
    : Work(std::move(description), state->options.timeout),
      state_(std::move(state)),
      seq_(seq),
      peer_(peer),
      requests_(std::move(requests)),
      buffers_(std::move(buffers)),
      finish_(std::move(finish)) {}

MpiWork::~MpiWork() {
  // Dropped without completing: MPI still owns the buffers, so they move to the communicator.
  if (!done_ && !requests_.empty()) state_->abandoned.push_back({std::move(requests_), std::move(buffers_)});
}

bool MpiWork::test() {
  if (!error_.empty()) throw CommError(error_);
  if (done_) return true;
  int flag = 0;
  int rc = MPI_Testall(int(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) fail(mpi_error_text("MPI_Testall", rc), false);
  if (!flag) return false;
  done_ = true;
  requests_.clear();
  if (finish_) finish_();
  buffers_.reset();
  return true;
}

bool MpiWork::is_completed() { return test(); }

void MpiWork::wait(Millis timeout) {
  if (test()) return;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto next_service = start + std::chrono::milliseconds(50);
  for (;;) {
    if (test()) return;
    const auto now = Clock::now();
    if (now >= deadline) fail("did not complete within " + seconds_text(timeout), true);
    // Spin for the first millisecond (short collectives), then give the core away: with more
    // ranks than cores (oversubscribed tests, shared nodes) the rank we wait for needs it.
    const auto waited = now - start;
    if (waited > std::chrono::milliseconds(100)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (waited > std::chrono::milliseconds(1)) std::this_thread::yield();
    // A long wait may be another rank's timeout investigation: answer it. Or the rank it waits
    // for may have failed and said so: stop now instead of at the timeout.
    if (now >= next_service && state_->tracker) {
      state_->tracker->service();
      if (auto notice = state_->tracker->failure_notice()) fail_after_peer_failure(*notice);
      next_service = now + std::chrono::milliseconds(2);
    }
  }
}

void MpiWork::fail_after_peer_failure(const ArrivalTracker::FailureNotice& notice) {
  MpiCommState& s = *state_;
  const std::string msg = description() + " on rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
                          " stopped because rank " + std::to_string(notice.rank) + " failed (" + notice.error_type +
                          "; rank " + std::to_string(notice.rank) + " reports it)";
  if (s.failure.empty()) s.failure = msg;
  s.peer_failed = true;
  s.abandoned.push_back({std::move(requests_), std::move(buffers_)});
  requests_.clear();
  error_ = "this operation failed earlier: " + msg;
  note_peer_failure(notice.exit_code);
  throw collectives::PeerFailedError(msg);
}

void MpiWork::fail(const std::string& what, bool timed_out) {
  MpiCommState& s = *state_;
  std::string msg = description() + " on rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
                    " " + what;
  if (timed_out) {
    if (peer_ >= 0) {
      msg += "; the peer, rank " + std::to_string(peer_) + ", did not post the matching operation";
    } else if (s.tracker) {
      std::string missing = s.tracker->missing_ranks(seq_, query_grace(s.options.timeout));
      msg += missing.empty() ? "; every rank says it has arrived, so MPI itself is stuck (network?)"
                             : "; ranks that did not arrive: " + missing;
    }
  }
  msg += ". This communicator is failed: later operations on it throw at once.";
  // Receives can be cancelled; collectives and sends cannot, so their buffers stay with the
  // communicator until MPI finishes them (or the job ends).
  if (peer_ >= 0)
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  if (s.failure.empty()) s.failure = msg;
  s.abandoned.push_back({std::move(requests_), std::move(buffers_)});
  requests_.clear();
  error_ = "this operation failed earlier: " + msg;
  if (s.options.abort_on_timeout) {
    mark_mpi_unclean(msg);
    arm_abort_watchdog(s.options.abort_grace, msg);
    msg += " The job will be aborted (MPI_Abort) in " + seconds_text(s.options.abort_grace) + ".";
  }
  throw CommError(msg);
}

}  // namespace tandem::collectives::mpi
