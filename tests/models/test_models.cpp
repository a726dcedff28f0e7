// The issue's models: exact layer shapes and parameter counts (checked by hand below), PyTorch
// state_dict names, both input layouts, the logged metric names' inputs, and the optimizer the
// CLI's sections build.
//   MLP 784-1024-1024-10: 784*1024+1024 + 1024*1024+1024 + 1024*10+10 = 803,840 + 1,049,600
//                         + 10,250 = 1,863,690
//   CNN: conv1 32*1*9+32 = 320, conv2 64*32*9+64 = 18,496, fc1 3136*128+128 = 401,536,
//        fc2 128*10+10 = 1,290: 421,642 (+ 2*(32+64) = 192 BN weights and biases with batch_norm)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "engine/config/optimizer_section.h"
#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "engine/data/tensor_dataset.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/trainer/trainer.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;
using namespace tandem::models;

namespace {

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

Shape shape_of(const nn::Module& m, const std::string& key) { return m.state_dict().at(key).shape(); }

data::Batch random_batch(int64_t b, bool flat) {
  Tensor x = flat ? Tensor::randn({b, 784}) : Tensor::randn({b, 1, 28, 28});
  std::vector<int64_t> y(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) y[size_t(i)] = i % 10;
  return {x, Tensor::from_vector(y, {b})};
}

}  // namespace

TEST(MLP, DefaultIs784_1024_1024_10) {
  MLP mlp;
  EXPECT_EQ(count_parameters(mlp), 1863690);
  EXPECT_EQ(mlp.state_dict().keys(), (std::vector<std::string>{"net.0.weight", "net.0.bias", "net.2.weight",
                                                                "net.2.bias", "net.4.weight", "net.4.bias"}));
  EXPECT_EQ(shape_of(mlp, "net.0.weight"), (Shape{1024, 784}));  // Linear weight [out, in]
  EXPECT_EQ(shape_of(mlp, "net.2.weight"), (Shape{1024, 1024}));
  EXPECT_EQ(shape_of(mlp, "net.4.weight"), (Shape{10, 1024}));
  EXPECT_EQ(mlp.name(), "MLP");
}

TEST(MLP, TakesImagesAndFlatInputs) {
  MLP mlp({.hidden = {64}});
  EXPECT_EQ(mlp.forward(Tensor::randn({3, 1, 28, 28})).shape(), (Shape{3, 10}));
  EXPECT_EQ(mlp.forward(Tensor::randn({3, 784})).shape(), (Shape{3, 10}));
}

TEST(MLP, HiddenSizesAndDropout) {
  MLP mlp({.hidden = {512, 256}, .dropout = 0.25});
  // Linear ReLU Dropout Linear ReLU Dropout Linear
  EXPECT_EQ(mlp.net->size(), 7u);
  EXPECT_EQ(shape_of(mlp, "net.3.weight"), (Shape{256, 512}));
  EXPECT_EQ(shape_of(mlp, "net.6.weight"), (Shape{10, 256}));
  EXPECT_EQ(count_parameters(mlp), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(mlp.hparams["hidden"], (nlohmann::json{512, 256}));
  EXPECT_DOUBLE_EQ(mlp.hparams["dropout"].get<double>(), 0.25);
  EXPECT_THROW(MLP({.hidden = {}}), ValueError);
  EXPECT_THROW(MLP({.hidden = {16}, .dropout = 1.0}), ValueError);
}

TEST(CNN, LayersAndParameterCount) {
  CNN cnn;
  EXPECT_EQ(count_parameters(cnn), 421642);
  EXPECT_EQ(shape_of(cnn, "net.0.weight"), (Shape{32, 1, 3, 3}));
  EXPECT_EQ(shape_of(cnn, "net.3.weight"), (Shape{64, 32, 3, 3}));
  EXPECT_EQ(shape_of(cnn, "net.7.weight"), (Shape{128, 3136}));
  EXPECT_EQ(shape_of(cnn, "net.9.weight"), (Shape{10, 128}));
  EXPECT_EQ(cnn.state_dict().keys().size(), 8u);
}

TEST(CNN, BatchNormAfterEachConv) {
  CNN cnn({.batch_norm = true});
  EXPECT_EQ(count_parameters(cnn), 421642 + 2 * (32 + 64));
  EXPECT_EQ(shape_of(cnn, "net.1.running_mean"), (Shape{32}));
  EXPECT_EQ(shape_of(cnn, "net.5.running_var"), (Shape{64}));
  EXPECT_TRUE(cnn.state_dict().contains("net.5.num_batches_tracked"));
  EXPECT_EQ(shape_of(cnn, "net.9.weight"), (Shape{128, 3136}));
  EXPECT_EQ(cnn.hparams["batch_norm"], true);
}

TEST(CNN, TakesImagesAndFlatInputs) {
  CNN cnn;
  EXPECT_EQ(cnn.forward(Tensor::randn({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  EXPECT_EQ(cnn.forward(Tensor::randn({2, 784})).shape(), (Shape{2, 10}));
  EXPECT_EQ(cnn.forward(Tensor::randn({2, 28, 28})).shape(), (Shape{2, 10}));
  EXPECT_THROW(cnn.forward(Tensor::randn({2, 100})), ShapeError);
}

TEST(Models, SameSeedSameWeights) {
  manual_seed(7);
  MLP a({.hidden = {32}});
  manual_seed(7);
  MLP b({.hidden = {32}});
  EXPECT_EQ(a.net->at<nn::Linear>(0)->weight.to_vector<float>(), b.net->at<nn::Linear>(0)->weight.to_vector<float>());
}

TEST(Models, AccuracyCountsArgmaxHits) {
  Tensor logits = Tensor::from_vector<float>({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f, 0.6f, 0.4f}, {4, 2});
  Tensor target = Tensor::from_vector<int64_t>({1, 0, 0, 0}, {4});
  EXPECT_DOUBLE_EQ(accuracy(logits, target).item(), 0.75);
}

TEST(Models, DefaultOptimizerIsAdam1e3) {
  MLP mlp({.hidden = {8}});
  auto config = mlp.configure_optimizers();
  ASSERT_TRUE(config.optimizer);
  EXPECT_EQ(config.optimizer->name(), "Adam");
  EXPECT_DOUBLE_EQ(config.optimizer->param_groups()[0].lr(), 1e-3);
  EXPECT_FALSE(config.scheduler);
  EXPECT_EQ(mlp.hparams["optimizer"]["name"], "Adam");
  EXPECT_TRUE(mlp.hparams["lr_scheduler"].is_null());
}

TEST(Models, TrainingStepsLowerTheLoss) {
  manual_seed(0);
  MLP mlp({.hidden = {64}});
  data::Batch batch = random_batch(32, false);
  auto config = mlp.configure_optimizers();
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    Tensor loss = mlp.training_step(batch, step);  // no trainer attached: log is a no-op
    (step == 0 ? first : last) = loss.item();
    config.optimizer->zero_grad();
    loss.backward();
    config.optimizer->step();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, first * 0.5);
  mlp.eval();
  mlp.validation_step(batch, 0);  // logs only; must not throw without a trainer
  mlp.test_step(random_batch(4, true), 0);
}

namespace {

// 24 training and 16 evaluation images of 28x28 whose class is which quarter of the image is
// brightest (classes 0..3 of 10), in batches of 8.
class QuadrantImages : public data::DataModule {
 public:
  void setup(const std::string&) override {
    if (!train) {
      train = make(24, 0);
      eval = make(16, 100);
    }
  }
  std::shared_ptr<data::DataLoader> train_dataloader() override { return loader(train, true); }
  std::shared_ptr<data::DataLoader> val_dataloader() override { return loader(eval, false); }
  std::shared_ptr<data::DataLoader> test_dataloader() override { return loader(eval, false); }

 private:
  static std::shared_ptr<data::TensorDataset> make(int64_t n, int64_t offset) {
    std::vector<float> x(size_t(n * 784), 0.0f);
    std::vector<int64_t> y;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = (i + offset) % 4;
      y.push_back(label);
      for (int64_t r = 0; r < 28; ++r) {
        for (int64_t c = 0; c < 28; ++c) {
          const int64_t quadrant = (r / 14) * 2 + c / 14;
          x[size_t(i * 784 + r * 28 + c)] = quadrant == label ? 1.0f : 0.1f * float((r + c + i) % 3);
        }
      }
    }
    return std::make_shared<data::TensorDataset>(Tensor::from_vector(x, {n, 1, 28, 28}), Tensor::from_vector(y, {n}));
  }
  static std::shared_ptr<data::DataLoader> loader(std::shared_ptr<data::TensorDataset> d, bool shuffle) {
    data::DataLoaderOptions o;
    o.batch_size = 8;
    o.shuffle = shuffle;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(d, o);
  }
  std::shared_ptr<data::TensorDataset> train, eval;
};

std::set<std::string> keys_of(const std::map<std::string, double>& m) {
  std::set<std::string> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}

// A quiet CPU trainer's options, writing under root.
trainer::TrainerOptions quiet_options(const std::filesystem::path& root, int64_t max_epochs) {
  trainer::TrainerOptions o;
  o.accelerator = "cpu";
  o.devices = 1;
  o.default_root_dir = root.string();
  o.enable_progress_bar = o.enable_model_summary = o.enable_checkpointing = false;
  o.max_epochs = max_epochs;
  return o;
}

// Fit then test through the Trainer: the names each model logs, and that training learns.
void expect_logged_names(trainer::LightningModule& model) {
  const auto root = std::filesystem::temp_directory_path() / ("tandem_models_" + model.name());
  std::filesystem::remove_all(root);
  const trainer::TrainerOptions o = quiet_options(root, 6);
  trainer::Trainer trainer(o);
  QuadrantImages dm;
  trainer.fit(model, dm);
  EXPECT_EQ(keys_of(trainer.callback_metrics()), (std::set<std::string>{"train_loss", "val_loss", "val_acc"}));
  const auto results = trainer.test(model, dm, "", false);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(keys_of(results[0]), (std::set<std::string>{"test_loss", "test_acc"}));
  EXPECT_GE(results[0].at("test_acc"), 0.75) << model.name();  // chance is 0.25
  std::filesystem::remove_all(root);
}

}  // namespace

TEST(Models, MlpLogsTheIssuesMetricNamesThroughTheTrainer) {
  manual_seed(1);
  MLP mlp({.hidden = {32}, .dropout = 0.1});
  expect_logged_names(mlp);
}

TEST(Models, CnnWithBatchNormLogsTheIssuesMetricNamesThroughTheTrainer) {
  manual_seed(1);
  CNN cnn({.batch_norm = true});
  expect_logged_names(cnn);
  // Training moved the running statistics that evaluation used.
  const auto mean = cnn.state_dict().at("net.1.running_mean").to_vector<float>();
  EXPECT_NE(mean, std::vector<float>(mean.size(), 0.0f));
  EXPECT_GT(cnn.state_dict().at("net.1.num_batches_tracked").to_vector<int64_t>()[0], 0);
}

TEST(Models, CosineOverTheRunEndsAtEtaMinAfterMaxEpochs) {
  YAML::Node config(YAML::NodeType::Map);
  config["optimizer"]["name"] = "Adam";
  config["lr_scheduler"]["name"] = "CosineAnnealingLR";
  resolve_optimizer_sections(config);  // T_max stays null: the trainer's max_epochs
  manual_seed(2);
  MLP mlp({.hidden = {16}}, {config["optimizer"], config["lr_scheduler"]});
  const auto root = std::filesystem::temp_directory_path() / "tandem_models_cosine";
  trainer::TrainerOptions o = quiet_options(root, 3);
  o.limit_val_batches = 0;
  trainer::Trainer trainer(o);
  QuadrantImages dm;
  trainer.fit(mlp, dm);
  EXPECT_EQ(trainer.lr_scheduler()->last_epoch(), 3);
  EXPECT_NEAR(trainer.optimizer()->param_groups()[0].lr(), 0.0, 1e-15);  // cos(pi) at T_max = 3
  std::filesystem::remove_all(root);
}
