// state_dict names and shapes as PyTorch names them, round trips, and every load error.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "tensor/generator.h"

using namespace tandem;
using namespace tandem::nn;

namespace {
// PyTorch twin: nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
//                             nn.Linear(144, 3))
std::shared_ptr<Sequential> small_cnn(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 4, 3), std::make_shared<BatchNorm2d>(4),
                                      std::make_shared<ReLU>(), std::make_shared<Flatten>(),
                                      std::make_shared<Linear>(144, 3));
}

Tensor input() {
  manual_seed(99);
  return Tensor::randn({5, 1, 8, 8});
}

std::string load_error(Module& m, const StateDict& sd, bool strict = true) {
  try {
    m.load_state_dict(sd, strict);
  } catch (const StateDictError& e) {
    return e.what();
  }
  return "no error";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(StateDict, NamesAndShapesMatchPyTorch) {
  auto model = small_cnn(0);
  StateDict sd = model->state_dict();
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"0.weight", {4, 1, 3, 3}}, {"0.bias", {4}},       {"1.weight", {4}},
      {"1.bias", {4}},            {"1.running_mean", {4}}, {"1.running_var", {4}},
      {"1.num_batches_tracked", {}}, {"4.weight", {3, 144}}, {"4.bias", {3}}};
  ASSERT_EQ(sd.size(), expected.size());
  size_t i = 0;
  for (const auto& [name, t] : sd) {
    EXPECT_EQ(name, expected[i].first);
    EXPECT_EQ(t.shape(), expected[i].second) << name;
    EXPECT_EQ(t.dtype(), name == "1.num_batches_tracked" ? DType::Int64 : DType::Float32) << name;
    EXPECT_FALSE(t.requires_grad()) << name;
    ++i;
  }
}

TEST(StateDict, RoundTripIntoAFreshModelGivesIdenticalOutputs) {
  auto trained = small_cnn(1);
  trained->forward(input());  // moves the BN running stats away from their initial values
  trained->forward(input());
  trained->eval();
  const auto want = trained->forward(input()).to_vector<float>();

  auto fresh = small_cnn(2);
  fresh->eval();
  EXPECT_NE(fresh->forward(input()).to_vector<float>(), want);
  LoadResult r = fresh->load_state_dict(trained->state_dict());
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_EQ(fresh->forward(input()).to_vector<float>(), want);
  EXPECT_EQ(fresh->state_dict().at("1.num_batches_tracked").item(), 2.0);

  // Values were copied, not aliased: changing the source leaves the loaded model alone.
  trained->at<Linear>(4)->weight.detach().fill_(0.0);
  EXPECT_EQ(fresh->forward(input()).to_vector<float>(), want);
}

TEST(StateDict, LoadCastsDtype) {
  auto a = small_cnn(3), b = small_cnn(4);
  a->to(DType::Float64);
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(b->at<Linear>(4)->weight.dtype(), DType::Float32);
  EXPECT_EQ(b->at<Linear>(4)->weight.to_vector<float>(), a->at<Linear>(4)->weight.to_vector<float>());
}

TEST(StateDict, MissingKeyIsNamed) {
  auto model = small_cnn(0);
  StateDict sd = model->state_dict();
  sd.erase("4.bias");
  const std::string msg = load_error(*model, sd);
  EXPECT_TRUE(has(msg, "missing key(s): \"4.bias\"")) << msg;
  EXPECT_FALSE(has(msg, "unexpected key(s)")) << msg;
}

TEST(StateDict, UnexpectedKeyIsNamed) {
  auto model = small_cnn(0);
  StateDict sd = model->state_dict();
  sd.insert("5.weight", Tensor::zeros({2}));
  const std::string msg = load_error(*model, sd);
  EXPECT_TRUE(has(msg, "unexpected key(s): \"5.weight\"")) << msg;
  EXPECT_TRUE(has(msg, "strict=false")) << msg;
}

TEST(StateDict, WrongShapeNamesBothShapes) {
  auto model = small_cnn(0);
  StateDict sd = model->state_dict();
  sd.insert("4.weight", Tensor::zeros({2, 144}));
  const std::string msg = load_error(*model, sd);
  EXPECT_TRUE(has(msg, "size mismatch for 4.weight: expected shape [3, 144] (this model), got [2, 144]")) << msg;
}

TEST(StateDict, AllErrorsInOneMessageAndNothingLoaded) {
  auto model = small_cnn(0);
  const auto before = model->at<Linear>(4)->weight.to_vector<float>();
  StateDict sd = small_cnn(5)->state_dict();
  sd.erase("0.weight");
  sd.erase("1.running_var");
  sd.insert("extra.weight", Tensor::zeros({1}));
  sd.insert("4.bias", Tensor::zeros({4}));
  const std::string msg = load_error(*model, sd);
  EXPECT_TRUE(has(msg, "loading state_dict into Sequential")) << msg;
  EXPECT_TRUE(has(msg, "missing key(s): \"0.weight\", \"1.running_var\"")) << msg;
  EXPECT_TRUE(has(msg, "unexpected key(s): \"extra.weight\"")) << msg;
  EXPECT_TRUE(has(msg, "size mismatch for 4.bias: expected shape [3] (this model), got [4]")) << msg;
  EXPECT_EQ(model->at<Linear>(4)->weight.to_vector<float>(), before);
}

TEST(StateDict, NonStrictReturnsKeysButStillRejectsShapes) {
  auto model = small_cnn(0);
  auto source = small_cnn(6);
  StateDict sd = source->state_dict();
  sd.erase("0.bias");
  sd.insert("head.weight", Tensor::zeros({1}));
  LoadResult r = model->load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"0.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"head.weight"}));
  EXPECT_EQ(model->at<Linear>(4)->weight.to_vector<float>(), source->at<Linear>(4)->weight.to_vector<float>());

  sd.insert("0.weight", Tensor::zeros({4, 1, 5, 5}));
  const std::string msg = load_error(*model, sd, /*strict=*/false);
  EXPECT_TRUE(has(msg, "size mismatch for 0.weight")) << msg;
  EXPECT_FALSE(has(msg, "missing key")) << msg;
}
