// The blocks of a GPT-2 style decoder, public so a user's own transformer LightningModule is
// built from them (docs/GPT.md): CausalSelfAttention, TransformerMLP and TransformerBlock, with
// nanoGPT's module names and PyTorch's layouts, so their state_dict loads into nanoGPT's model.
//
//   CausalSelfAttention  x [B, T, C] -> c_attn (Linear C -> 3C, q|k|v) -> heads [B, H, T, C/H]
//                        -> scaled_dot_product_attention (causal) -> [B, T, C] -> c_proj -> dropout
//   TransformerMLP       c_fc (C -> 4C) and GELU(tanh) as one op -> c_proj (4C -> C) -> dropout
//   TransformerBlock     x + attn(ln_1(x)), then x + mlp(ln_2(x))       (pre-LN, GPT-2)
//
// Generation passes a KVCache per block: each call appends its keys and values to the cache and
// attends to everything cached, so one new token per step costs O(T) instead of a full prefix.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/nn/activation.h"
#include "engine/nn/linear.h"
#include "engine/nn/normalization.h"

namespace tandem::nn {

// The keys and values one attention layer has seen, [B, H, length, head_dim] each (undefined
// before the first call). Clear it to start a new sequence.
struct KVCache {
  Tensor k, v;
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
  void clear() { k = Tensor(); v = Tensor(); }
};

class CausalSelfAttention : public Module {
 public:
  // n_embd divisible by n_head; dropout applies to the attention weights and to the output.
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  std::string name() const override { return "CausalSelfAttention"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  // With a cache: x holds the positions after the cached ones; query i attends to every cached
  // key and to the new keys up to itself.
  Tensor forward(const Tensor& x, KVCache* cache);

  int64_t n_embd, n_head;
  double dropout;
  std::shared_ptr<Linear> c_attn, c_proj;
};

class TransformerMLP : public Module {
 public:
  TransformerMLP(int64_t n_embd, double dropout = 0.0, bool bias = true);
  std::string name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override;

  double dropout;
  std::shared_ptr<Linear> c_fc, c_proj;
};

class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  std::string name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, KVCache* cache);

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<TransformerMLP> mlp;
};

}  // namespace tandem::nn
