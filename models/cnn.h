// CNN for 28x28 grey images (issue 3's model): 421,642 parameters without batch norm.
//   net: Conv2d(1, 32, 3, padding=1) [BatchNorm2d(32)] ReLU MaxPool2d(2)        -> [B, 32, 14, 14]
//        Conv2d(32, 64, 3, padding=1) [BatchNorm2d(64)] ReLU MaxPool2d(2)       -> [B, 64, 7, 7]
//        Flatten Linear(3136, 128) ReLU Linear(128, 10)
// Flat inputs ([B, 784]) are viewed as [B, 1, 28, 28], so the CNN takes the MLP's batches too.
#pragma once
#include "models/image_classifier.h"

namespace tandem::models {

struct CNNOptions {
  bool batch_norm = false;  // a BatchNorm2d after each conv (conv biases kept, as in the twin)
  int64_t num_classes = 10;
};

class CNN : public ImageClassifier {
 public:
  explicit CNN(CNNOptions options = {}, OptimizationConfig optimization = OptimizationConfig::defaults());
  std::string name() const override { return "CNN"; }

  const CNNOptions options;

 protected:
  Tensor prepare_input(const Tensor& input) const override;
};

}  // namespace tandem::models
