#include "collectives/local_communicator.h"

#include "base/error.h"
#include "collectives/collective_checks.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem::collectives {

namespace {

class CompletedWork : public Work {
 public:
  using Work::Work;
  bool is_completed() override { return true; }
  void wait(Millis) override {}
};

// Copies src into dst unless they are the same buffer (in-place calls).
void copy_unless_same(const Tensor& dst, const Tensor& src) {
  if (dst.raw_data() == src.raw_data() && dst.device() == src.device()) return;
  NoGradGuard no_grad;
  Tensor target = dst;  // a handle copy: copy_ writes through it
  target.copy_(src.view(dst.shape()));
}

}  // namespace

struct LocalCommunicator::PendingRecv {
  Tensor target;
  int tag;
  bool matched = false;
};

namespace {

class LocalRecvWork : public Work {
 public:
  LocalRecvWork(std::string d, Millis t, std::shared_ptr<LocalCommunicator::PendingRecv> p)
      : Work(std::move(d), t), pending_(std::move(p)) {}
  bool is_completed() override { return pending_->matched; }
  void wait(Millis) override {
    if (!pending_->matched)
      throw CommError(description() + " on the local communicator: no send with tag " +
                      std::to_string(pending_->tag) + " was posted, and in a one-process world "
                      "nothing else can send; post send_async(tensor, 0, tag) before waiting");
  }

 private:
  std::shared_ptr<LocalCommunicator::PendingRecv> pending_;
};

}  // namespace

LocalCommunicator::LocalCommunicator(CommOptions options) : Communicator(options) {}

WorkHandle LocalCommunicator::done(std::string description) {
  return std::make_shared<CompletedWork>(std::move(description), options().timeout);
}

WorkHandle LocalCommunicator::allreduce_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  check_buffer("allreduce", "input", input);
  check_buffer("allreduce", "output", output);
  check_same_dtype("allreduce", input, output);
  check_numel("allreduce", "output", output, input.numel(), "allreduce keeps the element count");
  check_reducible("allreduce", input.dtype());
  copy_unless_same(output, input);  // one rank: sum, avg, max, min and prod are all the identity
  count_sent(CommOp::Allreduce, input.numel(), input.dtype());
  return done(describe("allreduce", reduce_op_name(op), input.dtype(), input.numel()));
}

WorkHandle LocalCommunicator::reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  check_buffer("reduce_scatter", "input", input);
  check_buffer("reduce_scatter", "output", output);
  check_same_dtype("reduce_scatter", input, output);
  check_numel("reduce_scatter", "output", output, input.numel(), "one rank receives every chunk");
  check_reducible("reduce_scatter", input.dtype());
  copy_unless_same(output, input);
  count_sent(CommOp::ReduceScatter, input.numel(), input.dtype());
  return done(describe("reduce_scatter", reduce_op_name(op), input.dtype(), input.numel()));
}

WorkHandle LocalCommunicator::allgather_async(const Tensor& input, const Tensor& output) {
  check_buffer("allgather", "input", input);
  check_buffer("allgather", "output", output);
  check_same_dtype("allgather", input, output);
  check_numel("allgather", "input", input, output.numel(), "one rank contributes the whole output");
  copy_unless_same(output, input);
  count_sent(CommOp::Allgather, output.numel(), input.dtype());
  return done(describe("allgather", "", input.dtype(), output.numel()));
}

WorkHandle LocalCommunicator::broadcast_async(const Tensor& tensor, int root) {
  check_buffer("broadcast", "", tensor);
  check_rank("broadcast", "root", root, 1);
  count_sent(CommOp::Broadcast, tensor.numel(), tensor.dtype(), root);
  return done(describe("broadcast", "root " + std::to_string(root), tensor.dtype(), tensor.numel()));
}

WorkHandle LocalCommunicator::barrier_async() {
  return std::make_shared<CompletedWork>("barrier()", options().timeout);
}

WorkHandle LocalCommunicator::send_async(const Tensor& tensor, int dst, int tag) {
  check_buffer("send", "", tensor);
  check_rank("send", "dst", dst, 1);
  count_sent(CommOp::Send, tensor.numel(), tensor.dtype(), dst);
  std::string d = describe("send", "to rank 0, tag " + std::to_string(tag), tensor.dtype(), tensor.numel());
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    PendingRecv& r = **it;
    if (r.tag != tag) continue;
    check_same_dtype("send", tensor, r.target);
    check_numel("recv", "receiving", r.target, tensor.numel(), "it must match the send");
    copy_unless_same(r.target, tensor);
    r.matched = true;
    waiting_.erase(it);
    return done(std::move(d));
  }
  NoGradGuard no_grad;
  unreceived_.push_back({tag, tensor.detach().clone()});  // MPI semantics: the sender may reuse its buffer
  return done(std::move(d));
}

WorkHandle LocalCommunicator::recv_async(const Tensor& tensor, int src, int tag) {
  check_buffer("recv", "", tensor);
  check_rank("recv", "src", src, 1);
  auto pending = std::make_shared<PendingRecv>(PendingRecv{tensor, tag});
  std::string d = describe("recv", "from rank 0, tag " + std::to_string(tag), tensor.dtype(), tensor.numel());
  for (auto it = unreceived_.begin(); it != unreceived_.end(); ++it) {
    if (it->tag != tag) continue;
    check_same_dtype("recv", it->data, tensor);
    check_numel("recv", "receiving", tensor, it->data.numel(), "it must match the send");
    copy_unless_same(tensor, it->data);
    pending->matched = true;
    unreceived_.erase(it);
    break;
  }
  if (!pending->matched) waiting_.push_back(pending);
  return std::make_shared<LocalRecvWork>(std::move(d), options().timeout, pending);
}

}  // namespace tandem::collectives
