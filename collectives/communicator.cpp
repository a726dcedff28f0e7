#include "collectives/communicator.h"

#include "base/error.h"
#include "collectives/collective_checks.h"

namespace tandem::collectives {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "prod";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
    if (name == reduce_op_name(op)) return op;
  throw ConfigError("unknown reduce op '" + name + "'; allowed: sum, avg, max, min, prod");
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::Allreduce: return "allreduce";
    case CommOp::ReduceScatter: return "reduce_scatter";
    case CommOp::Allgather: return "allgather";
    case CommOp::Broadcast: return "broadcast";
    case CommOp::Send: return "send";
  }
  return "?";
}

int64_t ring_bytes_sent(CommOp op, int64_t numel, int64_t element_bytes, int world_size, int rank, int peer) {
  const int64_t others = numel - chunk_count(numel, world_size, rank);  // every chunk but this rank's
  switch (op) {
    case CommOp::Allreduce: return 2 * others * element_bytes;
    case CommOp::ReduceScatter:
    case CommOp::Allgather: return others * element_bytes;
    case CommOp::Broadcast: return rank == peer && world_size > 1 ? numel * element_bytes : 0;
    case CommOp::Send: return peer == rank ? 0 : numel * element_bytes;
  }
  return 0;
}

int64_t CommTraffic::total_bytes() const {
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  return total;
}

CommTraffic& CommTraffic::operator+=(const CommTraffic& other) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] += other.bytes[i];
    calls[i] += other.calls[i];
  }
  return *this;
}

CommTraffic CommTraffic::operator-(const CommTraffic& earlier) const {
  CommTraffic out = *this;
  for (size_t i = 0; i < bytes.size(); ++i) {
    out.bytes[i] -= earlier.bytes[i];
    out.calls[i] -= earlier.calls[i];
  }
  return out;
}

CommTraffic Communicator::traffic() const {
  CommTraffic t;
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    t.bytes[i] = sent_bytes_[i].load(std::memory_order_relaxed);
    t.calls[i] = sent_calls_[i].load(std::memory_order_relaxed);
  }
  return t;
}

void Communicator::count_sent(CommOp op, int64_t numel, DType dtype, int peer) {
  const size_t i = size_t(op);
  sent_bytes_[i].fetch_add(ring_bytes_sent(op, numel, int64_t(dtype_size(dtype)), size(), rank(), peer),
                           std::memory_order_relaxed);
  sent_calls_[i].fetch_add(1, std::memory_order_relaxed);
}

namespace {

// The Work of an exchange started piece by piece: done when every piece is; wait() gives all of
// them one deadline.
class AllOfWork : public Work {
 public:
  AllOfWork(std::string description, Millis default_timeout, std::vector<WorkHandle> parts)
      : Work(std::move(description), default_timeout), parts_(std::move(parts)) {}
  bool is_completed() override {
    return std::all_of(parts_.begin(), parts_.end(), [](const WorkHandle& w) { return w->is_completed(); });
  }
  void wait(Millis timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const WorkHandle& w : parts_) {
      const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      w->wait(std::max(left, Millis(0)));
    }
  }

 private:
  std::vector<WorkHandle> parts_;
};

}  // namespace

WorkHandle Communicator::exchange_async(const std::vector<PeerTransfer>& transfers) {
  std::vector<WorkHandle> parts;
  parts.reserve(transfers.size());
  for (const PeerTransfer& t : transfers) {
    parts.push_back(t.kind == PeerTransfer::Kind::Send ? send_async(t.tensor, t.peer, t.tag)
                                                       : recv_async(t.tensor, t.peer, t.tag));
  }
  return std::make_shared<AllOfWork>(describe_exchange(transfers), options().timeout, std::move(parts));
}

}  // namespace tandem::collectives
