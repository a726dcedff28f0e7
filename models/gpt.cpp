#include "models/gpt.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "engine/config/optimizer_section.h"
#include "engine/config/yaml_json.h"
#include "engine/nn/init.h"
#include "engine/trainer/trainer.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::models {

void GPTOptions::validate() const {
  auto positive = [](const char* what, int64_t v) {
    TANDEM_CHECK(v > 0, ValueError, std::string("GPT: ") + what + " must be > 0, got " + std::to_string(v));
  };
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  positive("n_embd", n_embd);
  positive("block_size", block_size);
  positive("vocab_size", vocab_size);
  TANDEM_CHECK(n_embd % n_head == 0, ValueError,
               "GPT: n_embd (" + std::to_string(n_embd) + ") must be a multiple of n_head (" + std::to_string(n_head) + ")");
  TANDEM_CHECK(dropout >= 0 && dropout < 1, ValueError, "GPT: dropout must be in [0, 1), got " + std::to_string(dropout));
}

GPT::GPT(GPTOptions o, OptimizationConfig optimization)
    : options(o),
      optimization_(optimization.optimizer && optimization.optimizer.IsMap() ? optimization
                                                                             : OptimizationConfig::defaults()) {
  options.validate();
  transformer = register_module("transformer", std::make_shared<nn::Module>());
  wte = transformer->register_module("wte", std::make_shared<nn::Embedding>(options.vocab_size, options.n_embd));
  wpe = transformer->register_module("wpe", std::make_shared<nn::Embedding>(options.block_size, options.n_embd));
  auto h = transformer->register_module("h", std::make_shared<nn::Module>());
  for (int64_t i = 0; i < options.n_layer; ++i) {
    blocks.push_back(h->register_module(
        std::to_string(i), std::make_shared<nn::TransformerBlock>(options.n_embd, options.n_head, options.dropout, options.bias)));
  }
  ln_f = transformer->register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{options.n_embd}, 1e-5, true, options.bias));
  init_weights();

  hparams["model"] = "gpt";
  hparams["n_layer"] = options.n_layer;
  hparams["n_head"] = options.n_head;
  hparams["n_embd"] = options.n_embd;
  hparams["block_size"] = options.block_size;
  hparams["vocab_size"] = options.vocab_size;
  hparams["dropout"] = options.dropout;
  hparams["bias"] = options.bias;
  hparams["optimizer"] = yaml_to_json(optimization_.optimizer);
  hparams["lr_scheduler"] = yaml_to_json(optimization_.lr_scheduler);
}

void GPT::init_weights() {
  const double residual_std = 0.02 / std::sqrt(2.0 * double(options.n_layer));
  for (const auto& [name, p] : named_parameters()) {
    const bool residual_projection = name.size() > 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0;
    if (p.dim() >= 2) {
      nn::init::normal_(p, 0.0, residual_projection ? residual_std : 0.02);
    } else if (name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      nn::init::zeros_(p);
    } else {
      nn::init::ones_(p);  // LayerNorm weights
    }
  }
}

Tensor GPT::logits_of(const Tensor& idx, int64_t first_position, std::vector<nn::KVCache>* caches) {
  TANDEM_CHECK(idx.dim() == 2 && idx.dtype() == DType::Int64, ShapeError,
               "GPT: input must be int64 token ids [B, T], got " + idx.shape_str() + " " + dtype_name(idx.dtype()));
  const int64_t T = idx.size(1);
  TANDEM_CHECK(T >= 1 && first_position + T <= options.block_size, ShapeError,
               "GPT: positions " + std::to_string(first_position) + ".." + std::to_string(first_position + T - 1) +
                   " do not fit block_size " + std::to_string(options.block_size));
  std::vector<int64_t> position_ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) position_ids[size_t(t)] = first_position + t;
  const Tensor positions = Tensor::from_vector<int64_t>(position_ids, {T}).to(idx.device());
  Tensor x = tandem::dropout(wte->forward(idx) + wpe->forward(positions), options.dropout, is_training());
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward(x, caches ? &(*caches)[i] : nullptr);
  return matmul(ln_f->forward(x), wte->weight.t());  // the head tied to the token embedding
}

Tensor GPT::forward(const Tensor& idx) { return logits_of(idx, 0, nullptr); }

Tensor GPT::forward(const Tensor& idx, std::vector<nn::KVCache>& caches) {
  TANDEM_CHECK(caches.size() == blocks.size(), ValueError,
               "GPT: expected one KVCache per block (" + std::to_string(blocks.size()) + "), got " +
                   std::to_string(caches.size()));
  return logits_of(idx, caches[0].length(), &caches);
}

Tensor GPT::loss_of(const data::Batch& batch) {
  const Tensor logits = forward(batch.input);
  const int64_t rows = logits.size(0) * logits.size(1);
  return cross_entropy(logits.reshape({rows, options.vocab_size}), batch.target.reshape({rows}));
}

namespace {
trainer::LogOptions shown(bool synced) {
  trainer::LogOptions o;
  o.prog_bar = true;
  o.sync_dist = synced;
  return o;
}
}  // namespace

Tensor GPT::training_step(const data::Batch& batch, int64_t) {
  Tensor loss = loss_of(batch);
  log("train_loss", loss, shown(false));
  return loss;
}

Tensor GPT::validation_step(const data::Batch& batch, int64_t) {
  log("val_loss", loss_of(batch), shown(true));
  return Tensor();
}

Tensor GPT::test_step(const data::Batch& batch, int64_t) {
  log("test_loss", loss_of(batch), shown(true));
  return Tensor();
}

trainer::OptimizerConfig GPT::configure_optimizers() {
  return optimization_.with_scheduler(
      make_optimizer(optimization_.optimizer, optim::weight_decay_groups(parameters())), trainer());
}

std::shared_ptr<trainer::LightningModule> GPT::make_replica() const {
  return std::make_shared<GPT>(options, optimization_);
}

namespace {

// The next token from the last position's logits [V] (float32 on the host).
int64_t pick_token(std::vector<float> logits, const GenerateOptions& o, std::mt19937_64& rng) {
  const auto largest = std::max_element(logits.begin(), logits.end());
  if (o.temperature <= 0) return largest - logits.begin();
  const int64_t V = int64_t(logits.size());
  float threshold = -INFINITY;
  if (o.top_k > 0 && o.top_k < V) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<float>());
    threshold = sorted[size_t(o.top_k - 1)];
  }
  std::vector<double> weights(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] < threshold) continue;
    weights[i] = std::exp((double(logits[i]) - double(*largest)) / o.temperature);
    total += weights[i];
  }
  // A uniform double in [0, 1) from the top 53 bits: the same draw on every platform.
  const double u = double(rng() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (u < acc && weights[i] > 0) return int64_t(i);
  }
  return largest - logits.begin();
}

}  // namespace

std::vector<int64_t> GPT::generate(const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  TANDEM_CHECK(!prompt.empty(), ValueError, "GPT::generate: the prompt is empty; give at least one token");
  for (int64_t t : prompt) {
    TANDEM_CHECK(t >= 0 && t < options.vocab_size, ValueError,
                 "GPT::generate: token " + std::to_string(t) + " is outside the vocabulary [0, " +
                     std::to_string(options.vocab_size) + ")");
  }
  NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> tokens = prompt;
  std::vector<nn::KVCache> caches(blocks.size());
  const Device device = this->device();
  auto ids = [&](size_t from) {
    std::vector<int64_t> window(tokens.begin() + int64_t(from), tokens.end());
    return Tensor::from_vector<int64_t>(window, {1, int64_t(window.size())}).to(device);
  };
  auto window_start = [&] { return tokens.size() > size_t(options.block_size) ? tokens.size() - size_t(options.block_size) : 0; };
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    Tensor logits;
    if (!o.kv_cache) {
      logits = forward(ids(window_start()));
    } else if (caches[0].length() > 0 && caches[0].length() < options.block_size) {
      logits = forward(ids(tokens.size() - 1), caches);  // one new token
    } else {
      for (auto& c : caches) c.clear();  // the first step, or the context passed block_size
      logits = forward(ids(window_start()), caches);
    }
    const Tensor last = logits.select(1, logits.size(1) - 1).select(0, 0).to(Device::cpu()).to(DType::Float32);
    tokens.push_back(pick_token(last.contiguous().to_vector<float>(), o, rng));
  }
  train(was_training);
  return tokens;
}

void fit_text_data_to_model(data::TextDataOptions& data, const GPT& model) {
  const int64_t block = model.options.block_size;
  if (data.block_size == 0) data.block_size = block;
  if (data.block_size > block) {
    throw ConfigError("--data.block_size=" + std::to_string(data.block_size) + " is above the model's block_size " +
                      std::to_string(block) + " (it has no positions past that); use --data.block_size <= " +
                      std::to_string(block) + " or a larger --model.block_size");
  }
  data.vocab_size = model.options.vocab_size;
}

}  // namespace tandem::models
