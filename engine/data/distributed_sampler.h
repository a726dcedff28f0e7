// DistributedSampler: one rank's shard of an epoch's order (PyTorch's DistributedSampler
// semantics), so W processes together visit the dataset once per epoch.
//
//   global order  = shuffle ? seeded_shuffle(0..n-1, seed, epoch) : 0..n-1   (as RandomSampler)
//   padded        = global order, extended by repeating its head until total = W * per_rank
//                   (drop_last: truncated to total instead)
//   rank r's shard = padded[r], padded[r + W], padded[r + 2W], ...        (per_rank of them)
//   per_rank      = ceil(n / W), or floor(n / W) with drop_last
//
// Why strided: batch k of every rank at batch size B holds padded[k*B*W .. (k+1)*B*W) in
// total, a contiguous window of the global order. DDP at W ranks with batch B therefore sees
// exactly the global batches a single process sees with batch B*W over `padded_order(epoch)`,
// which is what the equivalence tests check.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/data/sampler.h"

namespace tandem::data {

struct DistributedSamplerOptions {
  int num_replicas = 1;   // world size
  int rank = 0;           // this process, 0 <= rank < num_replicas
  bool shuffle = true;    // per-epoch seeded shuffle before sharding
  uint64_t seed = 0;      // the same on every rank
  bool drop_last = false; // drop the tail instead of padding with repeats
  // false: the shards are not padded (PyTorch Lightning's UnrepeatedDistributedSampler, used for
  // predict): rank r gets global[r], global[r + W], ..., so shards differ in size by at most one
  // and no example is seen twice. Ignored with drop_last.
  bool pad = true;
};

class DistributedSampler : public Sampler {
 public:
  // Throws ValueError for n < 0, num_replicas < 1 or rank outside [0, num_replicas).
  DistributedSampler(int64_t n, DistributedSamplerOptions options);

  std::vector<int64_t> indices(int64_t epoch) const override;  // this rank's shard
  int64_t size() const override { return per_rank_; }

  // The whole world's order for an epoch before striding: shard r is padded_order()[r::W].
  std::vector<int64_t> padded_order(int64_t epoch) const;
  int64_t dataset_size() const { return n_; }
  const DistributedSamplerOptions& options() const { return options_; }

 private:
  int64_t n_;
  DistributedSamplerOptions options_;
  int64_t per_rank_;
};

}  // namespace tandem::data
