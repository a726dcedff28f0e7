// scaled_dot_product_attention: softmax(q k^T / sqrt(D) + causal mask) v per (batch, head) as
// one op, with optional dropout on the probabilities, and its backward right below. The
// kernels (attention_forward / attention_backward) are flash-attention style: they keep the
// logsumexp of each query row, never a [Tq, Tk] matrix, and the backward recomputes the
// probabilities from q, k and that logsumexp.
//
// Layout: the kernels read q, k, v and the output gradient through their strides (the D dim
// must have stride 1), so q/k/v taken as views of one fused projection ([B, T, 3, H, D] split
// and permuted) are read in place; an operand whose last dim is strided is copied first. The
// output is stored [B, Tq, H, D] and returned as its permuted view [B, H, Tq, D]: the usual next
// step, out.transpose(1, 2) merged into [B, Tq, H * D], is then a free view.
#include <cmath>

#include "tensor/generator.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool is_causal) {
  if (!q.defined() || !k.defined() || !v.defined())
    throw ValueError(std::string(kOp) + ": q, k and v must all be defined tensors");
  ops::check_same_device(kOp, q, k);
  ops::check_same_device(kOp, q, v);
  ops::check_same_dtype(kOp, q, k);
  ops::check_same_dtype(kOp, q, v);
  ops::check_float(kOp, q);
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw ShapeError(std::string(kOp) + ": q, k and v must be 4-d [B, H, T, D], got q " + q.shape_str() + ", k " +
                     k.shape_str() + ", v " + v.shape_str());
  if (k.shape() != v.shape())
    throw ShapeError(std::string(kOp) + ": k and v must have the same shape [B, H, Tk, D], got k " + k.shape_str() +
                     " and v " + v.shape_str());
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1))
    throw ShapeError(std::string(kOp) + ": q " + q.shape_str() + " and k " + k.shape_str() +
                     " must agree on batch and heads (dims 0 and 1)");
  if (q.size(3) != k.size(3))
    throw ShapeError(std::string(kOp) + ": q " + q.shape_str() + " and k " + k.shape_str() +
                     " must have the same head size D (dim 3)");
  if (q.size(3) < 1) throw ShapeError(std::string(kOp) + ": the head size D (dim 3) must be at least 1, got 0");
  if (is_causal && q.size(2) > k.size(2))
    throw ShapeError(std::string(kOp) + ": with is_causal the query length Tq (" + std::to_string(q.size(2)) +
                     ") may not exceed the key length Tk (" + std::to_string(k.size(2)) +
                     "): the mask is aligned bottom-right, so the first Tq - Tk queries would see no key");
  if (k.size(2) == 0 && q.size(2) > 0)
    throw ShapeError(std::string(kOp) + ": " + std::to_string(q.size(2)) +
                     " queries need at least one key, got k " + k.shape_str());
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw ValueError(std::string(kOp) + ": dropout_p must be in [0, 1], got " + std::to_string(dropout_p));
}

// t itself when its last dim has stride 1 (the kernels' layout rule), else a contiguous copy.
Tensor kernel_operand(const Tensor& t) {
  Tensor d = t.detach();
  return d.size(3) <= 1 || d.strides()[3] == 1 ? d : d.contiguous();
}

// An empty [B, H, T, D] tensor stored as [B, T, H, D] (see the layout note above).
Tensor empty_heads_last(const Shape& bhtd, DType dtype, Device device) {
  return Tensor::empty({bhtd[0], bhtd[2], bhtd[1], bhtd[3]}, dtype, device).permute({0, 2, 1, 3});
}

Tensor attention_impl(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool is_causal) {
  check_attention_inputs(q, k, v, dropout_p, is_causal);
  const Tensor qd = kernel_operand(q), kd = kernel_operand(k), vd = kernel_operand(v);
  AttentionParams params;
  params.scale = 1.0 / std::sqrt(double(q.size(3)));
  params.causal = is_causal;
  params.dropout_p = dropout_p;
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  if (dropout_p > 0.0) {
    Generator& gen = default_generator();
    params.seed = gen.seed;
    params.offset = gen.reserve(uint64_t(B * H * Tq * Tk));
  }
  const DType lse_dtype = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor out = empty_heads_last(q.shape(), q.dtype(), q.device());
  Tensor lse = Tensor::empty({B, H, Tq}, lse_dtype, q.device());
  if (out.numel() > 0) backend_of(q).attention_forward(qd.view_desc(), kd.view_desc(), vd.view_desc(), params,
                                                       out.view_desc(), lse.view_desc());
  const Tensor saved_out = out.detach();
  autograd::record("ScaledDotProductAttention", out, {q, k, v}, [qd, kd, vd, saved_out, lse, params](const Tensor& g) {
    const Tensor gd = kernel_operand(g);
    Tensor gq = Tensor::empty(qd.shape(), qd.dtype(), qd.device());
    Tensor gk = Tensor::empty(kd.shape(), kd.dtype(), kd.device());
    Tensor gv = Tensor::empty(vd.shape(), vd.dtype(), vd.device());
    if (gq.numel() > 0) {
      backend_of(gd).attention_backward(qd.view_desc(), kd.view_desc(), vd.view_desc(), saved_out.view_desc(),
                                        gd.view_desc(), lse.view_desc(), params, gq.view_desc(), gk.view_desc(),
                                        gv.view_desc());
    } else {  // no query: no key or value gets a gradient
      gk.zero_();
      gv.zero_();
    }
    return std::vector<Tensor>{gq, gk, gv};
  });
  return out;
}

}  // namespace

// Autocast as torch.autocast: on CUDA the op runs in the low dtype (half inputs, float
// accumulation in the kernels); on the CPU under bfloat16 autocast its inputs and output are
// rounded to bfloat16 and it computes in float32, as matmul does there.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p,
                                    bool is_causal) {
  if (autocast::should_lower({&q, &k, &v}))
    return attention_impl(autocast::lower(q), autocast::lower(k), autocast::lower(v), dropout_p, is_causal);
  if (autocast::should_round_on_host({&q, &k, &v})) {
    autocast::Guard off(std::nullopt);
    return autocast::round_to_bfloat16(attention_impl(autocast::round_to_bfloat16(q), autocast::round_to_bfloat16(k),
                                                      autocast::round_to_bfloat16(v), dropout_p, is_causal));
  }
  return attention_impl(q, k, v, dropout_p, is_causal);
}

}  // namespace tandem
