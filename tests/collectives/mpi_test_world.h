// Shared by the MPI tests: the world communicator main() created, and the values each rank
// contributes, chosen so every expected result is exact in every dtype (small integers).
#pragma once
#include <memory>
#include <vector>

#include "collectives/communicator.h"

namespace tandem::collectives::mpitest {

extern std::shared_ptr<Communicator> g_world;

// Rank r's element i: small integers; products use 1..3 so 4 ranks stay below uint8's 255.
inline double contribution(int rank, int64_t i, ReduceOp op, bool is_unsigned) {
  if (op == ReduceOp::Product) return double(1 + (i + rank) % 3);
  double v = double((i * 7 + rank * 3) % 11);
  return is_unsigned ? v : v - 5;
}

inline Tensor contribution_tensor(int rank, int64_t n, DType dt, ReduceOp op) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = contribution(rank, i, op, dt == DType::UInt8);
  return Tensor::from_vector(v, {n}).to(dt);
}

// The reduction over ranks 0..size-1 of element i, with the backend's avg rule.
inline double expected_reduction(int size, int64_t i, ReduceOp op, DType dt) {
  const bool is_unsigned = dt == DType::UInt8;
  double acc = contribution(0, i, op, is_unsigned);
  for (int r = 1; r < size; ++r) {
    double v = contribution(r, i, op, is_unsigned);
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Product: acc *= v; break;
    }
  }
  if (op == ReduceOp::Avg) {
    acc /= size;
    if (!is_floating(dt)) acc = double(int64_t(acc));  // integer avg truncates toward zero
  }
  return acc;
}

}  // namespace tandem::collectives::mpitest
