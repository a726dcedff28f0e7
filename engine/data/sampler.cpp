#include "engine/data/sampler.h"

#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "base/error.h"

namespace tandem::data {
namespace {

// splitmix64's finalizer: nearby (seed, epoch) pairs give unrelated generator seeds.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) without modulo bias: Lemire's multiply-shift with rejection.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(rng()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(rng()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

void check_size(int64_t n, const char* who) {
  if (n < 0) throw ValueError(std::string(who) + ": size must be >= 0, got " + std::to_string(n));
}

}  // namespace

void seeded_shuffle(std::vector<int64_t>& values, uint64_t seed, uint64_t stream) {
  std::mt19937_64 rng(mix64(seed) ^ mix64(mix64(stream) + 0x5851f42d4c957f2dull));
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(uniform_below(rng, i));
    std::swap(values[i - 1], values[j]);
  }
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) { check_size(n, "SequentialSampler"); }

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  check_size(n, "RandomSampler");
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t{0});
  seeded_shuffle(order, seed_, static_cast<uint64_t>(epoch));
  return order;
}

}  // namespace tandem::data
