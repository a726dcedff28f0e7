// ArrivalTracker: answers "which ranks did not arrive?" when a collective times out. MPI
// cannot tell who has entered a nonblocking collective, so every rank numbers its collectives
// (the same sequence on all ranks, by MPI's ordering rule) and, while it waits inside one,
// answers small queries on a private control communicator with the number of the collective it
// is in. A timed-out rank asks everyone and waits a short grace period: ranks at a lower
// number are behind, ranks that do not answer are busy outside any collective (or dead).
// Queries are only serviced by ranks that are waiting, so the fast path pays nothing.
#pragma once
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>

namespace tandem::collectives::mpi {

class ArrivalTracker {
 public:
  // ctl: a communicator used only by this tracker (the caller duplicates and frees it).
  explicit ArrivalTracker(MPI_Comm ctl);
  ~ArrivalTracker();
  ArrivalTracker(const ArrivalTracker&) = delete;
  ArrivalTracker& operator=(const ArrivalTracker&) = delete;

  // Called as a collective starts; returns its number (1, 2, ...).
  uint64_t enter_collective() { return ++entered_; }
  uint64_t entered() const { return entered_; }
  // Answers queries that have arrived (cheap when there are none). Call while waiting.
  void service();
  // Asks every other rank where it is, waits up to `grace` for answers (servicing others'
  // queries meanwhile), and returns e.g. "rank 3 (no answer: busy outside a collective, or
  // dead); rank 2 (behind, at collective #4)", or "" when every rank had arrived.
  std::string missing_ranks(uint64_t seq, std::chrono::milliseconds grace);

  // A failure notice another rank sent on this control communicator (mpi_runtime.h,
  // announce_rank_failure), if one has arrived: who failed and with what type of error.
  static constexpr int kFailureNoticeTag = 3;
  struct FailureNotice {
    int rank;
    int exit_code;
    std::string error_type;
  };
  std::optional<FailureNotice> failure_notice();

 private:
  using Msg = std::array<int64_t, 3>;  // {query id, sequence number, asking/answering rank}
  struct Outgoing { MPI_Request request; Msg data; };
  void send(int dst, int tag, const Msg& msg);
  void reap_sends();

  MPI_Comm ctl_;
  int rank_ = 0, size_ = 1;
  uint64_t entered_ = 0;
  int64_t next_query_ = 0;
  std::list<Outgoing> sends_;  // list: the buffers must not move while MPI owns them
};

}  // namespace tandem::collectives::mpi
