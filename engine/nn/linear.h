// Linear and Embedding: the two lookup/projection layers, with PyTorch's layouts and
// default initializations.
#pragma once
#include <cstdint>

#include "engine/nn/module.h"

namespace tandem::nn {

// y = x W^T + b. weight [out_features, in_features], bias [out_features];
// both U(-1/sqrt(in_features), 1/sqrt(in_features)) (kaiming_uniform_ with a = sqrt(5)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         DType dtype = DType::Float32, Device device = Device::cpu());
  std::string name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  // activation(x W^T + b) as one op (tandem::linear's activation: "none", "relu", "gelu_tanh").
  Tensor forward(const Tensor& x, const std::string& activation);
  // Redraws weight then bias from the default generator (in that order, like PyTorch).
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};

// y[..., :] = weight[ids[...], :]. weight [num_embeddings, embedding_dim] ~ N(0, 1).
// ids are int64 in [0, num_embeddings).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::Float32,
            Device device = Device::cpu());
  std::string name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& ids) override;
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

}  // namespace tandem::nn
