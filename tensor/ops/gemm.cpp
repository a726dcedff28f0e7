// matmul (PyTorch semantics: 1-D, 2-D, batched with broadcast batch dims) through Backend::gemm.
// Operands whose last two dims are a transposed contiguous matrix are passed to GEMM with a
// transpose flag instead of being copied; a 2-D right operand is shared by every batch
// (stride 0), and [B..., m, k] @ [k, n] folds the batch into m.
#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {

struct GemmOperand {
  Tensor t;     // storage holder
  bool trans;   // matrix stored transposed
};

// The last two dims are a contiguous matrix stored by columns (a transposed view, e.g. W.t()).
bool stored_transposed(const Tensor& m) {
  const int nd = m.dim();
  const auto& st = m.strides();
  const auto& sh = m.shape();
  return st[size_t(nd - 2)] == 1 && st[size_t(nd - 1)] == sh[size_t(nd - 2)] && sh[size_t(nd - 2)] > 1;
}

// The last two dims as a GEMM operand: contiguous rows, or contiguous columns (transposed).
GemmOperand gemm_operand(const Tensor& m) {
  const int nd = m.dim();
  const auto& st = m.strides();
  const auto& sh = m.shape();
  const bool batch_contig = [&] {
    int64_t expected = sh[size_t(nd - 1)] * sh[size_t(nd - 2)];
    for (int d = nd - 3; d >= 0; --d) {
      if (sh[size_t(d)] != 1 && st[size_t(d)] != expected) return false;
      expected *= sh[size_t(d)];
    }
    return true;
  }();
  if (batch_contig && stored_transposed(m)) return {m, true};
  return {m.contiguous(), false};
}

// C[batch, m, n] = A[batch, m, k] @ B[batch or 1, k, n] (no autograd).
Tensor gemm_batched(const Tensor& a, const Tensor& b, const Shape& batch_shape) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int64_t batch = shape_numel(batch_shape);
  Shape out_shape = batch_shape;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor c = Tensor::empty(out_shape, a.dtype(), a.device());
  GemmOperand A = gemm_operand(a), B = gemm_operand(b);
  const int64_t stride_a = a.dim() > 2 ? m * k : 0;
  const int64_t stride_b = b.dim() > 2 ? k * n : 0;
  backend_of(a).gemm(a.dtype(), A.trans, B.trans, m, n, k, 1.0, A.t.raw_data(), stride_a, B.t.raw_data(), stride_b,
                     0.0, c.raw_data(), m * n, batch);
  return c;
}

// The gradient of a 2-D b that every row of a batched a multiplied ([B..., m, k] @ [k, n]): one
// GEMM over all the rows, a's [N, k] transposed times g's [N, n], as the forward folded them,
// instead of a [B..., k, n] product per batch summed afterwards (for a GPT-2 head, 4 x 154 MB).
// When b is a transposed matrix (the token embedding used as the tied head, wte.t()), the
// gradient is made in that layout, [n, k] rows seen through .t(), so the transpose hands its base
// a contiguous gradient that the base's .grad adopts without a copy.
Tensor shared_matrix_grad(const Tensor& a, const Tensor& g, const Tensor& b) {
  const Tensor a_rows = a.reshape({-1, a.size(-1)}), g_rows = g.reshape({-1, g.size(-1)});
  if (stored_transposed(b)) return matmul(g_rows.t(), a_rows).t();
  return matmul(a_rows.t(), g_rows);
}

Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  if (a.size(-1) != b.size(-2))
    throw ShapeError("matmul: shapes " + a.shape_str() + " and " + b.shape_str() + " cannot be multiplied (" +
                     std::to_string(a.size(-1)) + " != " + std::to_string(b.size(-2)) + ")");
  Tensor ad = a.detach(), bd = b.detach();
  Tensor out;
  const bool shared_b = b.dim() == 2 && a.dim() > 2;
  if (shared_b) {
    // Fold a's batch dims into its rows: one large GEMM.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.size(1));
    Tensor flat = ad.reshape({-1, a.size(-1)});
    out = gemm_batched(flat, bd, {}).view(out_shape);
  } else {
    Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
    Shape batch = ops::broadcast_shapes("matmul", ba, bb);
    Shape ea = batch, eb = batch;
    ea.insert(ea.end(), {a.size(-2), a.size(-1)});
    eb.insert(eb.end(), {b.size(-2), b.size(-1)});
    // A 2-D operand is shared by all batches (stride 0); batched ones are broadcast to the
    // common batch shape (gemm_operand copies them when the broadcast left stride-0 dims).
    Tensor A = ad.dim() == 2 ? ad : ad.expand(ea);
    Tensor B = bd.dim() == 2 ? bd : bd.expand(eb);
    out = gemm_batched(A, B, batch);
  }
  bool ga = ops::wants_grad(a), gb = ops::wants_grad(b);
  autograd::record("Matmul", out, {a, b}, [ad, bd, ga, gb, shared_b](const Tensor& g) {
    Tensor grad_b;
    if (gb)
      grad_b = shared_b ? shared_matrix_grad(ad, g, bd) : sum_to_shape(matmul(ad.transpose(-1, -2), g), bd.shape());
    return std::vector<Tensor>{ga ? sum_to_shape(matmul(g, bd.transpose(-1, -2)), ad.shape()) : Tensor(), grad_b};
  });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::should_lower({&a, &b})) return matmul(autocast::lower(a), autocast::lower(b));
  if (autocast::should_round_on_host({&a, &b})) {
    autocast::Guard off(std::nullopt);
    return autocast::round_to_bfloat16(matmul(autocast::round_to_bfloat16(a), autocast::round_to_bfloat16(b)));
  }
  ops::check_same_device("matmul", a, b);
  ops::check_same_dtype("matmul", a, b);
  ops::check_float("matmul", a);
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError("matmul: both operands need at least 1 dim, got " + a.shape_str() + " and " + b.shape_str());
  if (a.dim() == 1 && b.dim() == 1) return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  return matmul_nd(a, b);
}

}  // namespace tandem
