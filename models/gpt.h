// GPT: a GPT-2 style decoder-only transformer as a LightningModule (issue 24), nanoGPT's layout
// and parameter names, so a checkpoint's tensors load into nanoGPT's GPT (bench/peers/gpt_torch.py)
// by name:
//   transformer.wte  Embedding(vocab_size, n_embd)        token embedding, tied to the output head
//   transformer.wpe  Embedding(block_size, n_embd)        learned positions
//   transformer.h.i  nn::TransformerBlock (ln_1, attn.c_attn [3C, C], attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj)
//   transformer.ln_f LayerNorm(n_embd)
//   logits = ln_f(x) wte^T                                no lm_head tensor of its own (tied)
// The tied weight's gradient is the sum of both uses (the autograd tape accumulates it).
// Init as GPT-2: every Linear and Embedding weight N(0, 0.02), the residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1.
//
// Batches: input int64 [B, T] token ids, target int64 [B, T] the next tokens (data::TextDataModule).
// training_step is the mean cross entropy over every position; logs train_loss, val_loss, test_loss.
// configure_optimizers puts parameters of 2 or more dimensions (matmul weights, embeddings) in a
// group with the configured weight_decay and the rest (biases, LayerNorm) in one without.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/text_data.h"
#include "engine/nn/transformer.h"
#include "models/image_classifier.h"

namespace tandem::models {

struct GPTOptions {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;   // the longest context (positions)
  int64_t vocab_size = 256;  // bytes
  double dropout = 0.0;
  bool bias = true;          // biases in Linear and LayerNorm
  void validate() const;     // ValueError for sizes that do not fit together
};

// What to sample (GPT::generate).
struct GenerateOptions {
  int64_t max_new_tokens = 100;
  // <= 0: greedy (argmax); otherwise logits / temperature are sampled.
  double temperature = 1.0;
  // > 0: sample among the top_k most likely tokens only; <= 0: all.
  int64_t top_k = 0;
  uint64_t seed = 0;
  // false: every step runs the whole context again (the reference the cache is tested against).
  bool kv_cache = true;
};

class GPT : public trainer::LightningModule {
 public:
  explicit GPT(GPTOptions options = {}, OptimizationConfig optimization = OptimizationConfig::defaults());
  std::string name() const override { return "GPT"; }

  // idx int64 [B, T], T <= block_size -> logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) override;
  // The positions after those cached (caches: one per block, all of the same length).
  Tensor forward(const Tensor& idx, std::vector<nn::KVCache>& caches);

  Tensor training_step(const data::Batch& batch, int64_t batch_idx) override;
  Tensor validation_step(const data::Batch& batch, int64_t batch_idx) override;
  Tensor test_step(const data::Batch& batch, int64_t batch_idx) override;
  trainer::OptimizerConfig configure_optimizers() override;
  std::shared_ptr<trainer::LightningModule> make_replica() const override;

  // prompt followed by max_new_tokens sampled tokens, in eval mode without gradients. A prompt
  // longer than block_size is seen through its last block_size tokens. With the cache, each
  // step feeds one token; once the context passes block_size, each step re-encodes the last
  // block_size tokens (learned absolute positions: a cached key carries its position, so a cache
  // cannot slide), which is what a step without the cache does too. Empty prompt: ValueError.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, const GenerateOptions& options);

  const GPTOptions options;
  std::shared_ptr<nn::Module> transformer;
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::vector<std::shared_ptr<nn::TransformerBlock>> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;

 private:
  Tensor logits_of(const Tensor& idx, int64_t first_position, std::vector<nn::KVCache>* caches);
  Tensor loss_of(const data::Batch& batch);
  void init_weights();

  OptimizationConfig optimization_;
};

// Text data for this model: block_size 0 becomes the model's; ConfigError when the data's
// block_size is above the model's (no positions for it); vocab_size becomes the model's.
void fit_text_data_to_model(data::TextDataOptions& data, const GPT& model);

}  // namespace tandem::models
