// Module bookkeeping: names in registration order, traversal, mode, placement, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "engine/optim/sgd.h"
#include "kernels/backend.h"
#include "tensor/autograd/node.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
// A custom model the way a user writes one: members registered by name.
class Block : public Module {
 public:
  Block() {
    fc = register_module("fc", std::make_shared<Linear>(4, 3));
    norm = register_module("norm", std::make_shared<BatchNorm1d>(3));
    scale = register_parameter("scale", Tensor::ones({3}));
    register_buffer("scratch", Tensor::zeros({2}), /*persistent=*/false);
  }
  std::string name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return norm->forward(fc->forward(x)) * scale; }
  std::shared_ptr<Linear> fc;
  std::shared_ptr<BatchNorm1d> norm;
  Tensor scale;
};

// |a - b| <= tol (1 + |b|) everywhere.
void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  ASSERT_EQ(av.size(), bv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i) ASSERT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << what << " at " << i;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& items) {
  std::vector<std::string> out;
  for (auto& [n, t] : items) out.push_back(n);
  return out;
}
}  // namespace

TEST(Module, NamedParametersAreDottedInRegistrationOrder) {
  Sequential model(std::make_shared<Block>(), std::make_shared<ReLU>(), std::make_shared<Linear>(3, 2));
  EXPECT_EQ(names_of(model.named_parameters()),
            (std::vector<std::string>{"0.scale", "0.fc.weight", "0.fc.bias", "0.norm.weight", "0.norm.bias",
                                      "2.weight", "2.bias"}));
  EXPECT_EQ(names_of(model.named_buffers()),
            (std::vector<std::string>{"0.scratch", "0.norm.running_mean", "0.norm.running_var",
                                      "0.norm.num_batches_tracked"}));
  std::vector<std::string> modules;
  for (auto& [n, m] : model.named_modules()) modules.push_back(n + ":" + m->name());
  EXPECT_EQ(modules, (std::vector<std::string>{":Sequential", "0:Block", "0.fc:Linear", "0.norm:BatchNorm1d", "1:ReLU",
                                               "2:Linear"}));
  EXPECT_EQ(model.parameters().size(), 7u);
  EXPECT_EQ(model.named_parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(model.named_children().size(), 3u);
  // Non-persistent buffers are not saved.
  EXPECT_FALSE(model.state_dict().contains("0.scratch"));
}

TEST(Module, TiedParametersAreListedOnce) {
  auto shared = std::make_shared<Linear>(3, 3);
  Sequential model(shared, std::make_shared<ReLU>(), shared);
  EXPECT_EQ(names_of(model.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(model.state_dict().size(), 4u);  // state_dict keeps both names, as PyTorch
}

TEST(Module, RegistrationErrors) {
  Module m;
  m.register_parameter("w", Tensor::zeros({2}));
  EXPECT_THROW(m.register_parameter("w", Tensor::zeros({2})), ValueError);
  EXPECT_THROW(m.register_buffer("w", Tensor::zeros({2})), ValueError);
  EXPECT_THROW(m.register_module("w", std::make_shared<ReLU>()), ValueError);
  EXPECT_THROW(m.register_parameter("a.b", Tensor::zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("", Tensor::zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("u", Tensor()), ValueError);
  EXPECT_THROW(m.register_module("r", std::shared_ptr<ReLU>()), ValueError);
  EXPECT_THROW(m.forward(Tensor::zeros({1})), Error);
}

TEST(Module, TrainAndEvalReachEverySubmodule) {
  Sequential model(std::make_shared<Block>(), std::make_shared<Dropout>(0.5));
  EXPECT_TRUE(model.is_training());
  model.eval();
  for (auto& [n, m] : model.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  model.train();
  for (auto& [n, m] : model.named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(Module, ToFloat64MovesParametersAndBuffersInPlace) {
  auto block = std::make_shared<Block>();
  Sequential model(block);
  Tensor weight_handle = block->fc->weight;  // as an optimizer would hold it
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  const auto before = weight_handle.to_vector<double>();
  block->fc->weight.set_grad(Tensor::ones({3, 4}));

  model.to(DType::Float64);
  for (auto& [n, t] : model.named_parameters()) EXPECT_EQ(t.dtype(), DType::Float64) << n;
  EXPECT_EQ(block->norm->running_mean.dtype(), DType::Float64);
  EXPECT_EQ(block->norm->running_var.dtype(), DType::Float64);
  EXPECT_EQ(block->norm->num_batches_tracked.dtype(), DType::Int64);  // integers stay integers
  EXPECT_EQ(weight_handle.dtype(), DType::Float64);                   // same impl, new data
  EXPECT_EQ(opt.param_groups()[0].params[1].dtype(), DType::Float64);
  EXPECT_EQ(weight_handle.grad().dtype(), DType::Float64);
  EXPECT_EQ(weight_handle.to_vector<double>(), before);
  EXPECT_TRUE(weight_handle.requires_grad());

  // The optimizer keeps working on the moved parameters, and the forward runs in float64.
  opt.step();
  EXPECT_NEAR(weight_handle.to_vector<double>()[0], before[0] - 0.1, 1e-6);
  model.eval();
  Tensor y = model.forward(Tensor::ones({2, 4}, DType::Float64));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_THROW(model.to(DType::Int64), DTypeError);
}

TEST(Module, DeviceAndMoves) {
  Linear fc(2, 2);
  EXPECT_EQ(fc.device(), Device::cpu());
  fc.to(Device::cpu());
  EXPECT_EQ(fc.weight.device(), Device::cpu());
  EXPECT_EQ(ReLU().device(), Device::cpu());
  if (!cuda_compiled()) EXPECT_THROW(fc.to(Device::cuda(0)), DeviceError);
}

TEST(Module, ZeroGrad) {
  Linear fc(2, 2);
  fc.weight.set_grad(Tensor::ones({2, 2}));
  fc.zero_grad(false);
  EXPECT_EQ(fc.weight.grad().to_vector<double>(), std::vector<double>(4, 0.0));
  fc.zero_grad();
  EXPECT_FALSE(fc.weight.grad().defined());
}

TEST(Module, ReprNestsLikePyTorch) {
  Sequential model(std::make_shared<Conv2d>(1, 4, 3), std::make_shared<ReLU>(), std::make_shared<Flatten>(),
                   std::make_shared<Linear>(36, 2, false));
  EXPECT_EQ(model.repr(),
            "Sequential(\n"
            "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1))\n"
            "  (1): ReLU()\n"
            "  (2): Flatten(start_dim=1, end_dim=-1)\n"
            "  (3): Linear(in_features=36, out_features=2, bias=False)\n"
            ")");
}

// A Linear followed by ReLU or the tanh GELU runs as one op (its grad_fn says so) with the values
// and gradients of the two ops; the exact GELU, a Linear subclass and a lone ReLU stay unfused.
TEST(Sequential, FusesALinearWithTheActivationAfterIt) {
  class ScaledLinear : public Linear {  // a user's subclass: its own forward must run
   public:
    ScaledLinear() : Linear(6, 5) {}
    Tensor forward(const Tensor& x) override { return Linear::forward(x) * 2.0; }
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    auto fc1 = std::make_shared<Linear>(6, 20, true, dt), fc2 = std::make_shared<Linear>(20, 6, true, dt);
    Sequential model(fc1, std::make_shared<ReLU>(), fc2, std::make_shared<GELU>("tanh"));
    const Tensor x = Tensor::randn({33, 6}).to(dt);
    const Tensor y = model.forward(x);
    EXPECT_EQ(y.grad_fn()->name(), "LinearGeluTanh");
    sum(y * y).backward();
    std::vector<Tensor> fused_grads;
    for (const auto& [name, p] : model.named_parameters()) fused_grads.push_back(p.grad().clone());
    model.zero_grad();
    const Tensor h = relu(linear(x, fc1->weight, fc1->bias));
    const Tensor want = gelu(linear(h, fc2->weight, fc2->bias), "tanh");
    EXPECT_EQ(h.grad_fn()->name(), "relu");
    sum(want * want).backward();
    const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
    expect_close(y, want, tol, "y");
    size_t i = 0;
    for (const auto& [name, p] : model.named_parameters())
      expect_close(fused_grads[i++], p.grad(), tol, name + " " + dtype_name(dt));
  }
  Sequential exact(std::make_shared<Linear>(6, 5), std::make_shared<GELU>());
  EXPECT_EQ(exact.forward(Tensor::randn({2, 6})).grad_fn()->name(), "gelu");
  Sequential custom(std::make_shared<ScaledLinear>(), std::make_shared<ReLU>());
  EXPECT_EQ(custom.forward(Tensor::randn({2, 6})).grad_fn()->name(), "relu");
  Sequential lone(std::make_shared<ReLU>(), std::make_shared<Linear>(6, 5));
  EXPECT_EQ(lone.forward(Tensor::randn({2, 6})).grad_fn()->name(), "Linear");
  EXPECT_THROW(linear(Tensor::randn({2, 6}), Tensor::randn({5, 6}), Tensor(), "tanh"), ValueError);
}

TEST(Sequential, IndexingAndPushBack) {
  Sequential model;
  model.push_back(std::make_shared<Linear>(3, 4));
  model.push_back(std::make_shared<ReLU>());
  EXPECT_EQ(model.size(), 2u);
  EXPECT_EQ(model[-1]->name(), "ReLU");
  EXPECT_EQ(model.at<Linear>(0)->out_features, 4);
  EXPECT_THROW(model.at<Linear>(1), ValueError);
  EXPECT_THROW(model[2], ValueError);
  EXPECT_EQ(model.forward(Tensor::ones({5, 3})).shape(), (Shape{5, 4}));
}
