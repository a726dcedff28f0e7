#include "engine/nn/transformer.h"

#include "tensor/ops/ops.h"

namespace tandem::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd_, int64_t n_head_, double dropout_, bool bias)
    : n_embd(n_embd_), n_head(n_head_), dropout(dropout_) {
  TANDEM_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0, ValueError,
               "CausalSelfAttention: n_embd (" + std::to_string(n_embd) + ") must be a positive multiple of n_head (" +
                   std::to_string(n_head) + ")");
  TANDEM_CHECK(dropout >= 0 && dropout < 1, ValueError,
               "CausalSelfAttention: dropout must be in [0, 1), got " + std::to_string(dropout));
  c_attn = register_module("c_attn", std::make_shared<Linear>(n_embd, 3 * n_embd, bias));
  c_proj = register_module("c_proj", std::make_shared<Linear>(n_embd, n_embd, bias));
}

std::string CausalSelfAttention::extra_repr() const {
  return "n_embd=" + std::to_string(n_embd) + ", n_head=" + std::to_string(n_head);
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache* cache) {
  TANDEM_CHECK(x.dim() == 3 && x.size(2) == n_embd, ShapeError,
               "CausalSelfAttention: input must be [B, T, " + std::to_string(n_embd) + "], got " + x.shape_str());
  const int64_t B = x.size(0), T = x.size(1), D = n_embd / n_head;
  // [B, T, 3C] -> [B, T, 3, H, D]; q, k, v are [B, H, T, D] views of it (no copy).
  const Tensor qkv = c_attn->forward(x).view({B, T, 3, n_head, D});
  const Tensor q = qkv.select(2, 0).transpose(1, 2);
  Tensor k = qkv.select(2, 1).transpose(1, 2);
  Tensor v = qkv.select(2, 2).transpose(1, 2);
  if (cache) {
    if (cache->length() > 0) {
      k = cat({cache->k, k}, 2);
      v = cat({cache->v, v}, 2);
    }
    cache->k = k.contiguous();
    cache->v = v.contiguous();
  }
  const Tensor y = scaled_dot_product_attention(q, k, v, is_training() ? dropout : 0.0, /*is_causal=*/true);
  return tandem::dropout(c_proj->forward(y.transpose(1, 2).reshape({B, T, n_embd})), dropout, is_training());
}

TransformerMLP::TransformerMLP(int64_t n_embd, double dropout_, bool bias) : dropout(dropout_) {
  TANDEM_CHECK(dropout >= 0 && dropout < 1, ValueError,
               "TransformerMLP: dropout must be in [0, 1), got " + std::to_string(dropout));
  c_fc = register_module("c_fc", std::make_shared<Linear>(n_embd, 4 * n_embd, bias));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * n_embd, n_embd, bias));
}

Tensor TransformerMLP::forward(const Tensor& x) {
  return tandem::dropout(c_proj->forward(c_fc->forward(x, "gelu_tanh")), dropout, is_training());
}

TransformerBlock::TransformerBlock(int64_t n_embd, int64_t n_head, double dropout, bool bias) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{n_embd}, 1e-5, true, bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head, dropout, bias));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{n_embd}, 1e-5, true, bias));
  mlp = register_module("mlp", std::make_shared<TransformerMLP>(n_embd, dropout, bias));
}

Tensor TransformerBlock::forward(const Tensor& x, KVCache* cache) {
  const Tensor h = x + attn->forward(ln_1->forward(x), cache);
  return h + mlp->forward(ln_2->forward(h));
}

}  // namespace tandem::nn
