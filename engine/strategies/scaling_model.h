// The scaling model: a data-parallel step's time at W ranks, predicted from what one rank
// measures (forward, backward and optimizer time; the gradient buckets in launch order) and an
// alpha-beta model of the links (Hockney: a message of n bytes over a link costs
// alpha + n / bandwidth). docs/SCALING.md derives each formula, checks the model against measured
// steps over rate-limited links, and extrapolates to 8-1,024 GPUs; `tandem plan --predict` prints
// it for a configuration.
//
// Collectives (p ranks in `nodes` nodes of p / nodes ranks; n bytes per rank):
//   ring allreduce         2 (p - 1) steps of n / p bytes: 2 (p - 1) alpha + 2 (p - 1) / p * n / B
//   tree allreduce         NCCL's double binary tree between nodes and a chain inside one:
//                          2 (ceil(log2 nodes) alpha_inter + (p / nodes - 1) alpha_intra) + 2 n / B
//   reduce-scatter and all-gather (ZeRO-1)   half of a ring allreduce each
//   neighbour exchange (bagua decentralized)  send and receive n to and from one peer: alpha + n / B
//                          (off-node peers share the node's NICs: B = inter / ranks_per_node)
// where B is the bus bandwidth nccl-tests reports (busbw: the per-rank rate a ring sustains) of
// the slowest link a step crosses: the intra-node link with one node, else the smaller of it
// and the node's inter-node bandwidth (all its NICs). An allreduce takes the cheaper of ring
// and tree, as NCCL's tuner does. Compressed algorithms (bagua's bytegrad, qadam and
// low-precision decentralized: one byte per value) move a quarter of the bytes.
//
// Overlap (the Reducer): bucket k becomes ready when backward has produced its gradients,
// modelled as backward producing gradient bytes at a constant rate in bucket order; buckets go
// out one at a time in bucket order on one communication stream. Exposed communication is what
// the last bucket's finish passes the end of backward; ZeRO-1's all-gather of the updated
// parameters after the optimizer is exposed whole, as is the decentralized algorithms' weight
// exchange after the step (one peer: bagua's shift_one); ZeRO-1 steps 1 / p of the optimizer;
// asynchronous averaging (bagua's async) is off the step's critical path. Compression and
// decompression compute is not modelled.
//
// Host CPU per byte (Cluster::host_s_per_byte, gamma): where a transfer runs on the cores that
// compute (TCP through the kernel's stack, shared-memory copies), every byte a rank sends costs
// those cores gamma seconds, which overlapping hides the wait for but not the work. The buckets
// averaged during backward send 2 (p - 1) / p of their bytes each (the ring's volume; a
// reduce-scatter half of it), and their CPU time lengthens backward (the buckets' ready times
// stretch with it). Exchanges after the optimizer are exposed whole, their CPU time inside their
// wait. 0 (the default) for links whose copies run on DMA engines (NVLink, InfiniBand RDMA).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::scaling {

// One link class: latency per message step (seconds) and bus bandwidth (bytes per second).
struct Link {
  double alpha_s = 0.0;
  double bytes_per_s = 0.0;
};

// Where the ranks run: nodes x ranks_per_node, the links inside a node and between nodes.
struct Cluster {
  int nodes = 1;
  int ranks_per_node = 1;
  Link intra;
  Link inter;  // per node, all NICs together; unused with one node
  double host_s_per_byte = 0.0;  // CPU seconds of the computing cores per byte a rank sends
  int ranks() const { return nodes * ranks_per_node; }
};

// How the gradients are averaged (the strategies' and bagua's algorithms, as the model sees them).
enum class Averaging {
  Allreduce,                 // ddp, ddp2, horovod, bagua gradient_allreduce
  ShardedOptimizer,          // ddp_sharded (ZeRO-1): reduce-scatter in backward, all-gather after
  CompressedAllreduce,       // bagua bytegrad, qadam (a byte per value)
  Decentralized,             // bagua decentralized: weights with one peer
  LowPrecisionDecentralized, // bagua low_precision_decentralized
  Asynchronous,              // bagua async: off the critical path
};

// Parses "allreduce", "sharded", "bytegrad", "decentralized", "low_precision_decentralized",
// "async"; throws ConfigError naming the allowed values otherwise.
Averaging averaging_from_name(const std::string& name);
std::string averaging_name(Averaging a);

// What one rank measures about its step.
struct StepProfile {
  double forward_s = 0.0;
  double backward_s = 0.0;
  double optimizer_s = 0.0;
  std::vector<int64_t> bucket_bytes;  // in launch order (the Reducer's buckets)
};

struct StepPrediction {
  double compute_s = 0.0;        // forward + backward + optimizer + host_s
  double host_s = 0.0;           // the transfers' CPU time on the computing cores (host_s_per_byte)
  double communication_s = 0.0;  // all collectives back to back
  double exposed_s = 0.0;        // what the step waits for beyond compute
  double step_s = 0.0;           // compute + exposed
  double efficiency = 1.0;       // one rank's step / this step (same per-rank batch)
  std::vector<double> bucket_done_s;  // each bucket's finish, from the start of the step
};

// Seconds of one collective over `cluster` (0 with one rank).
double ring_allreduce_s(int64_t bytes, const Cluster& cluster);
double tree_allreduce_s(int64_t bytes, const Cluster& cluster);
double allreduce_s(int64_t bytes, const Cluster& cluster);  // the cheaper of the two
double reduce_scatter_s(int64_t bytes, const Cluster& cluster);
double all_gather_s(int64_t bytes, const Cluster& cluster);
double neighbour_exchange_s(int64_t bytes, const Cluster& cluster);

// The step at cluster.ranks() ranks. efficiency compares with the same profile at one rank.
StepPrediction predict_step(const StepProfile& profile, const Cluster& cluster, Averaging averaging);

}  // namespace tandem::scaling
