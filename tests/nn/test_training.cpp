// End to end: a tiny MLP learns a fixed synthetic task with SGD (and Adam), and
// post-accumulate-grad hooks fire once per parameter per backward.
#include <gtest/gtest.h>

#include <map>

#include "engine/nn/nn.h"
#include "engine/optim/optim.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
// 128 points in the plane; class 1 when x0 + 2 x1 > 0.3, else 0. Linearly separable with a
// margin, so a small MLP should fit it nearly perfectly.
struct Dataset {
  Tensor x, y;
};
Dataset make_dataset() {
  manual_seed(1234);
  Tensor x = Tensor::randn({128, 2});
  auto v = x.to_vector<float>();
  std::vector<int64_t> labels;
  for (size_t i = 0; i < 128; ++i) labels.push_back(v[2 * i] + 2 * v[2 * i + 1] > 0.3f ? 1 : 0);
  return {x, Tensor::from_vector(labels, {128})};
}

std::shared_ptr<Sequential> mlp() {
  manual_seed(7);
  return std::make_shared<Sequential>(std::make_shared<Linear>(2, 16), std::make_shared<ReLU>(),
                                      std::make_shared<Linear>(16, 2));
}

double train(Module& model, optim::Optimizer& opt, const Dataset& data, int steps, double* first_loss) {
  double last = 0;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(data.x), data.y);
    loss.backward();
    opt.step();
    last = loss.item();
    if (i == 0) *first_loss = last;
  }
  return last;
}
}  // namespace

TEST(Training, MlpWithSgdDrivesTheLossDown) {
  Dataset data = make_dataset();
  auto model = mlp();
  optim::SGD opt(model->parameters(), {.lr = 0.2, .momentum = 0.9});
  double first = 0;
  const double last = train(*model, opt, data, 200, &first);
  EXPECT_GT(first, 0.5);
  EXPECT_LT(last, 0.02) << "first loss " << first;  // reaches ~0.002; 0.75 at the start
  // And it classifies the training set.
  Tensor pred = argmax(model->forward(data.x), 1);
  auto p = pred.to_vector<int64_t>(), y = data.y.to_vector<int64_t>();
  int correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += p[i] == y[i];
  EXPECT_GE(correct, 125);
}

TEST(Training, MlpWithAdamWAndScheduleDrivesTheLossDown) {
  Dataset data = make_dataset();
  auto model = mlp();
  optim::AdamW opt(model->parameters(), {.lr = 0.05});
  auto sched = optim::warmup_cosine(opt, 10, 200, 0.1);
  double first = 0, last = 0;
  for (int i = 0; i < 200; ++i) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(data.x), data.y);
    loss.backward();
    optim::clip_grad_norm_(model->parameters(), 5.0);
    opt.step();
    sched->step();
    last = loss.item();
    if (i == 0) first = last;
  }
  EXPECT_LT(last, 0.02) << "first loss " << first;
}

TEST(Training, SameSeedSameTrajectory) {
  Dataset data = make_dataset();
  auto run = [&] {
    auto model = mlp();
    optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    double first = 0;
    train(*model, opt, data, 20, &first);
    return model->at<Linear>(2)->weight.to_vector<float>();
  };
  EXPECT_EQ(run(), run());
}

TEST(Training, PostAccumulateGradHooksFireOncePerParameterPerBackward) {
  // The shared Linear is used twice in one forward; its hook must still fire once.
  auto shared = std::make_shared<Linear>(4, 4);
  Sequential model(shared, std::make_shared<ReLU>(), shared, std::make_shared<Linear>(4, 1));
  std::map<std::string, int> fired;
  for (auto& [name, p] : model.named_parameters()) {
    std::string n = name;
    p.register_post_accumulate_grad_hook([&fired, n](const Tensor& leaf) {
      EXPECT_TRUE(leaf.grad().defined()) << n;  // the gradient is already there
      ++fired[n];
    });
  }
  Tensor x = Tensor::randn({3, 4});
  for (int pass = 1; pass <= 2; ++pass) {
    sum(model.forward(x)).backward();
    ASSERT_EQ(fired.size(), 4u);  // 0.weight, 0.bias, 3.weight, 3.bias
    for (auto& [n, count] : fired) EXPECT_EQ(count, pass) << n;
  }
}
