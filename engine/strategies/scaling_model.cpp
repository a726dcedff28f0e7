#include "engine/strategies/scaling_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace tandem::scaling {

namespace {

struct AveragingName {
  Averaging averaging;
  const char* name;
};
constexpr AveragingName kAveragingNames[] = {
    {Averaging::Allreduce, "allreduce"},
    {Averaging::ShardedOptimizer, "sharded"},
    {Averaging::CompressedAllreduce, "bytegrad"},
    {Averaging::Decentralized, "decentralized"},
    {Averaging::LowPrecisionDecentralized, "low_precision_decentralized"},
    {Averaging::Asynchronous, "async"},
};

// The link a ring step crosses: the intra-node link with one node, else the slower of it and
// the node's inter-node bandwidth, at the inter-node latency.
Link ring_link(const Cluster& c) {
  if (c.nodes <= 1) return c.intra;
  return {std::max(c.intra.alpha_s, c.inter.alpha_s), std::min(c.intra.bytes_per_s, c.inter.bytes_per_s)};
}

double transfer_s(double bytes, double bytes_per_s) {
  TANDEM_CHECK(bytes_per_s > 0, ConfigError, "scaling model: a link bandwidth must be > 0 bytes/s");
  return bytes / bytes_per_s;
}

// A quarter of the bytes for the one-byte-per-value algorithms (float32 gradients).
int64_t compressed(int64_t bytes) { return (bytes + 3) / 4; }

}  // namespace

Averaging averaging_from_name(const std::string& name) {
  std::string allowed;
  for (const auto& a : kAveragingNames) {
    if (name == a.name) return a.averaging;
    allowed += allowed.empty() ? a.name : std::string(", ") + a.name;
  }
  throw ConfigError("scaling model: averaging '" + name + "' is not known; choose one of " + allowed);
}

std::string averaging_name(Averaging averaging) {
  for (const auto& a : kAveragingNames)
    if (a.averaging == averaging) return a.name;
  return "?";
}

double ring_allreduce_s(int64_t bytes, const Cluster& c) {
  const int p = c.ranks();
  if (p <= 1 || bytes <= 0) return 0.0;
  const Link link = ring_link(c);
  return 2.0 * (p - 1) * link.alpha_s + transfer_s(2.0 * (p - 1) / p * double(bytes), link.bytes_per_s);
}

double tree_allreduce_s(int64_t bytes, const Cluster& c) {
  const int p = c.ranks();
  if (p <= 1 || bytes <= 0) return 0.0;
  const double levels = c.nodes > 1 ? std::ceil(std::log2(double(c.nodes))) : 0.0;
  const double latency = 2.0 * (levels * c.inter.alpha_s + (c.ranks_per_node - 1) * c.intra.alpha_s);
  return latency + transfer_s(2.0 * double(bytes), ring_link(c).bytes_per_s);
}

double allreduce_s(int64_t bytes, const Cluster& c) {
  return std::min(ring_allreduce_s(bytes, c), tree_allreduce_s(bytes, c));
}

double reduce_scatter_s(int64_t bytes, const Cluster& c) { return ring_allreduce_s(bytes, c) / 2.0; }

double all_gather_s(int64_t bytes, const Cluster& c) { return ring_allreduce_s(bytes, c) / 2.0; }

double neighbour_exchange_s(int64_t bytes, const Cluster& c) {
  if (c.ranks() <= 1 || bytes <= 0) return 0.0;
  // Off-node peers: every rank of a node sends through the node's NICs at once.
  const Link link = c.nodes > 1 ? Link{c.inter.alpha_s, std::min(c.intra.bytes_per_s, c.inter.bytes_per_s / c.ranks_per_node)}
                                : c.intra;
  return link.alpha_s + transfer_s(double(bytes), link.bytes_per_s);
}

StepPrediction predict_step(const StepProfile& profile, const Cluster& c, Averaging averaging) {
  TANDEM_CHECK(c.nodes >= 1 && c.ranks_per_node >= 1, ConfigError,
               "scaling model: nodes and ranks per node must be >= 1");
  TANDEM_CHECK(profile.forward_s >= 0 && profile.backward_s >= 0 && profile.optimizer_s >= 0, ConfigError,
               "scaling model: step times must be >= 0 seconds");
  TANDEM_CHECK(c.host_s_per_byte >= 0, ConfigError, "scaling model: host CPU seconds per byte must be >= 0");
  const int p = c.ranks();
  const int64_t total = std::accumulate(profile.bucket_bytes.begin(), profile.bucket_bytes.end(), int64_t{0});
  StepPrediction out;
  const double optimizer = averaging == Averaging::ShardedOptimizer ? profile.optimizer_s / p : profile.optimizer_s;
  // CPU time of the transfers overlapped with backward: gamma times the bytes a rank sends then
  // (the ring's volume of an allreduce; a reduce-scatter is half of it). Exchanges after the
  // optimizer are exposed whole, their CPU time inside their wait.
  const double ring_volume = p > 1 ? 2.0 * (p - 1) / p : 0.0;
  double sent_in_backward = 0.0;
  switch (averaging) {
    case Averaging::Allreduce:
    case Averaging::Asynchronous: sent_in_backward = ring_volume * double(total); break;  // async: same cores
    case Averaging::ShardedOptimizer: sent_in_backward = ring_volume * double(total) / 2.0; break;
    case Averaging::CompressedAllreduce: sent_in_backward = ring_volume * double(compressed(total)); break;
    default: break;
  }
  out.host_s = c.host_s_per_byte * sent_in_backward;
  const double backward = profile.backward_s + out.host_s;
  out.compute_s = profile.forward_s + backward + optimizer;
  const double backward_end = profile.forward_s + backward;

  // Buckets averaged during backward, one at a time, in bucket order.
  auto bucket_cost = [&](int64_t bytes) {
    switch (averaging) {
      case Averaging::Allreduce: return allreduce_s(bytes, c);
      case Averaging::ShardedOptimizer: return reduce_scatter_s(bytes, c);
      case Averaging::CompressedAllreduce: return allreduce_s(compressed(bytes), c);
      default: return 0.0;  // the others average weights after the optimizer step
    }
  };
  int64_t produced = 0;
  double done = 0.0;
  for (int64_t bytes : profile.bucket_bytes) {
    produced += bytes;
    const double ready = profile.forward_s + (total > 0 ? backward * double(produced) / double(total) : 0.0);
    const double cost = bucket_cost(bytes);
    done = std::max(ready, done) + cost;
    out.communication_s += cost;
    out.bucket_done_s.push_back(done);
  }
  out.exposed_s = profile.bucket_bytes.empty() ? 0.0 : std::max(0.0, done - backward_end);

  // After the optimizer step: parameters gathered (ZeRO-1) or weights exchanged (decentralized).
  double after_step = 0.0;
  switch (averaging) {
    case Averaging::ShardedOptimizer: after_step = all_gather_s(total, c); break;
    case Averaging::Decentralized: after_step = neighbour_exchange_s(total, c); break;
    case Averaging::LowPrecisionDecentralized: after_step = neighbour_exchange_s(compressed(total), c); break;
    case Averaging::Asynchronous:
      out.communication_s = allreduce_s(total, c);  // in the background, off the critical path
      break;
    default: break;
  }
  out.communication_s += after_step;
  out.exposed_s += after_step;
  out.step_s = out.compute_s + out.exposed_s;
  const double one_rank = profile.forward_s + profile.backward_s + profile.optimizer_s;
  out.efficiency = out.step_s > 0 ? one_rank / out.step_s : 1.0;
  return out;
}

}  // namespace tandem::scaling
