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

Generator& default_generator();
void manual_seed(uint64_t seed);  // resets the default generator to (seed, 0)

}  // namespace tandem
