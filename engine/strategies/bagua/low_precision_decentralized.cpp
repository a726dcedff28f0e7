#include "base/error.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {

namespace {

// A message to my right neighbour is the one its left neighbour expects, and vice versa; two
// tags keep them apart at 2 ranks, where left and right are the same rank.
constexpr int kToRightTag = 7401, kToLeftTag = 7402;

// The weights as one float32 vector on their device (a GPU's copies stay on it; only the
// compressed differences travel).
Tensor flat_copy(const std::vector<Tensor>& params) {
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  Tensor flat = Tensor::empty({total}, DType::Float32, params.front().device());
  int64_t offset = 0;
  for (const Tensor& p : params) {
    flat.narrow(0, offset, p.numel()).copy_(p.detach().contiguous().view({p.numel()}));
    offset += p.numel();
  }
  return flat;
}

void add_decoded(Tensor& copy, const Tensor& packed) {
  Tensor decoded = Tensor::empty(copy.shape(), DType::Float32, copy.device());
  decompress_min_max_uint8(packed, decoded, kDefaultCompressionBlock);
  copy = add(copy, decoded);
}

}  // namespace

LowPrecisionDecentralized::LowPrecisionDecentralized(const InitParams& params) {
  interval_ = parse_int_option(params, "communication_interval", 1, "optimizer steps between weight exchanges");
}

void LowPrecisionDecentralized::validate(int world_size) const {
  if (world_size < 2) {
    throw ConfigError("bagua algorithm=low_precision_decentralized exchanges weights with ring neighbours, but this job "
                      "has " + std::to_string(world_size) + " process; run 2 or more (--trainer.devices=N) or use "
                      "algorithm=gradient_allreduce");
  }
}

void LowPrecisionDecentralized::on_setup(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  self_ = flat_copy(params);
  left_ = self_.clone();
  right_ = self_.clone();
}

void LowPrecisionDecentralized::on_weights_restored(const std::vector<Tensor>& params) { on_setup(params); }

void LowPrecisionDecentralized::after_optimizer_step(collectives::Communicator& comm, const std::vector<Tensor>& params,
                                                     int64_t step) {
  if (step % interval_ != 0 || params.empty()) return;
  validate(comm.size());
  TANDEM_CHECK(self_.defined(), ValueError, "low_precision_decentralized: on_setup was not called before the first step");
  NoGradGuard no_grad;
  const int left = (comm.rank() + comm.size() - 1) % comm.size(), right = (comm.rank() + 1) % comm.size();
  // The optimizer's steps since the last exchange plus the move of the own replica towards the
  // neighbourhood's mean: x - self + (self + left + right) / 3 - self.
  const Tensor local_update = sub(flat_copy(params), self_);
  const Tensor to_mean = sub(add(self_, add(left_, right_)) / 3.0, self_);
  const Tensor packed = compress_min_max_uint8(add(local_update, to_mean), kDefaultCompressionBlock);
  Tensor from_left = Tensor::empty(packed.shape(), DType::UInt8, packed.device());
  Tensor from_right = Tensor::empty(packed.shape(), DType::UInt8, packed.device());
  using collectives::PeerTransfer;
  comm.exchange({{PeerTransfer::Kind::Recv, from_left, left, kToRightTag},
                 {PeerTransfer::Kind::Recv, from_right, right, kToLeftTag},
                 {PeerTransfer::Kind::Send, packed, right, kToRightTag},
                 {PeerTransfer::Kind::Send, packed, left, kToLeftTag}});
  add_decoded(self_, packed);
  add_decoded(left_, from_left);
  add_decoded(right_, from_right);
  // The weights become the replica both neighbours hold of them, bit for bit.
  int64_t offset = 0;
  for (const Tensor& p : params) {
    Tensor target = p;
    target.copy_(self_.narrow(0, offset, p.numel()).view(p.shape()));
    offset += p.numel();
  }
}

std::string LowPrecisionDecentralized::describe() const {
  return "low_precision_decentralized: 8-bit compressed weight differences to both ring neighbours every " +
         std::to_string(interval_) + " optimizer step(s); gradients stay local";
}

}  // namespace tandem::bagua
