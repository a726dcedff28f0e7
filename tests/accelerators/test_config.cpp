// The configuration layer: dotted flags, lists, --config files with flags on top, unknown keys
// with suggestions, bad values with what is allowed, and --print_config's YAML.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "base/edit_distance.h"
#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/trainer/trainer_section.h"
#include "tests/accelerators/expect_error.h"

using tandem::ConfigError;
using tandem::get_config_value;
using tandem::parse_args;

namespace {
tandem::ParsedArgs parse(std::vector<std::string> args) {
  return parse_args(tandem::make_trainer_schema(), args, {{"plugin", "load a plugin", true}});
}
std::string str(const YAML::Node& config, const std::string& key) { return get_config_value(config, key).Scalar(); }

// A YAML file in the test's temp dir, removed afterwards.
struct TempYaml {
  std::string path;
  explicit TempYaml(const std::string& text, const std::string& name = "run.yaml")
      : path(testing::TempDir() + "tandem_" + std::to_string(getpid()) + "_" + name) {
    std::ofstream(path) << text;
  }
  ~TempYaml() { std::remove(path.c_str()); }
};
}  // namespace

TEST(EditDistance, Basics) {
  EXPECT_EQ(tandem::edit_distance("devices", "devices"), 0u);
  EXPECT_EQ(tandem::edit_distance("devics", "devices"), 1u);
  EXPECT_EQ(tandem::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(tandem::closest_match("trainer.devics", {"trainer.devices", "trainer.strategy"}), "trainer.devices");
  EXPECT_EQ(tandem::closest_match("zzzzzz", {"trainer.devices"}), "");
}

TEST(ConfigArgs, DefaultsAreLightnings) {
  auto p = parse({});
  EXPECT_EQ(str(p.config, "trainer.accelerator"), "auto");
  EXPECT_EQ(str(p.config, "trainer.devices"), "auto");
  EXPECT_EQ(str(p.config, "trainer.strategy"), "auto");
  EXPECT_EQ(str(p.config, "trainer.num_nodes"), "1");
  EXPECT_EQ(str(p.config, "trainer.precision"), "32-true");
  EXPECT_EQ(str(p.config, "trainer.gradient_clip_algorithm"), "norm");
  EXPECT_TRUE(get_config_value(p.config, "trainer.max_epochs").IsNull());
}

TEST(ConfigArgs, FlagForms) {
  auto p = parse({"--trainer.devices=2", "--trainer.strategy", "ddp", "--trainer.precision=bf16"});
  EXPECT_EQ(str(p.config, "trainer.devices"), "2");
  EXPECT_EQ(str(p.config, "trainer.strategy"), "ddp");
  auto opts = tandem::hardware_options_from_config(p.config);
  EXPECT_EQ(opts.devices.kind(), tandem::DevicesSpec::Kind::Int);
  EXPECT_EQ(opts.devices.as_int(), 2);
  EXPECT_EQ(opts.precision.str(), "bf16");
}

TEST(ConfigArgs, DevicesStringAndList) {
  auto s = tandem::hardware_options_from_config(parse({"--trainer.devices", "1, 3"}).config);
  EXPECT_EQ(s.devices.kind(), tandem::DevicesSpec::Kind::String);
  EXPECT_EQ(s.devices.as_string(), "1, 3");
  auto l = tandem::hardware_options_from_config(parse({"--trainer.devices=[0,1]"}).config);
  EXPECT_EQ(l.devices.kind(), tandem::DevicesSpec::Kind::List);
  EXPECT_EQ(l.devices.as_list(), (std::vector<int>{0, 1}));
  // A list item that is not an integer is left to the accelerator, whose error can also say
  // what the machine has (test_plan_cli.cpp: InvalidDevices).
  auto text = tandem::hardware_options_from_config(parse({"--trainer.devices=[0, x]"}).config);
  EXPECT_EQ(text.devices.kind(), tandem::DevicesSpec::Kind::List);
  EXPECT_EQ(text.devices.non_integer_item(), "x");
  auto neg = tandem::hardware_options_from_config(parse({"--trainer.devices=-1"}).config);
  EXPECT_EQ(neg.devices.as_int(), -1);
}

TEST(ConfigArgs, UnknownFlagSuggestsClosest) {
  expect_error<ConfigError>([] { parse({"--trainer.devics=2"}); },
                            {"unknown flag --trainer.devics", "did you mean --trainer.devices?"});
  expect_error<ConfigError>([] { parse({"--trainer.num_node=2"}); }, {"did you mean --trainer.num_nodes?"});
  expect_error<ConfigError>([] { parse({"--plugn=x.so"}); }, {"did you mean --plugin?"});
  expect_error<ConfigError>([] { parse({"--qqqqqqqq=1"}); }, {"unknown flag --qqqqqqqq", "trainer.*"});
}

TEST(ConfigArgs, BadValuesSayWhatIsAllowed) {
  expect_error<ConfigError>([] { parse({"--trainer.num_nodes=abc"}); }, {"--trainer.num_nodes=abc", "expected an integer"});
  expect_error<ConfigError>([] { parse({"--trainer.num_nodes=0"}); }, {"positive integer"});
  expect_error<ConfigError>([] { parse({"--trainer.precision=8"}); }, {"allowed", "bf16-mixed"});
  expect_error<ConfigError>([] { parse({"--trainer.gradient_clip_algorithm=clamp"}); }, {"one of norm, value"});
  expect_error<ConfigError>([] { parse({"--trainer.enable_checkpointing=maybe"}); }, {"true or false"});
  expect_error<ConfigError>([] { parse({"--trainer.allow_tf32=maybe"}); }, {"--trainer.allow_tf32=maybe", "true or false"});
  expect_error<ConfigError>([] { parse({"--trainer.cuda_graph=sometimes"}); }, {"--trainer.cuda_graph=sometimes", "true or false"});
  expect_error<ConfigError>([] { parse({"--trainer.devices={a: 1}"}); }, {"expected an int"});
  expect_error<ConfigError>([] { parse({"--trainer.devices=[[0]]"}); }, {"expected an int"});
  expect_error<ConfigError>([] { parse({"--trainer.max_epochs=-5"}); }, {">= -1"});
  expect_error<ConfigError>([] { parse({"--trainer.limit_train_batches=lots"}); }, {"count or a float fraction"});
  // Scalars the kind check used to accept but yaml-cpp cannot read as that kind (fuzz findings):
  // 09 (octal to yaml-cpp), 010 (8 to yaml-cpp, 10 to a person), inf (yaml-cpp spells it .inf),
  // tRUE (not one of yaml-cpp's spellings of true).
  expect_error<ConfigError>([] { parse({"--trainer.max_epochs=09"}); }, {"--trainer.max_epochs=09", "expected an integer"});
  expect_error<ConfigError>([] { parse({"--trainer.max_epochs=010"}); }, {"--trainer.max_epochs=010", "expected an integer"});
  expect_error<ConfigError>([] { parse({"--trainer.gradient_clip_val=inf"}); }, {"--trainer.gradient_clip_val=inf"});
  expect_error<ConfigError>([] { parse({"--trainer.allow_tf32=tRUE"}); }, {"--trainer.allow_tf32=tRUE", "true or false"});
  EXPECT_EQ(parse({"--trainer.max_epochs=10", "--trainer.allow_tf32=True"}).config["trainer"]["max_epochs"].as<int>(), 10);
}

TEST(ConfigArgs, UsageErrors) {
  expect_error<ConfigError>([] { parse({"fit"}); }, {"unexpected argument 'fit'"});
  expect_error<ConfigError>([] { parse({"--trainer.devices"}); }, {"needs a value"});
  expect_error<ConfigError>([] { parse({"--trainer=2"}); }, {"is a section"});
  expect_error<ConfigError>([] { parse({"--print_config=yes"}); }, {"takes no value"});
}

TEST(ConfigArgs, NullableOptions) {
  auto p = parse({"--trainer.gradient_clip_val=0.5", "--trainer.max_epochs=null"});
  EXPECT_EQ(str(p.config, "trainer.gradient_clip_val"), "0.5");
  EXPECT_TRUE(get_config_value(p.config, "trainer.max_epochs").IsNull());
}

TEST(ConfigArgs, AppFlagsAndSwitches) {
  auto p = parse({"--plugin=a.so", "--plugin", "b.so", "--print_config", "--help"});
  EXPECT_EQ(p.app_flags.at("plugin"), (std::vector<std::string>{"a.so", "b.so"}));
  EXPECT_TRUE(p.print_config);
  EXPECT_TRUE(p.help);
}

TEST(ConfigFile, FlagsOverrideFileWhereverTheyAppear) {
  TempYaml file("trainer:\n  accelerator: cpu\n  devices: 4\n  precision: 16\n");
  auto p = parse({"--trainer.devices=2", "--config", file.path});
  EXPECT_EQ(str(p.config, "trainer.accelerator"), "cpu");
  EXPECT_EQ(str(p.config, "trainer.devices"), "2");
  EXPECT_EQ(str(p.config, "trainer.precision"), "16");
  EXPECT_EQ(p.config_files, (std::vector<std::string>{file.path}));
}

TEST(ConfigFile, ListsAndLaterFilesWin) {
  TempYaml a("trainer:\n  devices: [1, 3]\n  strategy: dp\n", "a.yaml");
  TempYaml b("trainer:\n  strategy: ddp\n", "b.yaml");
  auto p = parse({"--config", a.path, "--config=" + b.path});
  auto opts = tandem::hardware_options_from_config(p.config);
  EXPECT_EQ(opts.devices.as_list(), (std::vector<int>{1, 3}));
  EXPECT_EQ(opts.strategy, "ddp");
}

TEST(ConfigFile, Errors) {
  TempYaml typo("trainer:\n  devics: 2\n", "typo.yaml");
  expect_error<ConfigError>([&] { parse({"--config", typo.path}); },
                            {typo.path, "unknown key trainer.devics", "did you mean trainer.devices?"});
  TempYaml bad("trainer:\n  num_nodes: two\n", "bad.yaml");
  expect_error<ConfigError>([&] { parse({"--config", bad.path}); }, {bad.path, "trainer.num_nodes=two", "integer"});
  TempYaml broken("trainer: [unclosed\n", "broken.yaml");
  expect_error<ConfigError>([&] { parse({"--config", broken.path}); }, {broken.path, "not valid YAML"});
  expect_error<ConfigError>([] { parse({"--config", "/nonexistent/run.yaml"}); }, {"/nonexistent/run.yaml", "cannot open"});
  TempYaml scalar("42\n", "scalar.yaml");
  expect_error<ConfigError>([&] { parse({"--config", scalar.path}); }, {"top level must be a mapping"});
  // Keys that are lists (a fuzz finding: they threw YAML::BadConversion), at the top and inside a section.
  TempYaml list_key("trainer:\n  ? [a, b]\n  : 1\n", "list_key.yaml");
  expect_error<ConfigError>([&] { parse({"--config", list_key.path}); },
                            {"--config " + list_key.path + ": the key at line 2 is [a, b]", "option names"});
  TempYaml top_list_key("? [trainer]\n: 1\n", "top_list_key.yaml");
  expect_error<ConfigError>([&] { parse({"--config", top_list_key.path}); }, {"the key at line 1 is [trainer]"});
}

TEST(PrintConfig, RoundTripsThroughAFile) {
  auto p = parse({"--trainer.devices", "1, 3", "--trainer.limit_val_batches=0.25", "--trainer.callbacks=[a, b]"});
  const std::string yaml = tandem::config_to_yaml(p.config);
  EXPECT_NE(yaml.find("trainer:"), std::string::npos);
  EXPECT_NE(yaml.find("limit_train_batches: 1.0"), std::string::npos);  // a fraction, not a count
  TempYaml file(yaml, "printed.yaml");
  auto again = parse({"--config", file.path});
  EXPECT_EQ(tandem::config_to_yaml(again.config), yaml);
}

TEST(Schema, SectionsCanBeRegistered) {
  tandem::ConfigSchema schema = tandem::make_trainer_schema();
  tandem::SectionSpec model;
  model.name = "model";
  model.selector = "name";
  model.open = true;
  tandem::OptionSpec name;
  name.name = "name";
  name.default_value = YAML::Node("mlp");
  model.options.push_back(name);
  schema.add_section(model);
  tandem::OptionSpec seed;
  seed.name = "seed_everything";
  seed.kind = tandem::ValueKind::Int;
  seed.default_value = YAML::Node(0);
  schema.add_option(seed);
  auto p = parse_args(schema, {"--model=cnn", "--model.hidden=[512,256]", "--seed_everything=42"});
  EXPECT_EQ(str(p.config, "model.name"), "cnn");
  EXPECT_TRUE(get_config_value(p.config, "model.hidden").IsSequence());
  EXPECT_EQ(str(p.config, "seed_everything"), "42");
  expect_error<ConfigError>([&] { schema.add_section(model); }, {"already declared"});
  expect_error<ConfigError>([&] { parse_args(schema, {"--seed_everythin=1"}); }, {"did you mean --seed_everything?"});
}
