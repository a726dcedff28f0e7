// Communicator: the one interface every backend (local, MPI, NCCL) implements, so the
// DDP Reducer, the DP path and sync_dist logging are written once.
//
// Tensors are contiguous; input and output have the same dtype and live on any device (the MPI
// backend stages device tensors through host copies). Every operation is asynchronous at
// heart: *_async starts it and returns a Work; the plain names start it and wait with the
// communicator's timeout. Operations must be called in the same order on every rank (MPI's
// rule); a rank that does not arrive makes the others fail with CommError after the timeout
// instead of hanging.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::collectives {

using Millis = std::chrono::milliseconds;

// Product is what MPI and NCCL call prod. Avg = sum / size (integer dtypes: truncated toward
// zero, as NCCL does).
enum class ReduceOp { Sum, Avg, Max, Min, Product };
const char* reduce_op_name(ReduceOp op);            // "sum", "avg", "max", "min", "prod"
ReduceOp parse_reduce_op(const std::string& name);  // ConfigError listing the names

// The operations that put bytes on the wire, for the traffic counters.
enum class CommOp { Allreduce, ReduceScatter, Allgather, Broadcast, Send };
constexpr int kCommOpCount = 5;
const char* comm_op_name(CommOp op);  // "allreduce", "reduce_scatter", "allgather", "broadcast", "send"

// The one counting rule of bytes sent (docs/COLLECTIVES.md, "Bytes sent"): the payload a ring
// algorithm makes rank `rank` of `world_size` send, whatever the backend really runs and
// whatever the dtype (a uint8 payload of n elements counts n bytes, a float32 one 4n). The n
// elements are split into chunks by chunk_count; a ring rank sends every chunk but its own:
//   reduce_scatter (n input elements), allgather (n output elements): n - chunk_count(n, W, rank)
//   allreduce: twice that (a reduce_scatter, then an allgather)
//   broadcast: n from the root, 0 elsewhere;  send: n, 0 to itself
// times the element size. Over all ranks an allreduce of B bytes sends 2(W-1)B exactly, so the
// mean per rank is 2(W-1)/W x B; reduce_scatter and allgather (W-1)/W x B. A world of one sends 0.
// `peer` is the root of a broadcast or the destination of a send, ignored otherwise.
int64_t ring_bytes_sent(CommOp op, int64_t numel, int64_t element_bytes, int world_size, int rank, int peer = -1);

// What a communicator sent, per operation kind: bytes by ring_bytes_sent, and calls.
struct CommTraffic {
  std::array<int64_t, kCommOpCount> bytes{};
  std::array<int64_t, kCommOpCount> calls{};
  int64_t bytes_of(CommOp op) const { return bytes[size_t(op)]; }
  int64_t calls_of(CommOp op) const { return calls[size_t(op)]; }
  int64_t total_bytes() const;
  CommTraffic& operator+=(const CommTraffic& other);
  CommTraffic operator-(const CommTraffic& earlier) const;  // what was sent in between
};

struct CommOptions {
  // A blocking operation (or Work::wait() without an argument) that has not completed after
  // this long throws CommError naming the operation and the ranks that did not arrive.
  Millis timeout = std::chrono::minutes(10);
  // After a timeout the communicator is failed (later operations throw at once). When true the
  // whole job is also aborted (MPI_Abort) `abort_grace` after the error is thrown: time for the
  // caller to report it, and a guarantee that no rank waits forever. Tests turn this off.
  bool abort_on_timeout = true;
  Millis abort_grace = std::chrono::seconds(10);
};

// A started operation. Keeps its tensors alive until it completes.
class Work {
 public:
  Work(std::string description, Millis default_timeout)
      : description_(std::move(description)), default_timeout_(default_timeout) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Polls once; never blocks. True once the result is in the output tensor.
  virtual bool is_completed() = 0;
  // Blocks until completion or until `timeout` has passed since this call; on timeout throws
  // CommError (and, with abort_on_timeout, the job ends abort_grace later).
  virtual void wait(Millis timeout) = 0;
  void wait() { wait(default_timeout_); }
  // "allreduce(sum, float32, 1000 elements)" - used in error messages.
  const std::string& description() const { return description_; }

 private:
  std::string description_;
  Millis default_timeout_;
};
using WorkHandle = std::shared_ptr<Work>;

// One point-to-point operation of an exchange (Communicator::exchange_async).
struct PeerTransfer {
  enum class Kind { Send, Recv };
  Kind kind;
  Tensor tensor;
  int peer;
  int tag = 0;
};

class Communicator {
 public:
  explicit Communicator(CommOptions options) : options_(options) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank and size among the processes on this node (they pick the GPU).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual std::string backend_name() const = 0;  // "local", "mpi", "nccl"

  // Where the tensors given to its operations must live. False (local, MPI): host memory, or
  // device memory the backend stages through host buffers (or hands to a CUDA-aware MPI); true
  // (NCCL): this rank's GPU only.
  virtual bool needs_device_tensors() const { return false; }
  // The device a caller keeps its communication buffers on: `compute` (the rank's device) when
  // the backend needs device tensors, else the CPU.
  Device buffer_device(Device compute) const { return needs_device_tensors() ? compute : Device::cpu(); }

  // True when a second thread may call this communicator's operations while other threads use
  // other communicators of the process (MPI: the library runs at MPI_THREAD_MULTIPLE; local:
  // always). One communicator is still used by one thread at a time. False for NCCL, whose
  // operations queue on the caller's device streams.
  virtual bool allows_concurrent_threads() const { return false; }

  const CommOptions& options() const { return options_; }
  void set_timeout(Millis timeout) { options_.timeout = timeout; }

  // Everything this rank has sent since construction (ring_bytes_sent per started operation;
  // an operation refused by its argument checks counts nothing). Safe to read from any thread.
  CommTraffic traffic() const;

  // ---- asynchronous operations (the ones backends implement) ----
  // output = op over ranks of input; input and output may be the same tensor (in place).
  virtual WorkHandle allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // input (n elements, same n on every rank) is reduced and split into size() chunks, rank r
  // receiving chunk r: chunk_count(n, size, r) elements (the first n % size ranks get one more).
  virtual WorkHandle reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // The inverse split: output has n elements on every rank; rank r contributes chunk r,
  // chunk_count(n, size, r) elements, in rank order.
  virtual WorkHandle allgather_async(const Tensor& input, const Tensor& output) = 0;
  // tensor on every rank becomes root's tensor.
  virtual WorkHandle broadcast_async(const Tensor& tensor, int root) = 0;
  virtual WorkHandle barrier_async() = 0;
  // Point to point; the receiver's tensor must have the sender's dtype and element count.
  virtual WorkHandle send_async(const Tensor& tensor, int dst, int tag) = 0;
  virtual WorkHandle recv_async(const Tensor& tensor, int src, int tag) = 0;

  // Sends and receives that must progress together: this rank's part of one exchange pattern
  // (a scatter, neighbours swapping). Done when all are. Messages between a pair of ranks match
  // in the order given (and by tag where the backend has tags). The default starts each with
  // send_async / recv_async, in order (MPI's are non-blocking, so they progress together); NCCL
  // fuses them into one group, since its separate sends and receives each hold the GPU stream
  // until matched and two ranks receiving first would wait for each other forever.
  virtual WorkHandle exchange_async(const std::vector<PeerTransfer>& transfers);

  WorkHandle allreduce_async(const Tensor& tensor, ReduceOp op) { return allreduce_async(tensor, tensor, op); }

  // ---- blocking operations: start, then wait with options().timeout ----
  void allreduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) { allreduce_async(tensor, tensor, op)->wait(); }
  void allreduce(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum) {
    allreduce_async(input, output, op)->wait();
  }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(input, output, op)->wait();
  }
  void allgather(const Tensor& input, const Tensor& output) { allgather_async(input, output)->wait(); }
  void broadcast(const Tensor& tensor, int root = 0) { broadcast_async(tensor, root)->wait(); }
  void barrier() { barrier_async()->wait(); }
  void send(const Tensor& tensor, int dst, int tag = 0) { send_async(tensor, dst, tag)->wait(); }
  void recv(const Tensor& tensor, int src, int tag = 0) { recv_async(tensor, src, tag)->wait(); }
  void exchange(const std::vector<PeerTransfer>& transfers) { exchange_async(transfers)->wait(); }

 protected:
  // Backends call this once per operation they start, after its checks: `numel` elements of
  // `dtype` (the input of allreduce and reduce_scatter, the output of allgather, the tensor of
  // broadcast and send), `peer` as in ring_bytes_sent.
  void count_sent(CommOp op, int64_t numel, DType dtype, int peer = -1);

 private:
  CommOptions options_;
  std::array<std::atomic<int64_t>, kCommOpCount> sent_bytes_{};
  std::array<std::atomic<int64_t>, kCommOpCount> sent_calls_{};
};

// The asynchronous operations every backend implements, declared once: a backend's class body
// says TANDEM_COMMUNICATOR_OVERRIDES (and keeps the base's two-argument allreduce_async).
#define TANDEM_COMMUNICATOR_OVERRIDES                                                            \
  using Communicator::allreduce_async;                                                           \
  WorkHandle allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) override;     \
  WorkHandle reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) override; \
  WorkHandle allgather_async(const Tensor& input, const Tensor& output) override;                  \
  WorkHandle broadcast_async(const Tensor& tensor, int root) override;                            \
  WorkHandle barrier_async() override;                                                            \
  WorkHandle send_async(const Tensor& tensor, int dst, int tag) override;                         \
  WorkHandle recv_async(const Tensor& tensor, int src, int tag) override;

// The chunk rule shared by reduce_scatter and allgather: n elements over `parts` ranks.
inline int64_t chunk_count(int64_t n, int parts, int index) {
  return n / parts + (index < n % parts ? 1 : 0);
}
inline int64_t chunk_offset(int64_t n, int parts, int index) {
  return index * (n / parts) + std::min<int64_t>(index, n % parts);
}

}  // namespace tandem::collectives
