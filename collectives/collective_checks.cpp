#include "collectives/collective_checks.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"

namespace tandem::collectives {

std::string describe(const char* name, const std::string& detail, DType dtype, int64_t numel) {
  std::string s = std::string(name) + "(";
  if (!detail.empty()) s += detail + ", ";
  s += std::string(dtype_name(dtype)) + ", " + std::to_string(numel) + " elements = " +
       std::to_string(numel * int64_t(dtype_size(dtype))) + " bytes)";
  return s;
}

void check_buffer(const char* name, const char* role, const Tensor& t) {
  if (!t.defined()) throw ValueError(std::string(name) + ": the " + role + " tensor is undefined");
  if (!t.is_contiguous())
    throw ValueError(std::string(name) + ": the " + role + " tensor " + t.shape_str() +
                     " is not contiguous; collectives move flat buffers, pass t.contiguous() "
                     "(and copy the result back) instead");
}

void check_same_dtype(const char* name, const Tensor& input, const Tensor& output) {
  if (input.dtype() != output.dtype())
    throw DTypeError(std::string(name) + ": input is " + dtype_name(input.dtype()) + " but output is " +
                     dtype_name(output.dtype()) + "; both must have the same dtype");
}

void check_numel(const char* name, const char* role, const Tensor& t, int64_t expected,
                 const std::string& why) {
  if (t.numel() != expected)
    throw ShapeError(std::string(name) + ": the " + role + " tensor has " + std::to_string(t.numel()) +
                     " elements, expected " + std::to_string(expected) + " (" + why + ")");
}

void check_reducible(const char* name, DType dtype) {
  if (dtype == DType::Bool)
    throw DTypeError(std::string(name) + ": bool tensors cannot be reduced; cast to uint8 (max = any, "
                     "min = all) or int32 (sum = count)");
}

void check_rank(const char* name, const char* role, int rank, int size) {
  if (rank < 0 || rank >= size)
    throw ValueError(std::string(name) + ": " + role + " rank " + std::to_string(rank) +
                     " is outside the communicator's ranks 0.." + std::to_string(size - 1));
}

namespace {

template <typename T>
void divide_typed(T* p, int64_t count, int64_t n) {
  for (int64_t i = 0; i < count; ++i) p[i] = T(p[i] / T(n));
}

template <typename T>
void reduce_typed(T* a, const T* b, int64_t count, ReduceOp op) {
  for (int64_t i = 0; i < count; ++i) {
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: a[i] = T(a[i] + b[i]); break;
      case ReduceOp::Max: a[i] = std::max(a[i], b[i]); break;
      case ReduceOp::Min: a[i] = std::min(a[i], b[i]); break;
      case ReduceOp::Product: a[i] = T(a[i] * b[i]); break;
    }
  }
}

template <template <typename> class F, typename... Args>
void dispatch(DType dtype, const char* what, Args&&... args) {
  switch (dtype) {
    case DType::Float32: return F<float>::run(args...);
    case DType::Float64: return F<double>::run(args...);
    case DType::Int32: return F<int32_t>::run(args...);
    case DType::Int64: return F<int64_t>::run(args...);
    case DType::UInt8: return F<uint8_t>::run(args...);
    default: throw DTypeError(std::string(what) + ": no host arithmetic for " + dtype_name(dtype));
  }
}

template <typename T> struct Divide {
  static void run(const Tensor& t, int64_t n) { divide_typed(static_cast<T*>(t.raw_data()), t.numel(), n); }
};
template <typename T> struct Reduce {
  static void run(const Tensor& a, const Tensor& b, ReduceOp op) {
    reduce_typed(static_cast<T*>(a.raw_data()), static_cast<const T*>(b.raw_data()), a.numel(), op);
  }
};

}  // namespace

void divide_in_place(const Tensor& host, int64_t n) {
  if (n == 1) return;
  if (host.dtype() == DType::Float16 || host.dtype() == DType::BFloat16) {
    // Divided in float and rounded once, as a GPU averages these types.
    auto* p = static_cast<uint16_t*>(host.raw_data());
    const bool half = host.dtype() == DType::Float16;
    for (int64_t i = 0; i < host.numel(); ++i) {
      const float v = (half ? half_to_float(p[i]) : bf16_to_float(p[i])) / float(n);
      p[i] = half ? float_to_half(v) : float_to_bf16(v);
    }
    return;
  }
  dispatch<Divide>(host.dtype(), "avg", host, n);
}

void reduce_into(const Tensor& a, const Tensor& b, ReduceOp op) {
  dispatch<Reduce>(a.dtype(), reduce_op_name(op), a, b, op);
}

std::string describe_exchange(const std::vector<PeerTransfer>& transfers) {
  int sends = 0;
  for (const PeerTransfer& t : transfers) sends += t.kind == PeerTransfer::Kind::Send;
  return "exchange(" + std::to_string(sends) + " send(s), " + std::to_string(int(transfers.size()) - sends) +
         " receive(s))";
}

}  // namespace tandem::collectives
