// Generator: the (seed, offset) state of the Philox stream. Each draw reads its elements at
// the current offset and advances it by ceil(n/4) blocks. The global default generator is
// seeded by manual_seed (seed_everything in the trainer).
#pragma once
#include <cstdint>

namespace tandem {

struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in 4-element Philox blocks

  // Reserves n elements and returns the offset the draw starts at.
  uint64_t reserve(uint64_t n) {
    uint64_t start = offset;
    offset += (n + 3) / 4;
    return start;
  }
};

// The calling thread's default generator: the process-wide one, unless a ThreadGenerator is
// alive on this thread.
Generator& default_generator();
void manual_seed(uint64_t seed);  // resets the default generator to (seed, 0)

// For its lifetime, the calling thread draws from a generator of its own, starting at `start`
// (dp's device threads: each replica's dropout reads its own part of the stream, with no race
// on the shared offset).
class ThreadGenerator {
 public:
  explicit ThreadGenerator(Generator start);
  ~ThreadGenerator();
  ThreadGenerator(const ThreadGenerator&) = delete;
  ThreadGenerator& operator=(const ThreadGenerator&) = delete;

 private:
  Generator own_;
  Generator* previous_;
};

}  // namespace tandem
