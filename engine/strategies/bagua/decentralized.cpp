#include "base/error.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/point_to_point.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {

namespace {

constexpr int kWeightsTag = 7301;

}  // namespace

int shift_one_peer(int rank, int world_size, int64_t round) {
  const int seats = world_size % 2 == 0 ? world_size : world_size + 1;
  const int64_t cycle = seats - 1;
  const int64_t t = round % cycle;
  int64_t peer;
  if (rank == seats - 1) {
    peer = t;
  } else if (rank == t) {
    peer = seats - 1;
  } else {
    peer = ((2 * t - rank) % cycle + cycle) % cycle;
  }
  return peer >= world_size ? -1 : static_cast<int>(peer);
}

Decentralized::Decentralized(const InitParams& params) {
  const std::string mode = lower_case(params.at("peer_selection_mode"));
  if (mode != "all" && mode != "shift_one") {
    throw ConfigError("bagua decentralized: peer_selection_mode=" + params.at("peer_selection_mode") +
                      " is not known; choose all (average with every rank) or shift_one (one peer per exchange)");
  }
  shift_one_ = mode == "shift_one";
  interval_ = parse_int_option(params, "communication_interval", 1, "optimizer steps between weight exchanges");
}

void Decentralized::after_optimizer_step(collectives::Communicator& comm, const std::vector<Tensor>& params,
                                         int64_t step) {
  if (step % interval_ != 0 || params.empty()) return;
  NoGradGuard no_grad;
  const DType dtype = params.front().dtype();
  int64_t total = 0;
  for (const Tensor& p : params) {
    TANDEM_CHECK(p.dtype() == dtype, DTypeError, "bagua decentralized: parameters of one dtype expected, got " +
                                                     std::string(dtype_name(dtype)) + " and " + dtype_name(p.dtype()));
    total += p.numel();
  }
  Tensor flat = Tensor::empty({total}, dtype, params.front().device());
  int64_t offset = 0;
  for (const Tensor& p : params) {
    flat.narrow(0, offset, p.numel()).copy_(p.detach().contiguous().view({p.numel()}));
    offset += p.numel();
  }
  if (!shift_one_) {
    comm.allreduce(flat, collectives::ReduceOp::Avg);
  } else {
    const int peer = shift_one_peer(comm.rank(), comm.size(), step / interval_ - 1);
    if (peer < 0) return;
    Tensor theirs = Tensor::empty({total}, dtype, flat.device());
    exchange_with(comm, flat, theirs, peer, kWeightsTag);
    flat = add(flat, theirs) * 0.5;  // a + b == b + a: both peers get the same bits
  }
  offset = 0;
  for (const Tensor& p : params) {
    Tensor target = p;
    target.copy_(flat.narrow(0, offset, p.numel()).view(p.shape()));
    offset += p.numel();
  }
}

std::string Decentralized::describe() const {
  return std::string("decentralized: float weights averaged with ") + (shift_one_ ? "one peer (shift_one)" : "all ranks") +
         " every " + std::to_string(interval_) + " optimizer step(s); gradients stay local";
}

}  // namespace tandem::bagua
