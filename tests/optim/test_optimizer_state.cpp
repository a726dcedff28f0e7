// Optimizer state_dict layout (PyTorch's), round trips that continue training identically,
// and every load error.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "optim_test_util.h"

using namespace tandem;
using namespace tandem::optim;
using tandem::test::param64;
using tandem::test::set_grad64;
using tandem::test::values;

namespace {
// Steps opt over (a, b) with gradients that depend on the step index.
void steps(Optimizer& opt, Tensor a, Tensor b, int from, int count) {
  for (int i = from; i < from + count; ++i) {
    set_grad64(a, {0.5 * i, -1.0});
    set_grad64(b, {std::cos(double(i))});
    opt.step();
  }
}
}  // namespace

TEST(OptimizerState, SgdLayoutMatchesPyTorch) {
  Tensor a = param64({1.0, 2.0}), b = param64({3.0});
  SGD opt(std::vector<ParamGroup>{{{a}, {}}, {{b}, {{"lr", 0.01}}}}, {.lr = 0.1, .momentum = 0.9});
  steps(opt, a, b, 1, 2);
  OptimizerStateDict sd = opt.state_dict();
  EXPECT_EQ(sd.state.keys(), (std::vector<std::string>{"0.momentum_buffer", "1.momentum_buffer"}));
  ASSERT_EQ(sd.param_groups.size(), 2u);
  EXPECT_EQ(sd.param_groups[0]["params"], nlohmann::json({0}));
  EXPECT_EQ(sd.param_groups[1]["params"], nlohmann::json({1}));
  EXPECT_DOUBLE_EQ(sd.param_groups[1]["lr"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(sd.param_groups[0]["momentum"].get<double>(), 0.9);
  EXPECT_EQ(sd.param_groups[0]["nesterov"], false);
  // buf after g = (0.5, -1) then (1, -1): 0.9 * 0.5 + 1 = 1.45, -1.9
  auto buf = values(sd.state.at("0.momentum_buffer"));
  EXPECT_NEAR(buf[0], 1.45, 1e-15);
  EXPECT_NEAR(buf[1], -1.9, 1e-15);
}

template <typename Opt, typename Options>
void expect_round_trip_continues_identically(Options o) {
  Tensor a1 = param64({1.0, 2.0}), b1 = param64({3.0});
  Opt first({a1, b1}, o);
  steps(first, a1, b1, 1, 3);
  OptimizerStateDict saved = first.state_dict();

  Tensor a2 = param64(values(a1)), b2 = param64(values(b1));
  Opt second({a2, b2}, Options{});  // different hyper-parameters: the loaded ones must win
  second.load_state_dict(saved);
  EXPECT_EQ(second.param_groups()[0].options, first.param_groups()[0].options);
  steps(first, a1, b1, 4, 3);
  steps(second, a2, b2, 4, 3);
  EXPECT_EQ(values(a1), values(a2));
  EXPECT_EQ(values(b1), values(b2));
}

TEST(OptimizerState, SgdRoundTripContinuesIdentically) {
  expect_round_trip_continues_identically<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
}

TEST(OptimizerState, AdamRoundTripContinuesIdentically) {
  expect_round_trip_continues_identically<Adam>(AdamOptions{.lr = 0.05, .betas = {0.8, 0.9}});
  expect_round_trip_continues_identically<AdamW>(AdamWOptions{.lr = 0.05, .weight_decay = 0.1});
}

TEST(OptimizerState, AdamStateKeysAndStep) {
  Tensor a = param64({1.0, 2.0}), b = param64({3.0});
  Adam opt({a, b});
  steps(opt, a, b, 1, 3);
  auto sd = opt.state_dict();
  EXPECT_EQ(sd.state.keys(), (std::vector<std::string>{"0.step", "0.exp_avg", "0.exp_avg_sq", "1.step", "1.exp_avg",
                                                       "1.exp_avg_sq"}));
  EXPECT_DOUBLE_EQ(sd.state.at("1.step").item(), 3.0);
}

TEST(OptimizerState, LoadErrors) {
  Tensor a = param64({1.0, 2.0}), b = param64({3.0});
  SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  steps(opt, a, b, 1, 1);
  OptimizerStateDict good = opt.state_dict();

  SGD one_param({param64({1.0, 2.0})}, {.lr = 0.1, .momentum = 0.9});
  try {
    one_param.load_state_dict(good);
    FAIL() << "expected StateDictError";
  } catch (const StateDictError& e) {
    EXPECT_NE(std::string(e.what()).find("sizes [2] but this optimizer has [1]"), std::string::npos) << e.what();
  }

  OptimizerStateDict bad_shape = good;
  bad_shape.state.insert("0.momentum_buffer", Tensor::zeros({3}, DType::Float64));
  try {
    opt.load_state_dict(bad_shape);
    FAIL() << "expected StateDictError";
  } catch (const StateDictError& e) {
    EXPECT_NE(std::string(e.what()).find("'0.momentum_buffer': expected shape [2], got [3]"), std::string::npos)
        << e.what();
  }

  OptimizerStateDict bad_index = good;
  bad_index.state.insert("7.momentum_buffer", Tensor::zeros({1}, DType::Float64));
  EXPECT_THROW(opt.load_state_dict(bad_index), StateDictError);

  OptimizerStateDict bad_key = good;
  bad_key.state.insert("momentum", Tensor::zeros({1}, DType::Float64));
  EXPECT_THROW(opt.load_state_dict(bad_key), StateDictError);

  OptimizerStateDict unsupported = good;
  unsupported.param_groups[0]["maximize"] = true;
  EXPECT_THROW(opt.load_state_dict(unsupported), StateDictError);
  OptimizerStateDict pytorch_flags_off = good;  // PyTorch writes these keys; off is fine
  pytorch_flags_off.param_groups[0]["maximize"] = false;
  pytorch_flags_off.param_groups[0]["foreach"] = nullptr;
  EXPECT_NO_THROW(SGD({param64({1.0, 2.0}), param64({3.0})}).load_state_dict(pytorch_flags_off));

  OptimizerStateDict bad_lr = good;
  bad_lr.param_groups[0]["lr"] = -1.0;
  EXPECT_THROW(opt.load_state_dict(bad_lr), ValueError);
  // Nothing changed by the failed loads.
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr(), 0.1);
  EXPECT_EQ(values(opt.state_of(a).at("momentum_buffer")), values(good.state.at("0.momentum_buffer")));
}

TEST(OptimizerState, StateIsCastToTheParameterDtype) {
  Tensor p = Tensor::ones({2}, DType::Float32);
  p.requires_grad_(true);
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  OptimizerStateDict sd;
  sd.state.insert("0.momentum_buffer", Tensor::from_vector(std::vector<double>{1.0, 2.0}, {2}));
  sd.param_groups = nlohmann::json::array({{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.0},
                                            {"weight_decay", 0.0}, {"nesterov", false}, {"params", {0}}}});
  opt.load_state_dict(sd);
  EXPECT_EQ(opt.state_of(p).at("momentum_buffer").dtype(), DType::Float32);
  // Loaded buffer is used (not the first-step copy): buf = 0.9 * (1, 2) + g.
  p.set_grad(Tensor::ones({2}, DType::Float32));
  opt.step();
  auto v = p.to_vector<float>();
  EXPECT_NEAR(v[0], 1.0f - 0.1f * 1.9f, 1e-6);
  EXPECT_NEAR(v[1], 1.0f - 0.1f * 2.8f, 1e-6);
}

TEST(OptimizerState, StateBytesAndClearState) {
  Tensor a = param64({1.0, 2.0}), b = param64({3.0});
  Adam adam({a, b}, AdamOptions{.lr = 0.1});
  EXPECT_EQ(adam.state_bytes(), 0);
  steps(adam, a, b, 1, 2);
  // exp_avg and exp_avg_sq in float64 for 3 elements, a float32 step per parameter.
  EXPECT_EQ(adam.state_bytes(), 2 * 8 * 3 + 4 * 2);
  adam.clear_state();
  EXPECT_EQ(adam.state_bytes(), 0);
  // The next step is a first step again: Adam's first update is lr x sign(g) (bias-corrected).
  set_grad64(a, {0.25, -4.0});
  set_grad64(b, {1.0});
  const std::vector<double> before = values(a);
  adam.step();
  EXPECT_NEAR(values(a)[0], before[0] - 0.1, 1e-7);
  EXPECT_NEAR(values(a)[1], before[1] + 0.1, 1e-7);
  EXPECT_EQ(adam.state_of(a).at("step").item(), 1.0);
}

// ddp_sharded's premise: SGD, Adam and AdamW update each element from its own gradient and state,
// so stepping any split of a parameter into pieces equals stepping it whole.
TEST(OptimizerState, ShardOptimizersStepPiecesAsTheWholeSteps) {
  const auto run = [](const Optimizer& like, bool pieces) {
    Tensor whole = param64({1.0, -2.0, 0.5, 3.0, -0.25});
    Tensor first = param64({1.0, -2.0}), rest = param64({0.5, 3.0, -0.25});
    const nlohmann::json options = like.param_groups().front().options;
    std::unique_ptr<Optimizer> opt = pieces ? like.make_shard_optimizer({{{first, rest}, options}})
                                            : like.make_shard_optimizer({{{whole}, options}});
    EXPECT_EQ(opt->name(), like.name());
    for (int i = 1; i <= 3; ++i) {
      const std::vector<double> g{0.5 * i, -1.0, std::cos(double(i)), 2.0, -0.1 * i};
      if (pieces) {
        set_grad64(first, {g[0], g[1]});
        set_grad64(rest, {g[2], g[3], g[4]});
      } else {
        set_grad64(whole, g);
      }
      opt->step();
    }
    if (!pieces) return values(whole);
    std::vector<double> out = values(first);
    for (double v : values(rest)) out.push_back(v);
    return out;
  };
  Tensor p = param64({0.0});
  SGD sgd({p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  Adam adam({p}, AdamOptions{.lr = 0.05, .weight_decay = 0.02});
  AdamW adamw({p}, AdamWOptions{.lr = 0.05});
  for (const Optimizer* o : std::initializer_list<const Optimizer*>{&sgd, &adam, &adamw}) {
    const std::vector<double> whole = run(*o, false), pieces = run(*o, true);
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_DOUBLE_EQ(pieces[i], whole[i]) << o->name() << " element " << i;
    EXPECT_NE(whole[0], 1.0) << o->name();
  }
}
