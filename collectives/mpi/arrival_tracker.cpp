#include "collectives/mpi/arrival_tracker.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tandem::collectives::mpi {

namespace {
constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;
static_assert(ArrivalTracker::kFailureNoticeTag != kQueryTag && ArrivalTracker::kFailureNoticeTag != kAnswerTag);
}  // namespace

ArrivalTracker::ArrivalTracker(MPI_Comm ctl) : ctl_(ctl) {
  MPI_Comm_rank(ctl_, &rank_);
  MPI_Comm_size(ctl_, &size_);
}

ArrivalTracker::~ArrivalTracker() {
  reap_sends();
  if (sends_.empty()) return;
  // Sends still pending go to ranks that stopped listening. Let MPI finish or drop them, and
  // leak their small buffers (moved, not copied, by splice) rather than free memory MPI may read.
  for (auto& s : sends_) MPI_Request_free(&s.request);
  auto* leaked = new std::list<Outgoing>;
  leaked->splice(leaked->end(), sends_);
}

void ArrivalTracker::send(int dst, int tag, const Msg& msg) {
  sends_.push_back({MPI_REQUEST_NULL, msg});
  Outgoing& out = sends_.back();
  MPI_Isend(out.data.data(), 3, MPI_INT64_T, dst, tag, ctl_, &out.request);
}

void ArrivalTracker::reap_sends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? sends_.erase(it) : std::next(it);
  }
}

void ArrivalTracker::service() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, ctl_, &flag, &status);
    if (!flag) break;
    Msg query;
    MPI_Recv(query.data(), 3, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, ctl_, MPI_STATUS_IGNORE);
    send(status.MPI_SOURCE, kAnswerTag, {query[0], int64_t(entered_), rank_});
  }
  reap_sends();
}

std::optional<ArrivalTracker::FailureNotice> ArrivalTracker::failure_notice() {
  int flag = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, kFailureNoticeTag, ctl_, &flag, &status);
  if (!flag) return std::nullopt;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  std::string text(size_t(std::max(count, 0)), '\0');
  MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, kFailureNoticeTag, ctl_, MPI_STATUS_IGNORE);
  // "<exit code> <error type>"
  const size_t space = text.find(' ');
  int exit_code = space == std::string::npos ? 1 : std::atoi(text.substr(0, space).c_str());
  if (exit_code < 1 || exit_code > 255) exit_code = 1;
  return FailureNotice{status.MPI_SOURCE, exit_code, space == std::string::npos ? text : text.substr(space + 1)};
}

std::string ArrivalTracker::missing_ranks(uint64_t seq, std::chrono::milliseconds grace) {
  const int64_t query_id = ++next_query_ + (int64_t(rank_) << 40);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) send(r, kQueryTag, {query_id, int64_t(seq), rank_});
  std::vector<int64_t> position(size_t(size_), -1);  // -1: no answer yet
  position[size_t(rank_)] = int64_t(seq);
  int answered = 1;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (answered < size_ && std::chrono::steady_clock::now() < deadline) {
    service();
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, ctl_, &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    Msg answer;
    MPI_Recv(answer.data(), 3, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, ctl_, MPI_STATUS_IGNORE);
    if (answer[0] != query_id) continue;  // a late answer to an earlier query
    if (position[size_t(status.MPI_SOURCE)] < 0) ++answered;
    position[size_t(status.MPI_SOURCE)] = answer[1];
  }
  std::string silent, behind;
  for (int r = 0; r < size_; ++r) {
    int64_t p = position[size_t(r)];
    if (p < 0) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
    else if (p < int64_t(seq))
      behind += (behind.empty() ? "" : ", ") + std::to_string(r) + " (at collective #" + std::to_string(p) + ")";
  }
  std::string out;
  if (!silent.empty())
    out += "rank " + silent + " (no answer within " + std::to_string(grace.count()) +
           " ms: not inside any collective of this communicator - busy, blocked elsewhere, or dead)";
  if (!behind.empty()) out += (out.empty() ? "" : "; ") + std::string("rank ") + behind + " (behind)";
  return out;
}

}  // namespace tandem::collectives::mpi
