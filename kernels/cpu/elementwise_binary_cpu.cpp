// Binary elementwise CPU kernels and where: out = a op b and out = cond ? a : b, the operands
// broadcast to out's shape through their strides, walked with cpu::for_each_row, whose rows are
// tight loops the compiler vectorizes.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/strided_cpu.h"

namespace tandem {

namespace {

template <typename T, typename Out, typename F>
void binary_loop(const TensorView& a, const TensorView& b, const TensorView& out, F f) {
  const T* ap = a.ptr<T>();
  const T* bp = b.ptr<T>();
  Out* op = out.ptr<Out>();
  cpu::for_each_row<3>(out.shape, {&a.strides, &b.strides, &out.strides},
                       [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                         const T* x = ap + off[0];
                         const T* y = bp + off[1];
                         Out* z = op + off[2];
                         if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                           for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
                         } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                           const T yv = *y;
                           for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
                         } else if (st[0] == 0 && st[1] == 1 && st[2] == 1) {
                           const T xv = *x;
                           for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
                         } else {
                           for (int64_t i = 0; i < n; ++i) z[i * st[2]] = f(x[i * st[0]], y[i * st[1]]);
                         }
                       });
}

template <typename T>
void binary_typed(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  switch (op) {
    case BinaryOp::Add: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
    case BinaryOp::Sub: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
    case BinaryOp::Mul: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) {
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return x / y; });
      } else {
        throw DTypeError("div on integer tensors is not supported; cast to a float type first");
      }
    case BinaryOp::Pow:
      return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(std::pow(double(x), double(y))); });
    case BinaryOp::Maximum: return binary_loop<T, T>(a, b, out, [](T x, T y) { return x > y || x != x ? x : y; });
    case BinaryOp::Minimum: return binary_loop<T, T>(a, b, out, [](T x, T y) { return x < y || x != x ? x : y; });
    case BinaryOp::Eq: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x == y); });
    case BinaryOp::Ne: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x != y); });
    case BinaryOp::Lt: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x < y); });
    case BinaryOp::Le: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x <= y); });
    case BinaryOp::Gt: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x > y); });
    case BinaryOp::Ge: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x >= y); });
  }
}

}  // namespace

void CpuBackend::binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  cpu::dispatch_all(a.dtype, "binary", [&](auto tag_) { using T = TANDEM_TYPE(tag_); binary_typed<T>(op, a, b, out); });
}

void CpuBackend::where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) {
  cpu::dispatch_all(a.dtype, "where", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const uint8_t* cp = cond.ptr<uint8_t>();
    const T* ap = a.ptr<T>();
    const T* bp = b.ptr<T>();
    T* op = out.ptr<T>();
    cpu::for_each_row<4>(out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides},
                         [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
                           for (int64_t i = 0; i < n; ++i)
                             op[off[3] + i * st[3]] = cp[off[0] + i * st[0]] ? ap[off[1] + i * st[1]]
                                                                            : bp[off[2] + i * st[2]];
                         });
  });
}

}  // namespace tandem
