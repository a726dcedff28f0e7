// The model, optimizer and lr_scheduler config sections: class selection, per-class defaults,
// options a class does not take, required options, and the objects they build.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/config/optimizer_section.h"
#include "expect_error.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/registry.h"

using namespace tandem;

namespace {

ConfigSchema schema() {
  ConfigSchema s;
  s.add_section(models::model_section());
  s.add_section(optimizer_section());
  s.add_section(lr_scheduler_section());
  return s;
}

YAML::Node resolve(const std::vector<std::string>& args) {
  YAML::Node config = parse_args(schema(), args).config;
  models::resolve_model_section(config);
  resolve_optimizer_sections(config);
  return config;
}

std::string at(const YAML::Node& config, const std::string& key) { return get_config_value(config, key).Scalar(); }

}  // namespace

TEST(ModelSection, DefaultsAreTheMlpAndAdam) {
  const YAML::Node c = resolve({});
  EXPECT_EQ(at(c, "model.name"), "mlp");
  EXPECT_EQ(yaml_to_text(get_config_value(c, "model.hidden")), "[1024, 1024]");
  EXPECT_EQ(at(c, "model.dropout"), "0.0");
  EXPECT_EQ(at(c, "optimizer.name"), "Adam");
  EXPECT_EQ(at(c, "optimizer.lr"), "0.001");
  EXPECT_EQ(at(c, "optimizer.weight_decay"), "0.0");
  EXPECT_TRUE(c["lr_scheduler"].IsNull());
  EXPECT_FALSE(c["model"]["batch_norm"]);  // only the chosen class's options remain
}

TEST(ModelSection, SelectorsAndClassDefaults) {
  const YAML::Node c = resolve({"--model=cnn", "--model.batch_norm=true", "--optimizer=adamw",
                                "--lr_scheduler=StepLR", "--lr_scheduler.step_size=5"});
  EXPECT_EQ(at(c, "model.name"), "cnn");
  EXPECT_EQ(at(c, "optimizer.name"), "AdamW");           // canonical spelling
  EXPECT_EQ(at(c, "optimizer.weight_decay"), "0.01");    // AdamW's default, not Adam's
  EXPECT_EQ(at(c, "lr_scheduler.gamma"), "0.1");
  EXPECT_EQ(at(c, "lr_scheduler.interval"), "epoch");
  auto model = models::make_model(c);
  auto* cnn = dynamic_cast<models::CNN*>(model.get());
  ASSERT_NE(cnn, nullptr);
  EXPECT_TRUE(cnn->options.batch_norm);
  auto opt = model->configure_optimizers();
  EXPECT_EQ(opt.optimizer->name(), "AdamW");
  ASSERT_TRUE(opt.scheduler);
  EXPECT_EQ(opt.scheduler->name(), "StepLR");
  EXPECT_EQ(model->hparams["lr_scheduler"]["step_size"], 5);
}

TEST(ModelSection, MlpHiddenFromAFlag) {
  auto model = models::make_model(resolve({"--model.hidden=[512,256]", "--optimizer=SGD", "--optimizer.momentum=0.9"}));
  auto* mlp = dynamic_cast<models::MLP*>(model.get());
  ASSERT_NE(mlp, nullptr);
  EXPECT_EQ(mlp->options.hidden, (std::vector<int64_t>{512, 256}));
  auto opt = model->configure_optimizers();
  EXPECT_EQ(opt.optimizer->name(), "SGD");
  EXPECT_DOUBLE_EQ(opt.optimizer->param_groups()[0].options["momentum"].get<double>(), 0.9);
}

TEST(ModelSection, ErrorsSayWhatIsAllowed) {
  expect_error<ConfigError>([] { resolve({"--model=resnet"}); }, {"--model.name=resnet", "mlp, cnn"});
  expect_error<ConfigError>([] { resolve({"--model=cnn", "--model.hidden=[64]"}); },
                            {"--model.hidden=[64] does not apply to cnn", "cnn takes batch_norm"});
  expect_error<ConfigError>([] { resolve({"--model.hidden=[0, 5]"}); }, {"positive layer widths"});
  expect_error<ConfigError>([] { resolve({"--model.dropout=1.5"}); }, {"--model.dropout=1.5", "[0, 1)"});
  expect_error<ConfigError>([] { resolve({"--model.hiden=[5]"}); }, {"did you mean --model.hidden?"});
  expect_error<ConfigError>([] { resolve({"--optimizer.momentum=0.9"}); },
                            {"does not apply to Adam", "Adam takes lr, betas, eps, weight_decay"});
  expect_error<ConfigError>([] { resolve({"--optimizer.lr=-1"}); }, {"--optimizer.lr=-1", "(0, inf]"});
  expect_error<ConfigError>([] { resolve({"--optimizer.betas=[0.9, 1.0]"}); }, {"--optimizer.betas"});
  expect_error<ConfigError>([] { resolve({"--optimizer=RMSprop"}); }, {"SGD, Adam, AdamW"});
  expect_error<ConfigError>([] { resolve({"--lr_scheduler=StepLR"}); },
                            {"StepLR needs --lr_scheduler.step_size"});
  expect_error<ConfigError>([] { resolve({"--lr_scheduler.gamma=0.5"}); },
                            {"no lr_scheduler is chosen", "--lr_scheduler=NAME"});
  expect_error<ConfigError>([] { resolve({"--lr_scheduler=WarmupCosine", "--lr_scheduler.warmup_iters=5",
                                          "--lr_scheduler.total_iters=5"}); },
                            {"must exceed"});
}

TEST(LrSchedulerSection, CosineWithoutTMaxSpansTheRun) {
  // T_max: null is the trainer's max_epochs (interval epoch) or max_steps (interval step),
  // divided by frequency; without that limit it is a ConfigError asking for T_max.
  const YAML::Node c = resolve({"--lr_scheduler=CosineAnnealingLR"});
  EXPECT_TRUE(get_config_value(c, "lr_scheduler.T_max").IsNull());
  auto optimizer = make_optimizer(c["optimizer"], {Tensor::zeros({1})});
  const SchedulerChoice choice = make_lr_scheduler(c["lr_scheduler"], *optimizer, {.max_epochs = 4, .max_steps = -1});
  ASSERT_TRUE(choice.scheduler);
  std::vector<double> rates;
  for (int epoch = 0; epoch < 4; ++epoch) {
    choice.scheduler->step();
    rates.push_back(optimizer->param_groups()[0].lr());
  }
  // lr * (1 + cos(pi * e / 4)) / 2 after epoch e: 0 at the end of the run.
  const double pi = std::acos(-1.0);
  for (int e = 1; e <= 4; ++e) EXPECT_NEAR(rates[size_t(e - 1)], 1e-3 * (1 + std::cos(pi * e / 4)) / 2, 1e-15) << e;

  const YAML::Node by_step = resolve({"--lr_scheduler=CosineAnnealingLR", "--lr_scheduler.interval=step",
                                      "--lr_scheduler.frequency=2"});
  auto stepped = make_optimizer(by_step["optimizer"], {Tensor::zeros({1})});
  const SchedulerChoice per_step = make_lr_scheduler(by_step["lr_scheduler"], *stepped, {.max_epochs = 3, .max_steps = 10});
  for (int i = 0; i < 5; ++i) per_step.scheduler->step();  // 10 steps / frequency 2 = T_max 5
  EXPECT_NEAR(stepped->param_groups()[0].lr(), 0.0, 1e-15);
  expect_error<ConfigError>([&] { make_lr_scheduler(by_step["lr_scheduler"], *stepped, {.max_epochs = 3, .max_steps = -1}); },
                            {"--lr_scheduler.T_max is null", "max_steps"});
  expect_error<ConfigError>([&] { make_lr_scheduler(c["lr_scheduler"], *optimizer, {}); },
                            {"--lr_scheduler.T_max is null", "--trainer.max_epochs"});
}

TEST(ModelSection, ResolvedConfigIsAFixedPoint) {
  // What --print_config prints must read back to the same tree.
  YAML::Node c = resolve({"--model=cnn", "--optimizer=SGD", "--lr_scheduler=CosineAnnealingLR",
                          "--lr_scheduler.T_max=10"});
  YAML::Node again = YAML::Clone(c);
  models::resolve_model_section(again);
  resolve_optimizer_sections(again);
  EXPECT_EQ(config_to_yaml(again), config_to_yaml(c));
}

TEST(ModelRegistry, ProgramsAddTheirOwnModels) {
  models::register_model({{"tiny", "a one-layer test model", {}},
                          [](const YAML::Node&, const models::OptimizationConfig& opt) {
                            return std::make_shared<models::MLP>(models::MLPOptions{.hidden = {4}}, opt);
                          }});
  auto model = models::make_model(resolve({"--model=tiny"}));
  EXPECT_EQ(dynamic_cast<models::MLP*>(model.get())->options.hidden, (std::vector<int64_t>{4}));
}
