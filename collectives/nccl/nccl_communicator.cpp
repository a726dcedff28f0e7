#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "collectives/collective_checks.h"
#include "collectives/mpi/mpi_communicator.h"
#include "kernels/cuda/cuda_context.h"

namespace tandem::collectives {

namespace {

using Clock = std::chrono::steady_clock;

void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw DeviceError(std::string(call) + " failed: " + cudaGetErrorString(err));
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::UInt8: return ncclUint8;
    case DType::Bool: return ncclUint8;  // moved as bytes, never reduced
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Product: return ncclProd;
  }
  return ncclSum;
}

}  // namespace

// A CUDA event shared by a Work and the watchdog (whichever lets go last destroys it).
struct DoneEvent {
  cudaEvent_t event = nullptr;
  DoneEvent() { cuda_check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"); }
  ~DoneEvent() { cudaEventDestroy(event); }
  DoneEvent(const DoneEvent&) = delete;
  DoneEvent& operator=(const DoneEvent&) = delete;
};

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;  // stays set after an abort (other threads may be reading it)
  cudaStream_t stream = nullptr;
  int rank = 0, size = 1, local_rank = 0, local_size = 1, device = 0;

  // ---- failure and watchdog (guarded by mutex) ----
  // The watchdog thread enforces the deadlines of operations whose wait() only ordered the
  // compute stream after them (no host sync): every millisecond it queries their done events
  // and NCCL's asynchronous error; a missed deadline or an error aborts the communicator, so the
  // kernels of every rank return instead of hanging, and the next call on this communicator
  // throws CommError with the reason.
  struct Watched {
    std::shared_ptr<DoneEvent> done;
    Clock::time_point deadline;
    std::string what;
    int64_t timeout_ms;
  };
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::string failure;  // set once aborted
  bool aborted = false;
  bool stopping = false;
  std::vector<Watched> watched;
  std::thread watchdog;

  // Called with `mutex` held (the lock enter() returns).
  void check(ncclResult_t rc, const std::string& what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const std::string msg = what + " failed in NCCL: " + ncclGetErrorString(rc) + " (" +
                            std::string(ncclGetLastError(comm)) + ")";
    abort_locked(msg);
    throw CommError(msg);
  }
  // Locks `mutex` for the enqueueing of one operation and throws if the communicator failed.
  // ncclCommAbort frees the communicator (nccl.h) and NCCL allows only one thread at a time to
  // operate a communicator, so the watchdog's abort must never run while this thread is inside
  // an NCCL call on `comm`, nor between the usability check and that call: holding the lock
  // across both serializes them (the watchdog takes the same lock to abort). Then orders the
  // NCCL stream after the work already queued on the compute stream, which every operation needs.
  std::unique_lock<std::mutex> enter(const std::string& what) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!failure.empty())
      throw CommError(what + ": this NCCL communicator failed earlier (" + failure + "); create a new one");
    order_after_compute();
    return lock;
  }
  // NCCL's asynchronous error, or ncclSuccess once aborted (the comm is freed then; the caller's
  // check_usable reports the failure). Locked so an abort cannot free `comm` under the query.
  ncclResult_t async_error() {
    std::lock_guard<std::mutex> lock(mutex);
    ncclResult_t async = ncclSuccess;
    if (!aborted && comm) ncclCommGetAsyncError(comm, &async);
    return async;
  }
  bool is_aborted() const {
    std::lock_guard<std::mutex> lock(mutex);
    return aborted;
  }
  void abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    abort_locked(why);
  }
  void abort_locked(const std::string& why) {
    if (aborted) return;
    aborted = true;
    failure = why;
    if (comm) ncclCommAbort(comm);  // frees comm; no other thread is in an NCCL call on it (enter())
  }
  void check_usable(const std::string& what) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure.empty())
      throw CommError(what + ": this NCCL communicator failed earlier (" + failure + "); create a new one");
  }
  void check_device(const char* name, const Tensor& t) const {
    if (t.device().type != DeviceType::CUDA || t.device().index != device) {
      throw DeviceError(std::string(name) + ": the NCCL communicator moves tensors on cuda:" + std::to_string(device) +
                        ", got one on " + t.device().str() + "; move it there, or use the mpi backend for host tensors");
    }
  }
  // The NCCL stream waits for everything queued so far on the device's compute stream
  // (kernels/cuda/cuda_context.h), where the gradients are produced.
  void order_after_compute() {
    cudaEvent_t ready;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ready, cuda::compute_stream(device)), "cudaEventRecord(compute)");
    cuda_check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent(nccl stream)");
    cudaEventDestroy(ready);
  }

  void watch(std::shared_ptr<DoneEvent> done, int64_t timeout_ms, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    watched.push_back({std::move(done), Clock::now() + std::chrono::milliseconds(timeout_ms), what, timeout_ms});
    wake.notify_one();
  }
  void start_watchdog() {
    watchdog = std::thread([this] {
      cudaSetDevice(device);
      std::unique_lock<std::mutex> lock(mutex);
      while (!stopping) {
        poll_locked();
        wake.wait_for(lock, watched.empty() ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1));
      }
    });
  }
  void stop_watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_one();
    if (watchdog.joinable()) watchdog.join();
  }
  void poll_locked() {
    if (aborted) {
      watched.clear();
      return;
    }
    const auto now = Clock::now();
    for (size_t i = 0; i < watched.size();) {
      const cudaError_t q = cudaEventQuery(watched[i].done->event);
      if (q == cudaSuccess) {
        watched[i] = std::move(watched.back());
        watched.pop_back();
        continue;
      }
      const std::string who = watched[i].what + " on rank " + std::to_string(rank) + " of " + std::to_string(size);
      cudaGetLastError();  // clears "not ready" (recorded as this thread's last error) or the failure
      if (q != cudaErrorNotReady) {
        abort_locked(who + " failed on the device: " + cudaGetErrorString(q));
        return;
      }
      if (now >= watched[i].deadline) {
        abort_locked(who + " did not complete within " + std::to_string(watched[i].timeout_ms) +
                     " ms (a rank is missing or stuck); the communicator was aborted, so the other ranks fail too");
        return;
      }
      ++i;
    }
    if (!watched.empty() && comm) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        abort_locked("NCCL reported an asynchronous error on rank " + std::to_string(rank) + " of " +
                     std::to_string(size) + ": " + ncclGetErrorString(async));
    }
  }
};

namespace {

// One NCCL operation. wait() on an ordinary operation is stream-only: the compute stream waits
// for the done event and the watchdog enforces the deadline, so the host never blocks and the
// optimizer's kernels queue behind the last bucket at once. A host-blocking operation (barrier)
// polls on the host until done, as a barrier must.
class NcclWork : public Work {
 public:
  NcclWork(std::string description, Millis timeout, std::shared_ptr<NcclCommunicator::State> state,
           std::vector<Tensor> keep_alive, bool host_blocking = false)
      : Work(std::move(description), timeout), state_(std::move(state)), keep_alive_(std::move(keep_alive)),
        done_(std::make_shared<DoneEvent>()), host_blocking_(host_blocking) {
    cuda_check(cudaEventRecord(done_->event, state_->stream), "cudaEventRecord(nccl done)");
  }
  ~NcclWork() override {
    // Dropped without wait(): later compute work (which may reuse these tensors' memory)
    // still runs after the operation.
    if (!ordered_) cudaStreamWaitEvent(cuda::compute_stream(state_->device), done_->event, 0);
  }

  bool is_completed() override {
    if (finished_) return true;
    const cudaError_t q = cudaEventQuery(done_->event);
    if (q == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is also recorded as this thread's last error: clear it
      return false;
    }
    cuda_check(q, "cudaEventQuery");
    finished_ = true;
    order_compute_after();
    return true;
  }

  void wait(Millis timeout) override {
    state_->check_usable(description());
    if (!host_blocking_) {
      if (!ordered_) {
        order_compute_after();
        state_->watch(done_, timeout.count(), description());
      }
      return;
    }
    const auto deadline = Clock::now() + timeout;
    while (!is_completed()) {
      state_->check_usable(description());  // the watchdog may have aborted meanwhile
      const ncclResult_t async = state_->async_error();
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string msg = description() + " on rank " + std::to_string(state_->rank) + " of " +
                                std::to_string(state_->size) + " failed in NCCL: " + ncclGetErrorString(async);
        state_->abort(msg);
        throw CommError(msg + "; the communicator was aborted");
      }
      if (Clock::now() >= deadline) {
        const std::string msg = description() + " on rank " + std::to_string(state_->rank) + " of " +
                                std::to_string(state_->size) + " did not complete within " +
                                std::to_string(timeout.count()) + " ms (a rank is missing or stuck)";
        state_->abort(msg);
        throw CommError(msg + "; the NCCL communicator was aborted, so the other ranks fail too");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  // Kernels queued on the compute stream from now on see the result; the tensors can go (their
  // memory is reused only by compute-stream work, which is now ordered after this operation).
  void order_compute_after() {
    if (ordered_) return;
    cuda_check(cudaStreamWaitEvent(cuda::compute_stream(state_->device), done_->event, 0), "cudaStreamWaitEvent(compute)");
    ordered_ = true;
    keep_alive_.clear();
  }

  std::shared_ptr<NcclCommunicator::State> state_;
  std::vector<Tensor> keep_alive_;
  std::shared_ptr<DoneEvent> done_;
  bool host_blocking_ = false;
  bool finished_ = false;
  bool ordered_ = false;
};

}  // namespace

NcclCommunicator::NcclCommunicator(MpiCommunicator& bootstrap, int device_index, CommOptions options)
    : Communicator(options), state_(std::make_shared<State>()) {
  State& s = *state_;
  s.rank = bootstrap.rank();
  s.size = bootstrap.size();
  s.local_rank = bootstrap.local_rank();
  s.local_size = bootstrap.local_size();
  s.device = device_index;
  int visible = 0;
  const cudaError_t count = cudaGetDeviceCount(&visible);
  if (count != cudaSuccess || device_index < 0 || device_index >= visible) {
    throw DeviceError("the nccl backend needs a CUDA GPU for rank " + std::to_string(s.rank) + " (cuda:" +
                      std::to_string(device_index) + "), but " +
                      (count != cudaSuccess ? std::string("no GPU is usable: ") + cudaGetErrorString(count)
                                            : std::to_string(visible) + " GPU(s) are visible") +
                      "; use the mpi backend or one GPU per rank");
  }
  cuda_check(cudaSetDevice(device_index), "cudaSetDevice");
  ncclUniqueId id;
  if (s.rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) throw CommError(std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(rc));
  }
  Tensor id_bytes = Tensor::zeros({int64_t(sizeof id)}, DType::UInt8);
  if (s.rank == 0) std::memcpy(id_bytes.raw_data(), &id, sizeof id);
  bootstrap.broadcast(id_bytes, 0);
  std::memcpy(&id, id_bytes.raw_data(), sizeof id);
  const ncclResult_t rc = ncclCommInitRank(&s.comm, s.size, id, s.rank);
  if (rc != ncclSuccess) {
    throw CommError("ncclCommInitRank on rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
                    " (cuda:" + std::to_string(device_index) + ") failed: " + ncclGetErrorString(rc) +
                    "; NCCL needs one GPU per rank (check --trainer.devices and the number of processes)");
  }
  cuda_check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.start_watchdog();
}

NcclCommunicator::~NcclCommunicator() {
  State& s = *state_;
  // Drain the NCCL stream while the watchdog still runs: an operation whose wait() handed its
  // deadline to the watchdog (a missing rank) is then aborted on time instead of hanging here.
  if (s.stream && !s.is_aborted()) cudaStreamSynchronize(s.stream);  // an aborted comm's kernels have returned
  s.stop_watchdog();
  if (s.stream) cudaStreamDestroy(s.stream);
  if (s.comm && !s.aborted) ncclCommDestroy(s.comm);  // ncclCommAbort already freed an aborted one
}

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
int NcclCommunicator::local_rank() const { return state_->local_rank; }
int NcclCommunicator::local_size() const { return state_->local_size; }
int NcclCommunicator::device_index() const { return state_->device; }

WorkHandle NcclCommunicator::allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  const std::string what = describe("allreduce", reduce_op_name(op), input.dtype(), input.numel());
  check_buffer("allreduce", "input", input);
  check_buffer("allreduce", "output", output);
  check_same_dtype("allreduce", input, output);
  check_numel("allreduce", "output", output, input.numel(), "the same number of elements as the input");
  check_reducible("allreduce", input.dtype());
  state_->check_device("allreduce", input);
  state_->check_device("allreduce", output);
  count_sent(CommOp::Allreduce, input.numel(), input.dtype());
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  state_->check(ncclAllReduce(input.raw_data(), output.raw_data(), size_t(input.numel()), nccl_dtype(input.dtype()),
                              nccl_op(op), state_->comm, state_->stream),
                what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{input, output});
}

WorkHandle NcclCommunicator::reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  const std::string what = describe("reduce_scatter", reduce_op_name(op), input.dtype(), input.numel());
  check_buffer("reduce_scatter", "input", input);
  check_buffer("reduce_scatter", "output", output);
  check_same_dtype("reduce_scatter", input, output);
  const int64_t n = input.numel();
  check_numel("reduce_scatter", "output", output, chunk_count(n, size(), rank()), "this rank's chunk of the input");
  check_reducible("reduce_scatter", input.dtype());
  state_->check_device("reduce_scatter", input);
  state_->check_device("reduce_scatter", output);
  // Uneven chunks reduce into scratch, allocated before enter(): its allocation (and its poison
  // fill under TANDEM_CUDA_POISON) is compute-stream work, which enter() orders NCCL's stream after.
  const Tensor full = n % size() == 0 ? Tensor() : Tensor::empty({n}, input.dtype(), input.device());
  count_sent(CommOp::ReduceScatter, n, input.dtype());  // the rule's volume, whichever NCCL call runs
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  if (n % size() == 0) {
    state_->check(ncclReduceScatter(input.raw_data(), output.raw_data(), size_t(n / size()), nccl_dtype(input.dtype()),
                                    nccl_op(op), state_->comm, state_->stream),
                  what);
    return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{input, output});
  }
  // Uneven chunks: reduce everything, then copy this rank's chunk (on the NCCL stream).
  state_->check(ncclAllReduce(input.raw_data(), full.raw_data(), size_t(n), nccl_dtype(input.dtype()), nccl_op(op),
                              state_->comm, state_->stream),
                what);
  const size_t bytes = size_t(output.numel()) * dtype_size(input.dtype());
  const char* src = static_cast<const char*>(full.raw_data()) + size_t(chunk_offset(n, size(), rank())) * dtype_size(input.dtype());
  cuda_check(cudaMemcpyAsync(output.raw_data(), src, bytes, cudaMemcpyDeviceToDevice, state_->stream), "cudaMemcpyAsync");
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{input, output, full});
}

WorkHandle NcclCommunicator::allgather_async(const Tensor& input, const Tensor& output) {
  const std::string what = describe("allgather", "", input.dtype(), output.numel());
  check_buffer("allgather", "input", input);
  check_buffer("allgather", "output", output);
  check_same_dtype("allgather", input, output);
  const int64_t n = output.numel();
  check_numel("allgather", "input", input, chunk_count(n, size(), rank()), "this rank's chunk of the output");
  state_->check_device("allgather", input);
  state_->check_device("allgather", output);
  count_sent(CommOp::Allgather, n, input.dtype());
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  const size_t elem = dtype_size(input.dtype());
  if (n % size() == 0) {
    state_->check(ncclAllGather(input.raw_data(), output.raw_data(), size_t(n / size()), nccl_dtype(input.dtype()),
                                state_->comm, state_->stream),
                  what);
  } else {
    // Uneven chunks: every rank broadcasts its chunk into its slot, as one group.
    state_->check(ncclGroupStart(), what);
    for (int r = 0; r < size(); ++r) {
      char* slot = static_cast<char*>(output.raw_data()) + size_t(chunk_offset(n, size(), r)) * elem;
      const void* send = r == rank() ? input.raw_data() : slot;
      state_->check(ncclBroadcast(send, slot, size_t(chunk_count(n, size(), r)), nccl_dtype(input.dtype()), r,
                                  state_->comm, state_->stream),
                    what);
    }
    state_->check(ncclGroupEnd(), what);
  }
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{input, output});
}

WorkHandle NcclCommunicator::broadcast_async(const Tensor& tensor, int root) {
  const std::string what = describe("broadcast", "root " + std::to_string(root), tensor.dtype(), tensor.numel());
  check_buffer("broadcast", "tensor", tensor);
  check_rank("broadcast", "root", root, size());
  state_->check_device("broadcast", tensor);
  count_sent(CommOp::Broadcast, tensor.numel(), tensor.dtype(), root);
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  state_->check(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), size_t(tensor.numel()), nccl_dtype(tensor.dtype()),
                              root, state_->comm, state_->stream),
                what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{tensor});
}

WorkHandle NcclCommunicator::barrier_async() {
  // A one-element allreduce on this device: completes only when every rank has arrived. Its
  // wait() blocks the host (the one host-blocking operation: ranks meet around file writes).
  const std::string what = "barrier";
  Tensor token = Tensor::zeros({1}, DType::Float32, Device::cuda(state_->device));
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  state_->check(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclFloat32, ncclSum, state_->comm, state_->stream),
                what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{token}, /*host_blocking=*/true);
}

WorkHandle NcclCommunicator::send_async(const Tensor& tensor, int dst, int tag) {
  const std::string what = describe("send", "to rank " + std::to_string(dst), tensor.dtype(), tensor.numel());
  check_buffer("send", "tensor", tensor);
  check_rank("send", "dst", dst, size());
  state_->check_device("send", tensor);
  count_sent(CommOp::Send, tensor.numel(), tensor.dtype(), dst);
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  // NCCL has no tags: messages between a pair of ranks match in call order.
  state_->check(ncclSend(tensor.raw_data(), size_t(tensor.numel()), nccl_dtype(tensor.dtype()), dst, state_->comm,
                         state_->stream),
                what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{tensor});
}

WorkHandle NcclCommunicator::recv_async(const Tensor& tensor, int src, int tag) {
  const std::string what = describe("recv", "from rank " + std::to_string(src), tensor.dtype(), tensor.numel());
  check_buffer("recv", "tensor", tensor);
  check_rank("recv", "src", src, size());
  state_->check_device("recv", tensor);
  const auto nccl_lock = state_->enter(what);  // held until the operation is enqueued
  state_->check(ncclRecv(tensor.raw_data(), size_t(tensor.numel()), nccl_dtype(tensor.dtype()), src, state_->comm,
                         state_->stream),
                what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::vector<Tensor>{tensor});
}

WorkHandle NcclCommunicator::exchange_async(const std::vector<PeerTransfer>& transfers) {
  const std::string what = describe_exchange(transfers);
  std::vector<Tensor> tensors;
  for (const PeerTransfer& t : transfers) {
    const bool send = t.kind == PeerTransfer::Kind::Send;
    check_buffer(send ? "send" : "recv", "tensor", t.tensor);
    check_rank(send ? "send" : "recv", send ? "dst" : "src", t.peer, size());
    state_->check_device(send ? "send" : "recv", t.tensor);
    tensors.push_back(t.tensor);
  }
  for (const PeerTransfer& t : transfers) {
    if (t.kind == PeerTransfer::Kind::Send) count_sent(CommOp::Send, t.tensor.numel(), t.tensor.dtype(), t.peer);
  }
  const auto nccl_lock = state_->enter(what);  // held until the group is enqueued
  // NCCL has no tags: messages between a pair of ranks match in call order, also in a group.
  state_->check(ncclGroupStart(), what);
  for (const PeerTransfer& t : transfers) {
    const size_t count = size_t(t.tensor.numel());
    if (t.kind == PeerTransfer::Kind::Send) {
      state_->check(ncclSend(t.tensor.raw_data(), count, nccl_dtype(t.tensor.dtype()), t.peer, state_->comm,
                             state_->stream),
                    what);
    } else {
      state_->check(ncclRecv(t.tensor.raw_data(), count, nccl_dtype(t.tensor.dtype()), t.peer, state_->comm,
                             state_->stream),
                    what);
    }
  }
  state_->check(ncclGroupEnd(), what);
  return std::make_shared<NcclWork>(what, options().timeout, state_, std::move(tensors));
}

}  // namespace tandem::collectives
