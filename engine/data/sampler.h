// Samplers: the order in which a DataLoader visits a dataset's examples in one epoch.
// An order is a pure function of (seed, epoch), so a resumed run, another rank, or a rerun sees
// exactly the same batches. The distributed sampler (one shard per rank) arrives with DDP and
// plugs in through DataLoader::set_sampler.
#pragma once
#include <cstdint>
#include <vector>

namespace tandem::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The example indices of one epoch, in visiting order; size() of them.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  virtual int64_t size() const = 0;
};

// 0, 1, ..., n-1 every epoch (validation, test, predict).
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A uniform permutation of 0..n-1, different for each epoch and the same for every rerun with
// the same seed (a Fisher-Yates shuffle driven by mt19937_64 seeded from (seed, epoch)).
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// Shuffles `values` in place as a pure function of (seed, stream); the one shuffle behind
// RandomSampler and random_split, identical on every platform (no std::uniform_int_distribution,
// whose algorithm differs between standard libraries).
void seeded_shuffle(std::vector<int64_t>& values, uint64_t seed, uint64_t stream);

}  // namespace tandem::data
