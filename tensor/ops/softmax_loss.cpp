// softmax / log_softmax over any dim, and the losses built on them: nll_loss, cross_entropy
// (log_softmax + nll with label smoothing), mse_loss.
#include "tensor/ops/autocast.h"
#include "tensor/ops/host_checks.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

Reduction parse_reduction(const std::string& s) {
  if (s == "mean") return Reduction::Mean;
  if (s == "sum") return Reduction::Sum;
  if (s == "none") return Reduction::None;
  throw ValueError("reduction must be 'mean', 'sum' or 'none', got '" + s + "'");
}

namespace {

Tensor softmax_impl(const Tensor& x, int dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  ops::check_float(name, x);
  if (x.dim() == 0) return softmax_impl(x.reshape({1}), 0, log).reshape({});
  dim = wrap_dim(dim, x.dim(), name);
  Tensor xl = ops::move_dim_last(x.detach(), dim);
  const int64_t cols = xl.size(-1), rows = cols ? xl.numel() / cols : 0;
  Tensor yl = Tensor::empty(xl.shape(), x.dtype(), x.device());
  if (rows) backend_of(x).softmax(xl.view_desc(), rows, cols, yl.view_desc(), log);
  Tensor y = ops::move_last_to_dim(yl, dim).contiguous();
  // Saved in the last-dim layout through a handle of its own: for the last dim y is yl itself,
  // and a closure holding y's TensorImpl would own its own node.
  Tensor ys = yl.detach();
  autograd::record(log ? "LogSoftmax" : "Softmax", y, {x}, [ys, dim, log, rows, cols](const Tensor& g) {
    Tensor gl = ops::move_dim_last(g, dim);
    Tensor gx = Tensor::empty(gl.shape(), gl.dtype(), gl.device());
    if (rows) backend_of(gl).softmax_backward(ys.view_desc(), gl.view_desc(), rows, cols, gx.view_desc(), log);
    return std::vector<Tensor>{ops::move_last_to_dim(gx, dim).contiguous()};
  });
  return y;
}

// Per-row NLL over logp [rows, C] with int64 targets [rows], then the reduction.
// mean divides by the number of rows whose target is not ignore_index.
Tensor nll_impl(const Tensor& logp, const Tensor& target, Reduction reduction, int64_t ignore_index,
                double label_smoothing, const Shape& none_shape) {
  const int64_t rows = logp.size(0), classes = logp.size(1);
  Tensor lp = ops::raw(logp), tg = ops::raw(target);
  // Validate targets on the host: a bad class index must be an error, not a wild read. Inside a
  // CUDA graph step the check is deferred (host_checks.h): the kernels write NaN for such a row.
  if (tg.device().is_cpu() || !ops::host_checks_deferred()) {
    auto t = tg.to_vector<int64_t>();
    for (int64_t v : t)
      if (v != ignore_index && (v < 0 || v >= classes))
        throw ValueError("target " + std::to_string(v) + " is out of bounds for " + std::to_string(classes) +
                         " classes (allowed 0.." + std::to_string(classes - 1) + " or ignore_index " +
                         std::to_string(ignore_index) + ")");
  }
  Tensor loss = Tensor::empty({rows}, logp.dtype(), logp.device());
  Tensor valid = Tensor::empty({rows}, logp.dtype(), logp.device());
  if (rows) backend_of(lp).nll_rows(lp.view_desc(), tg.view_desc(), ignore_index, label_smoothing, loss.view_desc(),
                                    valid.view_desc());
  // The per-row losses are differentiable w.r.t. logp through this node.
  autograd::record("NllRows", loss, {logp}, [tg, ignore_index, label_smoothing, rows, classes](const Tensor& g) {
    Tensor gc = ops::raw(g);
    Tensor glogp = Tensor::empty({rows, classes}, g.dtype(), g.device());
    if (rows) backend_of(gc).nll_rows_backward(gc.view_desc(), tg.view_desc(), ignore_index, label_smoothing,
                                               glogp.view_desc());
    return std::vector<Tensor>{glogp};
  });
  switch (reduction) {
    case Reduction::None: return loss.reshape(none_shape);
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return sum(loss) / sum(valid);
  }
  return loss;
}

// Flattens [N, C, d1, ...] with targets [N, d1, ...] to [N*d1*..., C] and [N*d1*...].
void flatten_class_dim(const char* op, const Tensor& input, const Tensor& target, Tensor& input2d, Tensor& target1d) {
  ops::check_index_dtype(op, target);
  ops::check_same_device(op, input, target);
  if (input.dim() < 1 || input.dim() > kMaxDims)
    throw ShapeError(std::string(op) + ": input must be [N, C] or [N, C, d1, ...], got " + input.shape_str());
  if (input.dim() == 1) {  // unbatched [C] with scalar target
    if (target.dim() != 0)
      throw ShapeError(std::string(op) + ": for input [C] the target must be a scalar, got " + target.shape_str());
    input2d = input.unsqueeze(0);
    target1d = target.reshape({1});
    return;
  }
  Shape expected{input.size(0)};
  for (int d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  if (target.shape() != expected)
    throw ShapeError(std::string(op) + ": target shape " + target.shape_str() + " does not match input " +
                     input.shape_str() + " (expected " + shape_to_string(expected) + ")");
  input2d = input.dim() == 2 ? input : ops::move_dim_last(input, 1).reshape({-1, input.size(1)});
  target1d = target.reshape({-1});
}

}  // namespace

Tensor softmax(const Tensor& x, int dim) { return softmax_impl(autocast::raise(x), dim, false); }
Tensor log_softmax(const Tensor& x, int dim) { return softmax_impl(autocast::raise(x), dim, true); }

Tensor nll_loss(const Tensor& logp, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  if (autocast::should_raise(logp)) return nll_loss(autocast::raise(logp), target, reduction, ignore_index);
  ops::check_float("nll_loss", logp);
  Tensor in2, t1;
  flatten_class_dim("nll_loss", logp, target, in2, t1);
  return nll_impl(in2, t1, reduction, ignore_index, 0.0, target.shape());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing) {
  if (autocast::should_raise(logits))
    return cross_entropy(autocast::raise(logits), target, reduction, ignore_index, label_smoothing);
  ops::check_float("cross_entropy", logits);
  if (label_smoothing < 0.0 || label_smoothing > 1.0)
    throw ValueError("cross_entropy: label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  Tensor in2, t1;
  flatten_class_dim("cross_entropy", logits, target, in2, t1);
  return nll_impl(log_softmax(in2, 1), t1, reduction, ignore_index, label_smoothing, target.shape());
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (autocast::should_raise(input) || autocast::should_raise(target))
    return mse_loss(autocast::raise(input), autocast::raise(target), reduction);
  if (input.shape() != target.shape())
    throw ShapeError("mse_loss: input " + input.shape_str() + " and target " + target.shape_str() +
                     " must have the same shape");
  Tensor d = input - target;
  Tensor sq = d * d;
  switch (reduction) {
    case Reduction::None: return sq;
    case Reduction::Sum: return sum(sq);
    case Reduction::Mean: return mean(sq);
  }
  return sq;
}

}  // namespace tandem
