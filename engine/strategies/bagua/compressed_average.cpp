#include "engine/strategies/bagua/compressed_average.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {

namespace {

constexpr int kScatterTag = 7201, kGatherTag = 7202;

}  // namespace

Tensor compress_with_feedback(const Tensor& values, const Tensor& residual, int64_t block) {
  TANDEM_CHECK(values.dtype() == DType::Float32 && residual.dtype() == DType::Float32 &&
                   values.numel() == residual.numel() && residual.device().is_cpu() && residual.is_contiguous(),
               ValueError, "compress_with_feedback: values and residual must be float32 of the same size, the "
                           "residual contiguous on the host");
  NoGradGuard no_grad;
  const int64_t n = values.numel();
  const Tensor x = values.to(Device::cpu()).contiguous();
  const float* value = static_cast<const float*>(x.raw_data());
  float* left_out = static_cast<float*>(residual.raw_data());
  for (int64_t i = 0; i < n; ++i) left_out[i] += value[i];
  Tensor packed = Tensor::empty({compressed_bytes(n, block)}, DType::UInt8);
  compress_min_max_uint8(left_out, n, block, static_cast<uint8_t*>(packed.raw_data()));
  std::vector<float> decoded(static_cast<size_t>(n));
  decompress_min_max_uint8(static_cast<const uint8_t*>(packed.raw_data()), n, block, decoded.data());
  for (int64_t i = 0; i < n; ++i) {
    const float r = left_out[i] - decoded[static_cast<size_t>(i)];
    left_out[i] = std::isfinite(r) ? r : 0.0f;
  }
  return packed.to(values.device());  // the codes travel from where the values live
}

void compressed_group_average(collectives::Communicator& comm, const Tensor& tensor, const std::vector<int>& group,
                              int64_t block, CompressionResiduals* residuals) {
  const int members = static_cast<int>(group.size());
  if (members <= 1) return;
  const auto found = std::find(group.begin(), group.end(), comm.rank());
  TANDEM_CHECK(found != group.end(), ValueError, "bytegrad: rank " + std::to_string(comm.rank()) + " is not in its group");
  const int me = static_cast<int>(found - group.begin());
  NoGradGuard no_grad;
  // The arithmetic runs in float32 on the tensor's device (a GPU compresses there, and only the
  // codes travel); the result goes back into `tensor` at the end.
  const Tensor values = tensor.detach().to(DType::Float32).contiguous().flatten();
  const Device device = values.device();
  const int64_t n = values.numel();
  auto chunk = [&](const Tensor& t, int j) {
    return t.narrow(0, collectives::chunk_offset(n, members, j), collectives::chunk_count(n, members, j));
  };
  const int64_t mine = collectives::chunk_count(n, members, me);
  if (residuals != nullptr && !residuals->sent.defined()) {
    residuals->sent = Tensor::zeros({n}, DType::Float32);
    residuals->owned = Tensor::zeros({mine}, DType::Float32);
  }
  TANDEM_CHECK(residuals == nullptr || (residuals->sent.numel() == n && residuals->owned.numel() == mine), ValueError,
               "compressed_group_average: the residuals belong to a tensor of " +
                   std::to_string(residuals == nullptr ? 0 : residuals->sent.numel()) + " elements, not " +
                   std::to_string(n));
  auto compress = [&](const Tensor& part, const Tensor& residual) {
    return residuals != nullptr ? compress_with_feedback(part, residual, block) : compress_min_max_uint8(part, block);
  };

  // Scatter: chunk j to member j; the others' compressed versions of my chunk arrive. One
  // exchange, so the sends and receives progress together (NCCL groups them).
  using collectives::PeerTransfer;
  std::vector<PeerTransfer> scatter;
  std::vector<Tensor> received(static_cast<size_t>(members));
  std::vector<Tensor> outgoing(static_cast<size_t>(members));
  for (int j = 0; j < members; ++j) {
    if (j == me || mine == 0) continue;
    received[j] = Tensor::empty({compressed_bytes(mine, block)}, DType::UInt8, device);
    scatter.push_back({PeerTransfer::Kind::Recv, received[j], group[j], kScatterTag});
  }
  for (int j = 0; j < members; ++j) {
    if (j == me || collectives::chunk_count(n, members, j) == 0) continue;
    outgoing[j] = compress(chunk(values, j), residuals != nullptr ? chunk(residuals->sent, j) : Tensor());
    scatter.push_back({PeerTransfer::Kind::Send, outgoing[j], group[j], kScatterTag});
  }
  comm.exchange(scatter);

  // Reduce my chunk: my exact values plus the others' decompressed ones, in group order.
  Tensor mean_packed;
  if (mine > 0) {
    Tensor sum = chunk(values, me).clone();
    Tensor decoded = Tensor::empty({mine}, DType::Float32, device);
    for (int j = 0; j < members; ++j) {
      if (j == me) continue;
      decompress_min_max_uint8(received[j], decoded, block);
      sum = add(sum, decoded);
    }
    mean_packed = compress(sum / double(members), residuals != nullptr ? residuals->owned : Tensor());
  }

  // Allgather the compressed means; everyone (me included) decodes every chunk.
  std::vector<PeerTransfer> gather;
  std::vector<Tensor> gathered(static_cast<size_t>(members));
  for (int j = 0; j < members; ++j) {
    const int64_t count = collectives::chunk_count(n, members, j);
    if (j == me || count == 0) continue;
    gathered[j] = Tensor::empty({compressed_bytes(count, block)}, DType::UInt8, device);
    gather.push_back({PeerTransfer::Kind::Recv, gathered[j], group[j], kGatherTag});
  }
  if (mine > 0) {
    for (int j = 0; j < members; ++j) {
      if (j != me) gather.push_back({PeerTransfer::Kind::Send, mean_packed, group[j], kGatherTag});
    }
  }
  comm.exchange(gather);
  gathered[me] = mean_packed;
  Tensor result = Tensor::empty({n}, DType::Float32, device);
  for (int j = 0; j < members; ++j) {
    if (collectives::chunk_count(n, members, j) > 0) decompress_min_max_uint8(gathered[j], chunk(result, j), block);
  }
  Tensor target = tensor;
  target.copy_(result.view(tensor.shape()));
}

}  // namespace tandem::bagua
