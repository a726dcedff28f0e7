#include "collectives/mpi/half_reduce_ops.h"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "base/error.h"

namespace tandem::collectives::mpi {

namespace {

struct HalfBits {
  static float load(uint16_t b) { return half_to_float(b); }
  static uint16_t store(float f) { return float_to_half(f); }
};
struct BFloat16Bits {
  static float load(uint16_t b) { return bf16_to_float(b); }
  static uint16_t store(float f) { return float_to_bf16(f); }
};

struct Add { static float apply(float a, float b) { return a + b; } };
struct Mul { static float apply(float a, float b) { return a * b; } };
struct Max { static float apply(float a, float b) { return std::max(a, b); } };
struct Min { static float apply(float a, float b) { return std::min(a, b); } };

// MPI's user-function signature: inout[i] = in[i] (op) inout[i].
template <typename Type, typename Op>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Type::store(Op::apply(Type::load(a[i]), Type::load(b[i])));
}

template <typename Type>
void create_ops(MPI_Op* ops) {  // sum, prod, max, min
  MPI_Op_create(&combine<Type, Add>, /*commute=*/1, &ops[0]);
  MPI_Op_create(&combine<Type, Mul>, 1, &ops[1]);
  MPI_Op_create(&combine<Type, Max>, 1, &ops[2]);
  MPI_Op_create(&combine<Type, Min>, 1, &ops[3]);
}

}  // namespace

MPI_Op half_reduce_op(DType dtype, ReduceOp op) {
  static std::once_flag once;
  static MPI_Op half_ops[4], bf16_ops[4];
  std::call_once(once, [] {
    create_ops<HalfBits>(half_ops);
    create_ops<BFloat16Bits>(bf16_ops);
  });
  if (dtype != DType::Float16 && dtype != DType::BFloat16) {
    throw DTypeError(std::string("half_reduce_op: ") + dtype_name(dtype) + " is not a 16-bit float type");
  }
  const MPI_Op* ops = dtype == DType::Float16 ? half_ops : bf16_ops;
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return ops[0];
    case ReduceOp::Product: return ops[1];
    case ReduceOp::Max: return ops[2];
    case ReduceOp::Min: return ops[3];
  }
  return ops[0];
}

}  // namespace tandem::collectives::mpi
