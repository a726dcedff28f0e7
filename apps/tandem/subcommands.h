// The `tandem` program's subcommands. Each takes the arguments after its name and returns the
// process exit code; errors are thrown as typed tandem::Error and mapped to exit codes by main
// (ConfigError: 2, anything else: 1).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/data/data_module.h"
#include "engine/module/lightning_module.h"
#include "engine/trainer/callback.h"

namespace tandem::cli {

// The whole command line: `program` is argv[0], `args` the rest. Returns the exit code.
// A user program may register accelerators (tandem::accelerator_registry().add) first.
int run_cli(const std::string& program, const std::vector<std::string>& args);

// argv[0] as run_cli got it: `tandem plan` prints launch commands that run this program, so a
// user program with its own accelerators launches itself, not the stock binary.
const std::string& invoked_program();

struct Subcommand {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

// `tandem plan`: resolve the trainer's hardware flags and print the plan as one JSON object.
int run_plan(const std::vector<std::string>& args);

// `tandem fit|validate|test|predict`: LightningCLI's subcommands (trainer_commands.cpp).
int run_fit(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);
int run_test(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);

// `tandem generate`: sample text from a GPT checkpoint (generate_command.cpp).
int run_generate(const std::vector<std::string>& args);

// The data module the config chooses (trainer_commands.cpp). Text feeds token models only; its
// block and vocabulary sizes come from the model (a block_size above the model's is a ConfigError).
std::shared_ptr<data::DataModule> make_data_module(const YAML::Node& config, trainer::LightningModule& model);

// Callbacks a user program adds to every `fit` of its command line, besides the configured
// ones (e.g. its own monitoring); each factory is called once per fit, in every rank.
using CallbackFactory = std::function<std::vector<std::shared_ptr<trainer::Callback>>()>;
void add_fit_callbacks(CallbackFactory factory);

// Every subcommand, in the order `tandem --help` lists them.
const std::vector<Subcommand>& subcommands();

// Quotes one argument for a POSIX shell when it needs it ("1, 3" -> '1, 3').
std::string shell_quote(const std::string& arg);

}  // namespace tandem::cli
