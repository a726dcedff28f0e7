// Reductions (sum, mean, amax, amin, max, min, argmax, argmin) and sum_to_shape.
// The reduced dims are brought next to each other (a permute + copy only when they are not
// already adjacent) so the kernel sees x as [outer, r, inner].
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {

struct ReducePlan {
  Tensor x;  // contiguous input laid out as [outer, r, inner]
  int64_t outer = 1, r = 1, inner = 1;
  Shape keep_shape;  // output shape with keepdim
  Shape out_shape;   // output shape as requested
};

ReducePlan plan_reduce(const Tensor& input, std::vector<int> dims, bool keepdim, const char* op) {
  const int nd = input.dim();
  if (dims.empty()) {  // all dims
    dims.resize(size_t(nd));
    std::iota(dims.begin(), dims.end(), 0);
  }
  std::vector<bool> reduced(size_t(std::max(nd, 1)), false);
  for (int d : dims) {
    int w = wrap_dim(d, nd, op);
    if (reduced[size_t(w)]) throw ShapeError(std::string(op) + ": dim " + std::to_string(w) + " given twice");
    reduced[size_t(w)] = true;
  }
  ReducePlan p;
  for (int d = 0; d < nd; ++d) {
    p.keep_shape.push_back(reduced[size_t(d)] ? 1 : input.shape()[size_t(d)]);
    if (!reduced[size_t(d)] || keepdim) p.out_shape.push_back(p.keep_shape.back());
  }
  int first = -1, last = -1;
  for (int d = 0; d < nd; ++d)
    if (reduced[size_t(d)]) { if (first < 0) first = d; last = d; }
  bool adjacent = true;
  for (int d = first; d >= 0 && d <= last; ++d) adjacent = adjacent && reduced[size_t(d)];
  Tensor x = input.detach();
  if (nd == 0) {
    p.x = x.contiguous();
    return p;
  }
  if (adjacent) {
    p.x = x.contiguous();
    for (int d = 0; d < nd; ++d) {
      int64_t s = input.shape()[size_t(d)];
      (d < first ? p.outer : d <= last ? p.r : p.inner) *= s;
    }
  } else {
    std::vector<int> perm;
    for (int d = 0; d < nd; ++d) if (!reduced[size_t(d)]) { perm.push_back(d); p.outer *= input.shape()[size_t(d)]; }
    for (int d = 0; d < nd; ++d) if (reduced[size_t(d)]) { perm.push_back(d); p.r *= input.shape()[size_t(d)]; }
    p.x = x.permute(perm).contiguous();
  }
  return p;
}

Tensor reduce_raw(ReduceOp op, const ReducePlan& p, const char* name) {
  if (p.r == 0 && (op == ReduceOp::Max || op == ReduceOp::Min))
    throw ShapeError(std::string(name) + ": cannot reduce over an empty dimension");
  Tensor out = Tensor::empty(p.out_shape, p.x.dtype(), p.x.device());
  if (p.r == 0) {
    out.fill_(op == ReduceOp::Mean ? std::nan("") : 0.0);
    return out;
  }
  backend_of(p.x).reduce(op, p.x.view_desc(), p.outer, p.r, p.inner, out.view_desc());
  return out;
}

Tensor sum_mean(ReduceOp op, const Tensor& input, const std::vector<int>& dims, bool keepdim) {
  const char* name = op == ReduceOp::Sum ? "sum" : "mean";
  Tensor x = input;
  if (x.dtype() == DType::Bool || x.dtype() == DType::UInt8 || x.dtype() == DType::Int32)
    x = cast(x, op == ReduceOp::Sum ? DType::Int64 : DType::Float32);
  if (op == ReduceOp::Mean) ops::check_float("mean", x);
  ReducePlan p = plan_reduce(x, dims, keepdim, name);
  Tensor out = reduce_raw(op, p, name);
  Shape in_shape = x.shape(), keep = p.keep_shape;
  const double scale = op == ReduceOp::Mean ? 1.0 / double(std::max<int64_t>(p.r, 1)) : 1.0;
  autograd::record(op == ReduceOp::Sum ? "Sum" : "Mean", out, {x}, [in_shape, keep, scale](const Tensor& g) {
    Tensor gx = g.reshape(keep).expand(in_shape);
    return std::vector<Tensor>{scale == 1.0 ? gx.contiguous() : gx * scale};
  });
  return out;
}

// amax/amin: the gradient is split evenly among the elements equal to the extremum.
Tensor extremum(ReduceOp op, const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  const char* name = op == ReduceOp::Max ? "amax" : "amin";
  ReducePlan p = plan_reduce(x, dims, keepdim, name);
  Tensor out = reduce_raw(op, p, name);
  if (!is_floating(x.dtype())) return out;
  Tensor xs = x.detach(), os = out.detach();
  Shape keep = p.keep_shape;
  autograd::record(name, out, {x}, [xs, os, keep](const Tensor& g) {
    Tensor hit = cast(eq(xs, os.reshape(keep)), g.dtype());
    Tensor count = sum_to_shape(hit, keep);
    return std::vector<Tensor>{hit * (g.reshape(keep) / count)};
  });
  return out;
}

Tensor arg_extremum(const Tensor& x, int dim, bool keepdim, bool is_min) {
  const char* name = is_min ? "argmin" : "argmax";
  ReducePlan p = plan_reduce(x, {dim}, keepdim, name);
  if (p.r == 0) throw ShapeError(std::string(name) + ": cannot reduce over an empty dimension");
  Tensor out = Tensor::empty(p.out_shape, DType::Int64, x.device());
  backend_of(x).argmax(p.x.view_desc(), p.outer, p.r, p.inner, out.view_desc(), is_min);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_mean(ReduceOp::Sum, x, {}, false); }
Tensor sum(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  return sum_mean(ReduceOp::Sum, x, dims, keepdim);
}
Tensor mean(const Tensor& x) { return sum_mean(ReduceOp::Mean, x, {}, false); }
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  return sum_mean(ReduceOp::Mean, x, dims, keepdim);
}
Tensor amax(const Tensor& x, const std::vector<int>& dims, bool keepdim) { return extremum(ReduceOp::Max, x, dims, keepdim); }
Tensor amin(const Tensor& x, const std::vector<int>& dims, bool keepdim) { return extremum(ReduceOp::Min, x, dims, keepdim); }
Tensor max(const Tensor& x) { return extremum(ReduceOp::Max, x, {}, false); }
Tensor min(const Tensor& x) { return extremum(ReduceOp::Min, x, {}, false); }
Tensor argmax(const Tensor& x, int dim, bool keepdim) { return arg_extremum(x, dim, keepdim, false); }
Tensor argmin(const Tensor& x, int dim, bool keepdim) { return arg_extremum(x, dim, keepdim, true); }

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.dim() - int(shape.size());
  if (lead < 0)
    throw ShapeError("sum_to_shape: gradient " + g.shape_str() + " has fewer dims than " + shape_to_string(shape));
  std::vector<int> dims;
  for (int d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[size_t(d - lead)] == 1 && g.shape()[size_t(d)] != 1)) dims.push_back(d);
  Tensor out = dims.empty() ? g : sum(g, dims, true);
  return out.reshape(shape);
}

}  // namespace tandem
