#include "collectives/mpi/mpi_communicator.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "collectives/collective_checks.h"
#include "collectives/mpi/half_reduce_ops.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_work.h"
#include "collectives/mpi_cuda_aware.h"
#include "kernels/backend.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem::collectives {

using mpi::mpi_error_text;

namespace {

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: case DType::Bool: return MPI_UINT8_T;
    case DType::Float16: case DType::BFloat16: return MPI_UINT16_T;  // bits; reduced by half_reduce_op
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
  if (dtype == DType::Float16 || dtype == DType::BFloat16) return mpi::half_reduce_op(dtype, op);
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return MPI_SUM;  // avg divides after the sum
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Product: return MPI_PROD;
  }
  return MPI_SUM;
}

int mpi_count(const char* name, int64_t n) {
  if (n > INT_MAX)
    throw ValueError(std::string(name) + ": " + std::to_string(n) + " elements exceed MPI's int count (" +
                     std::to_string(INT_MAX) + "); split the tensor into smaller buckets");
  return int(n);
}

bool same_buffer(const Tensor& a, const Tensor& b) {
  return a.raw_data() == b.raw_data() && a.device() == b.device();
}

// device_pointers: whether MPI takes CUDA device pointers (MpiCommunicator::passes_device_pointers).
// The buffer MPI reads for a tensor: the tensor itself on the host or with device pointers, else
// a pinned host copy of it (one device-to-host DMA, done when this returns).
Tensor mpi_input(const Tensor& t, bool device_pointers) {
  if (t.device().is_cpu() || device_pointers) return t;
  Tensor host = Tensor::empty_pinned(t.shape(), t.dtype());
  host.copy_(t);
  return host;
}
// The buffer MPI writes a tensor's result into: the tensor itself on the host or with device
// pointers, else a pinned host buffer that copy_back moves to the device afterwards.
Tensor mpi_output(const Tensor& t, bool device_pointers) {
  return t.device().is_cpu() || device_pointers ? t : Tensor::empty_pinned(t.shape(), t.dtype());
}
// Result into the caller's tensor: nothing when MPI wrote it directly, else one host-to-device
// DMA from the pinned buffer (asynchronous; the buffer's free waits for it).
void copy_back(const Tensor& output, const Tensor& host) {
  if (same_buffer(output, host)) return;
  NoGradGuard no_grad;
  Tensor target = output;
  target.copy_(host);
}
// MPI does not know Tandem's compute streams: before it reads or writes device memory, the
// kernels queued on the device (that produce the input, or still use the output's block, which
// the caching allocator may have just handed over) must have finished.
void sync_before_mpi(const Tensor& a, const Tensor& b = Tensor()) {
  if (!a.device().is_cpu()) backend_for(a.device()).synchronize(a.device().index);
  if (b.defined() && !b.device().is_cpu() && b.device() != a.device())
    backend_for(b.device()).synchronize(b.device().index);
}
// avg = sum / ranks in the host buffer the sum landed in (integers truncate toward zero).
// Reductions always land on the host: see kReductionsTakeDevicePointers.
void divide_result(const Tensor& out, int ranks) {
  if (ranks > 1) divide_in_place(out, ranks);
}

// Open MPI's nonblocking reductions (MPI_Iallreduce, MPI_Ireduce_scatter) do not take device
// pointers even when the library is CUDA-aware: its CUDA reduction support (coll/cuda, now
// coll/accelerator) wraps only the blocking collectives, and libnbc applies the op on the host
// to the device addresses (a segfault). The Open MPI CUDA documentation lists them under "do
// NOT work with CUDA-aware" (with and without UCX). So reductions of CUDA tensors always stage
// through pinned host memory; data movement (allgather, broadcast, send/recv) passes device
// pointers when the library is CUDA-aware.
constexpr bool kReductionsTakeDevicePointers = false;

// What MPI touches until completion: tensors and the count/displacement arrays of v-variants.
struct Buffers {
  std::vector<Tensor> tensors;
  std::vector<int> counts, displs;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, CommOptions options)
    : Communicator(options), state_(std::make_shared<mpi::MpiCommState>()) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw CommError("MpiCommunicator: MPI is not initialized (or already finalized); initialize it "
                    "first (MPI_Init_thread, or collectives::init_comm_runtime(CommBackend::Mpi))");
  if (comm == MPI_COMM_NULL) throw CommError("MpiCommunicator: the communicator given is MPI_COMM_NULL");
  // Decided before anything is duplicated, so a refusal (TANDEM_MPI_CUDA_AWARE=1 without a
  // CUDA-aware library, or a bad value) leaves nothing behind.
  device_pointers_ = mpi_device_pointers_chosen(std::getenv(kMpiCudaAwareVariable), mpi::mpi_library_cuda_aware());
  auto& s = *state_;
  s.options = options;
  int rc = MPI_Comm_dup(comm, &s.comm);
  if (rc != MPI_SUCCESS) throw CommError(mpi_error_text("MPI_Comm_dup", rc));
  // Errors come back as codes (turned into CommError) instead of MPI's default abort.
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  MPI_Comm_dup(s.comm, &s.ctl);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  MPI_Comm node;
  MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &s.local_rank);
  MPI_Comm_size(node, &s.local_size);
  MPI_Comm_free(&node);
  s.tracker = std::make_unique<mpi::ArrivalTracker>(s.ctl);
  mpi::register_comm_state(state_);
}

MpiCommunicator::~MpiCommunicator() {
  auto& s = *state_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // too late to free anything; MPI took it all down
  // Give operations abandoned by a timeout a bounded chance to finish (a late rank may still
  // arrive); what remains keeps its buffers forever and makes exit abort instead of finalize.
  // Not when a rank failed and said so: it will never arrive.
  const auto deadline = std::chrono::steady_clock::now() +
                        (s.peer_failed ? Millis(0) : std::min<Millis>(s.options.timeout, std::chrono::seconds(5)));
  for (;;) {
    bool pending = false;
    for (auto& a : s.abandoned) {
      int flag = 0;
      MPI_Testall(int(a.requests.size()), a.requests.data(), &flag, MPI_STATUSES_IGNORE);
      pending |= !flag;
    }
    if (!pending || std::chrono::steady_clock::now() >= deadline) break;
    s.tracker->service();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  bool leaked = false;
  for (auto& a : s.abandoned) {
    int flag = 0;
    MPI_Testall(int(a.requests.size()), a.requests.data(), &flag, MPI_STATUSES_IGNORE);
    if (!flag) {
      new std::shared_ptr<void>(std::move(a.buffers));  // MPI may still write there: never free
      leaked = true;
    }
  }
  s.abandoned.clear();
  // After a failure a rank announced, the exit ends the job quietly (mpi_runtime.h).
  if (leaked && !s.peer_failed) mpi::mark_mpi_unclean("a timed-out collective never completed: " + s.failure);
  persistent_.free_idle();
  s.tracker.reset();
  if (mpi::job_failing()) return;  // the communicators stay for the MPI_Abort that ends the job
  MPI_Comm_free(&s.ctl);
  MPI_Comm_free(&s.comm);
}

bool MpiCommunicator::allows_concurrent_threads() const {
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}

void MpiCommunicator::check_usable(const std::string& what) const {
  if (failed()) throw CommError(what + ": this MPI communicator failed earlier and cannot be used: " + failure());
  state_->options = options();  // set_timeout may have changed them
}

WorkHandle MpiCommunicator::start(std::string description, bool collective, int peer, const char* call, int rc,
                                  MPI_Request request, std::shared_ptr<void> buffers,
                                  std::function<void()> finish) {
  if (rc != MPI_SUCCESS) {
    std::string msg = description + ": " + mpi_error_text(call, rc);
    if (state_->failure.empty()) state_->failure = msg;
    throw CommError(msg);
  }
  uint64_t seq = collective ? state_->tracker->entered() : 0;
  return std::make_shared<mpi::MpiWork>(state_, std::move(description), seq, peer,
                                        std::vector<MPI_Request>{request}, std::move(buffers), std::move(finish));
}

namespace {
constexpr int64_t kStagedInPlaceBytes = 32 << 20;  // below it the copy costs more than it saves
}  // namespace

WorkHandle MpiCommunicator::allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  check_buffer("allreduce", "input", input);
  check_buffer("allreduce", "output", output);
  check_same_dtype("allreduce", input, output);
  check_numel("allreduce", "output", output, input.numel(), "allreduce keeps the element count");
  check_reducible("allreduce", input.dtype());
  std::string d = describe("allreduce", reduce_op_name(op), input.dtype(), input.numel());
  check_usable(d);
  count_sent(CommOp::Allreduce, input.numel(), input.dtype());
  bool in_place = same_buffer(input, output);
  auto b = std::make_shared<Buffers>();
  const bool device_pointers = device_pointers_ && kReductionsTakeDevicePointers;
  Tensor in = mpi_input(input, device_pointers);
  Tensor out = in_place ? in : mpi_output(output, device_pointers);
  // In-place reductions of 32 MiB and more: Open MPI's nonblocking ring allocates (and
  // page-faults) a scratch buffer per in-place call, which made in-place 2x slower than
  // out-of-place at 32 MiB. A host buffer reduced again and again uses a persistent request
  // (persistent_allreduce.h: the scratch is allocated once); otherwise the reduction goes out
  // of place from a copy, which Tandem's caching allocator makes cheaper than the scratch
  // (bench/run_allreduce.sh, docs/PERFORMANCE.md). A device tensor staged through pinned memory
  // already has its copy: a second pinned buffer receives the result instead.
  const bool large_in_place = in_place && input.numel() * int64_t(dtype_size(input.dtype())) >= kStagedInPlaceBytes;
  if (large_in_place && same_buffer(in, input)) {
    const int count = mpi_count("allreduce", input.numel());
    if (auto entry =
            persistent_.acquire(state_->comm, in.raw_data(), count, mpi_datatype(input.dtype()), mpi_op(op, input.dtype()))) {
      b->tensors = {input};
      state_->tracker->enter_collective();
      const int rc = MPI_Start(&entry->request);
      if (rc != MPI_SUCCESS) entry->busy = false;
      const int n = size();
      return start(std::move(d), true, -1, "MPI_Start(persistent allreduce)", rc, entry->request, b,
                   [input, op, n, entry] {
                     entry->busy = false;
                     if (op == ReduceOp::Avg) divide_result(input, n);
                   });
    }
  }
  if (large_in_place) {
    if (same_buffer(in, input)) {
      in = in.clone();
    } else {
      out = mpi_output(output, device_pointers);
    }
    in_place = false;
  }
  b->tensors = {input, output, in, out};
  sync_before_mpi(in, out);
  state_->tracker->enter_collective();
  MPI_Request req;
  int rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : in.raw_data(), out.raw_data(),
                          mpi_count("allreduce", input.numel()), mpi_datatype(input.dtype()), mpi_op(op, input.dtype()),
                          state_->comm, &req);
  const int n = size();
  return start(std::move(d), true, -1, "MPI_Iallreduce", rc, req, b, [output, out, op, n] {
    if (op == ReduceOp::Avg) divide_result(out, n);
    copy_back(output, out);
  });
}

WorkHandle MpiCommunicator::reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  check_buffer("reduce_scatter", "input", input);
  check_buffer("reduce_scatter", "output", output);
  check_same_dtype("reduce_scatter", input, output);
  const int64_t n = input.numel();
  check_numel("reduce_scatter", "output", output, chunk_count(n, size(), rank()),
              "rank " + std::to_string(rank()) + "'s chunk of " + std::to_string(n) + " elements over " +
                  std::to_string(size()) + " ranks");
  check_reducible("reduce_scatter", input.dtype());
  std::string d = describe("reduce_scatter", reduce_op_name(op), input.dtype(), n);
  check_usable(d);
  count_sent(CommOp::ReduceScatter, n, input.dtype());
  auto b = std::make_shared<Buffers>();
  const bool device_pointers = device_pointers_ && kReductionsTakeDevicePointers;
  Tensor in = mpi_input(input, device_pointers), out = mpi_output(output, device_pointers);
  b->tensors = {input, output, in, out};
  mpi_count("reduce_scatter", n);
  for (int r = 0; r < size(); ++r) b->counts.push_back(int(chunk_count(n, size(), r)));
  sync_before_mpi(in, out);
  state_->tracker->enter_collective();
  MPI_Request req;
  int rc = MPI_Ireduce_scatter(in.raw_data(), out.raw_data(), b->counts.data(), mpi_datatype(input.dtype()),
                               mpi_op(op, input.dtype()), state_->comm, &req);
  const int ranks = size();
  return start(std::move(d), true, -1, "MPI_Ireduce_scatter", rc, req, b, [output, out, op, ranks] {
    if (op == ReduceOp::Avg) divide_result(out, ranks);
    copy_back(output, out);
  });
}

WorkHandle MpiCommunicator::allgather_async(const Tensor& input, const Tensor& output) {
  check_buffer("allgather", "input", input);
  check_buffer("allgather", "output", output);
  check_same_dtype("allgather", input, output);
  const int64_t n = output.numel();
  check_numel("allgather", "input", input, chunk_count(n, size(), rank()),
              "rank " + std::to_string(rank()) + "'s chunk of the " + std::to_string(n) + "-element output over " +
                  std::to_string(size()) + " ranks");
  std::string d = describe("allgather", "", input.dtype(), n);
  check_usable(d);
  count_sent(CommOp::Allgather, n, input.dtype());
  auto b = std::make_shared<Buffers>();
  Tensor in = mpi_input(input, device_pointers_), out = mpi_output(output, device_pointers_);
  b->tensors = {input, output, in, out};
  mpi_count("allgather", n);
  const MPI_Datatype dt = mpi_datatype(input.dtype());
  sync_before_mpi(in, out);
  state_->tracker->enter_collective();
  MPI_Request req;
  int rc;
  if (n % size() == 0) {  // even split: the plain collective has the better algorithms
    rc = MPI_Iallgather(in.raw_data(), int(in.numel()), dt, out.raw_data(), int(n / size()), dt, state_->comm, &req);
  } else {
    for (int r = 0; r < size(); ++r) {
      b->counts.push_back(int(chunk_count(n, size(), r)));
      b->displs.push_back(int(chunk_offset(n, size(), r)));
    }
    rc = MPI_Iallgatherv(in.raw_data(), int(in.numel()), dt, out.raw_data(), b->counts.data(), b->displs.data(),
                         dt, state_->comm, &req);
  }
  return start(std::move(d), true, -1, "MPI_Iallgather", rc, req, b, [output, out] { copy_back(output, out); });
}

WorkHandle MpiCommunicator::broadcast_async(const Tensor& tensor, int root) {
  check_buffer("broadcast", "", tensor);
  check_rank("broadcast", "root", root, size());
  std::string d = describe("broadcast", "root " + std::to_string(root), tensor.dtype(), tensor.numel());
  check_usable(d);
  count_sent(CommOp::Broadcast, tensor.numel(), tensor.dtype(), root);
  auto b = std::make_shared<Buffers>();
  // Only the root's values are read, and MPI leaves them as they were; the other ranks need
  // just a buffer to receive into and copy back.
  const bool is_root = rank() == root;
  Tensor host = is_root ? mpi_input(tensor, device_pointers_) : mpi_output(tensor, device_pointers_);
  b->tensors = {tensor, host};
  sync_before_mpi(host);
  state_->tracker->enter_collective();
  MPI_Request req;
  int rc = MPI_Ibcast(host.raw_data(), mpi_count("broadcast", tensor.numel()), mpi_datatype(tensor.dtype()), root,
                      state_->comm, &req);
  return start(std::move(d), true, -1, "MPI_Ibcast", rc, req, b, [tensor, host, is_root] {
    if (!is_root) copy_back(tensor, host);
  });
}

WorkHandle MpiCommunicator::barrier_async() {
  check_usable("barrier()");
  state_->tracker->enter_collective();
  MPI_Request req;
  int rc = MPI_Ibarrier(state_->comm, &req);
  return start("barrier()", true, -1, "MPI_Ibarrier", rc, req, nullptr, nullptr);
}

namespace {
void check_tag(const char* name, int tag) {
  if (tag < 0 || tag > 32767)  // 32767: the smallest MPI_TAG_UB the standard allows
    throw ValueError(std::string(name) + ": tag " + std::to_string(tag) + " is outside 0..32767");
}
}  // namespace

WorkHandle MpiCommunicator::send_async(const Tensor& tensor, int dst, int tag) {
  check_buffer("send", "", tensor);
  check_rank("send", "dst", dst, size());
  check_tag("send", tag);
  std::string d = describe("send", "to rank " + std::to_string(dst) + ", tag " + std::to_string(tag),
                           tensor.dtype(), tensor.numel());
  check_usable(d);
  count_sent(CommOp::Send, tensor.numel(), tensor.dtype(), dst);
  auto b = std::make_shared<Buffers>();
  Tensor host = mpi_input(tensor, device_pointers_);
  b->tensors = {tensor, host};
  sync_before_mpi(host);
  MPI_Request req;
  int rc = MPI_Isend(host.raw_data(), mpi_count("send", tensor.numel()), mpi_datatype(tensor.dtype()), dst, tag,
                     state_->comm, &req);
  return start(std::move(d), false, dst, "MPI_Isend", rc, req, b, nullptr);
}

WorkHandle MpiCommunicator::recv_async(const Tensor& tensor, int src, int tag) {
  check_buffer("recv", "", tensor);
  check_rank("recv", "src", src, size());
  check_tag("recv", tag);
  std::string d = describe("recv", "from rank " + std::to_string(src) + ", tag " + std::to_string(tag),
                           tensor.dtype(), tensor.numel());
  check_usable(d);
  auto b = std::make_shared<Buffers>();
  Tensor host = mpi_output(tensor, device_pointers_);
  b->tensors = {tensor, host};
  sync_before_mpi(host);
  MPI_Request req;
  int rc = MPI_Irecv(host.raw_data(), mpi_count("recv", tensor.numel()), mpi_datatype(tensor.dtype()), src, tag,
                     state_->comm, &req);
  return start(std::move(d), false, src, "MPI_Irecv", rc, req, b, [tensor, host] { copy_back(tensor, host); });
}

}  // namespace tandem::collectives
