// bytegrad's exchange: the mean of a tensor over a group of ranks with 8-bit compressed
// messages (min_max_uint8.h) both ways.
//
// The tensor is split into one chunk per group member (collectives::chunk_count's rule). Member
// i compresses every chunk but its own and sends chunk j to member j (scatter); it then owns
// chunk i: it decompresses the chunks the others sent, adds them to its own exact chunk in group
// order, divides by the group size, and compresses that mean. Every member sends its compressed
// mean to all others (allgather) and decompresses all of them, its own included, so every
// member ends with the same values. Per element the result is within
//   (1/G) * sum over the other members m of (range of m's block) / 510
//   + (range of the mean's block) / 510   (+ float32 rounding)
// of the exact mean, where a block's range is its max - min. On the wire each member sends about
// 2 x (G-1)/G x (n bytes + 8 bytes per block) instead of float32's 2 x (G-1)/G x 4n.
//
// Error feedback (optional; QAdam's momentum uses it, bytegrad does not): when the same tensor
// is averaged step after step, `residuals` keeps what each compression left out and adds it to
// the values before the next compression of the same elements: the chunks a member sends
// (worker side) and the mean of the chunk it owns (server side). Each compression then sends
// x + r and keeps r' = x + r - decoded, so over T calls the decoded values sum to the true
// values' sum minus the last residual: the error no longer adds up over calls but stays within
// one quantization step per compression. A non-finite residual is reset to zero.
#pragma once
#include <cstdint>
#include <vector>

#include "collectives/communicator.h"

namespace tandem::bagua {

// One tensor's compression residuals; empty until the first average that uses them.
struct CompressionResiduals {
  Tensor sent;   // [numel]: the chunks this member sends to the others (its own chunk's stay 0)
  Tensor owned;  // [its chunk]: the mean of the chunk it owns
};

void compressed_group_average(collectives::Communicator& comm, const Tensor& tensor, const std::vector<int>& group,
                              int64_t block, CompressionResiduals* residuals = nullptr);

// Compresses values + residual (float32, same size) and sets residual to what the codes leave out
// (zero where that is not finite). Returns the packed form on the values' device. The residuals
// live on the host, so for GPU values the feedback is applied there: one round trip of the
// tensor per compression, which only QAdam's momentum pays (bytegrad uses no feedback).
Tensor compress_with_feedback(const Tensor& values, const Tensor& residual, int64_t block);

}  // namespace tandem::bagua
