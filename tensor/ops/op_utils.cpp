#include "tensor/ops/op_utils.h"
#include "tensor/ops/host_checks.h"

#include <numeric>

namespace tandem::ops {

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device())
    throw DeviceError(std::string(op) + ": operands are on different devices (" + a.device().str() + " and " +
                      b.device().str() + "); move them to one device with .to(device)");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw DTypeError(std::string(op) + ": operands have different dtypes (" + dtype_name(a.dtype()) + " and " +
                     dtype_name(b.dtype()) + "); convert one with .to(dtype) or .type_as(other)");
}

void check_companion(const char* op, const Tensor& x, const Tensor& companion, const char* what) {
  if (!companion.defined()) return;
  if (companion.device() != x.device())
    throw DeviceError(std::string(op) + ": " + what + " is on " + companion.device().str() + " but the input is on " +
                      x.device().str() + "; move them to one device with .to(device)");
  if (companion.dtype() != x.dtype())
    throw DTypeError(std::string(op) + ": " + what + " is " + dtype_name(companion.dtype()) + " but the input is " +
                     dtype_name(x.dtype()) + "; convert one with .to(dtype) or .type_as(other)");
}

void check_float(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw DTypeError(std::string(op) + " needs a floating point tensor, got " + dtype_name(x.dtype()));
}

void check_index_dtype(const char* op, const Tensor& t) {
  if (t.dtype() != DType::Int64)
    throw DTypeError(std::string(op) + " needs int64 indices, got " + dtype_name(t.dtype()));
}

void check_dim(const char* op, const Tensor& x, int expected, const char* layout) {
  if (x.dim() != expected)
    throw ShapeError(std::string(op) + " expects a " + std::to_string(expected) + "-d input " + layout +
                     ", got shape " + x.shape_str());
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                       " cannot be broadcast (dim " + std::to_string(i) + ": " + std::to_string(da) + " vs " +
                       std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor move_dim_last(const Tensor& x, int dim) {
  dim = wrap_dim(dim, x.dim(), "move_dim_last");
  if (dim == x.dim() - 1 || x.dim() == 0) return x.contiguous();
  return x.transpose(dim, -1).contiguous();
}

Tensor move_last_to_dim(const Tensor& x, int dim) {
  dim = wrap_dim(dim, x.dim(), "move_last_to_dim");
  if (dim == x.dim() - 1 || x.dim() == 0) return x;
  return x.transpose(dim, -1);
}

}  // namespace tandem::ops

namespace tandem::ops {

namespace {
thread_local bool t_host_checks_deferred = false;
}  // namespace

DeferHostChecks::DeferHostChecks() : previous_(t_host_checks_deferred) { t_host_checks_deferred = true; }
DeferHostChecks::~DeferHostChecks() { t_host_checks_deferred = previous_; }
bool host_checks_deferred() { return t_host_checks_deferred; }

}  // namespace tandem::ops
