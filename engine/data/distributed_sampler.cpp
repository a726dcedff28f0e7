#include "engine/data/distributed_sampler.h"

#include <numeric>
#include <string>

#include "base/error.h"

namespace tandem::data {

DistributedSampler::DistributedSampler(int64_t n, DistributedSamplerOptions options) : n_(n), options_(options) {
  if (n < 0) throw ValueError("DistributedSampler: the dataset size must be >= 0, got " + std::to_string(n));
  if (options.num_replicas < 1) {
    throw ValueError("DistributedSampler: num_replicas must be >= 1 (the world size), got " +
                     std::to_string(options.num_replicas));
  }
  if (options.rank < 0 || options.rank >= options.num_replicas) {
    throw ValueError("DistributedSampler: rank " + std::to_string(options.rank) + " is outside [0, " +
                     std::to_string(options.num_replicas) + ")");
  }
  const int64_t w = options.num_replicas;
  if (options.drop_last) {
    per_rank_ = n / w;
  } else if (options.pad) {
    per_rank_ = (n + w - 1) / w;
  } else {
    per_rank_ = n / w + (options.rank < n % w ? 1 : 0);
  }
}

std::vector<int64_t> DistributedSampler::padded_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) seeded_shuffle(order, options_.seed, static_cast<uint64_t>(epoch));
  if (!options_.drop_last && !options_.pad) return order;
  const size_t total = static_cast<size_t>(per_rank_ * options_.num_replicas);
  if (total <= order.size()) {
    order.resize(total);
  } else {
    // Repeat the head (several times over when n < W) until every rank has per_rank examples.
    const size_t n = order.size();
    order.reserve(total);
    for (size_t i = n; i < total; ++i) order.push_back(order[(i - n) % n]);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  const std::vector<int64_t> order = padded_order(epoch);
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(per_rank_));
  for (size_t i = static_cast<size_t>(options_.rank); i < order.size(); i += static_cast<size_t>(options_.num_replicas)) {
    shard.push_back(order[i]);
  }
  return shard;
}

}  // namespace tandem::data
