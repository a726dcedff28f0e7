// MLP: in_features -> hidden[0] -> ... -> num_classes with ReLU (and Dropout when p > 0)
// between the Linear layers. The default 784-1024-1024-10 has 1,863,690 parameters. Images
// are flattened, so the MLP takes the same batches as the CNN.
//   net.0 Linear(784, 1024), net.1 ReLU, [net.2 Dropout], ... last: Linear(hidden[-1], 10)
// Dropout layers exist only when dropout > 0, so the default's state_dict names match the
// PyTorch twin's Sequential (Linear, ReLU, Linear, ReLU, Linear).
#pragma once
#include <cstdint>
#include <vector>

#include "models/image_classifier.h"

namespace tandem::models {

struct MLPOptions {
  std::vector<int64_t> hidden{1024, 1024};
  double dropout = 0.0;
  int64_t in_features = 784;
  int64_t num_classes = 10;
};

class MLP : public ImageClassifier {
 public:
  explicit MLP(MLPOptions options = {}, OptimizationConfig optimization = OptimizationConfig::defaults());
  std::string name() const override { return "MLP"; }

  const MLPOptions options;

 protected:
  Tensor prepare_input(const Tensor& input) const override;
};

}  // namespace tandem::models
