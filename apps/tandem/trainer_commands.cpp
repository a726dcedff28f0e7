// `tandem fit|validate|test|predict`: LightningCLI's subcommands. Each parses the flags and
// --config files into one resolved tree (run_config.h), and with --print_config stops there;
// otherwise it seeds, builds the model, the data module and the Trainer from the tree, and runs
// the stage. Configuration problems surface as ConfigError (exit 2) before any data is read;
// missing data, unreadable checkpoints and failures while training are runtime errors (exit 1).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/tandem/run_config.h"
#include "apps/tandem/subcommands.h"
#include "engine/config/config_args.h"
#include "engine/config/data_section.h"
#include "engine/ops/ops.h"
#include "engine/tensor/generator.h"
#include "engine/trainer/trainer.h"
#include "models/registry.h"

namespace tandem::cli {

namespace {

const std::vector<AppFlag>& predict_flags() {
  static const std::vector<AppFlag> flags{{"predictions", "file for index,class lines", true}};
  return flags;
}

std::string ckpt_path_of(const YAML::Node& config) {
  const YAML::Node v = get_config_value(config, "ckpt_path");
  return v.IsNull() ? "" : v.Scalar();
}

// LightningCLI's SaveConfigCallback: the resolved config next to the run's logs, so
// `tandem test --config <log_dir>/config.yaml --ckpt_path=...` rebuilds the same model.
void save_config(const YAML::Node& config, const std::string& log_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (log_dir.empty() || !fs::is_directory(log_dir, ec)) return;
  std::ofstream out(fs::path(log_dir) / "config.yaml");
  out << config_to_yaml(config);
}

// index,class for every example predict_step saw (its logits' argmax).
void write_predictions(const std::vector<Tensor>& outputs, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw DataError("cannot write predictions to " + path + "; check that the directory exists and is writable");
  out << "index,class\n";
  int64_t index = 0;
  for (const Tensor& logits : outputs) {
    for (int64_t c : argmax(logits.to(Device::cpu()), 1).to_vector<int64_t>()) out << index++ << "," << c << "\n";
  }
  std::cout << "tandem predict: wrote " << index << " predictions to " << path << "\n";
}

int run_stage(const std::string& stage, const std::vector<std::string>& args) {
  const ConfigSchema schema = make_run_schema();
  const ParsedArgs parsed = parse_args(schema, args, stage == "predict" ? predict_flags() : std::vector<AppFlag>{});
  if (parsed.help) {
    std::cout << run_help(stage, schema);
    return 0;
  }
  YAML::Node config = YAML::Clone(parsed.config);
  resolve_run_config(config);
  if (parsed.print_config) {
    std::cout << config_to_yaml(config);
    return 0;
  }
  // Everything that can be a configuration error is built before any data is read.
  const YAML::Node seed = get_config_value(config, "seed_everything");
  if (!seed.IsNull()) manual_seed(seed.as<uint64_t>());
  trainer::TrainerOptions trainer_options = trainer::trainer_options_from_config(config);
  const data::FashionMNISTOptions data_options = data_options_from_config(config);
  std::shared_ptr<trainer::LightningModule> model = models::make_model(config);
  data::FashionMNISTDataModule datamodule(data_options);
  trainer::Trainer trainer(std::move(trainer_options));
  const std::string ckpt_path = ckpt_path_of(config);

  if (stage == "fit") {
    trainer.fit(*model, datamodule, ckpt_path);
    save_config(config, trainer.log_dir());
    if (trainer.is_global_zero()) {
      std::cout << tandem::trainer::metrics_table("Fit metric", trainer.callback_metrics());
      std::cout << "logs and checkpoints: " << trainer.log_dir() << "\n";
    }
  } else if (stage == "validate") {
    trainer.validate(*model, datamodule, ckpt_path);
  } else if (stage == "test") {
    trainer.test(*model, datamodule, ckpt_path);
  } else {
    const std::vector<Tensor> outputs = trainer.predict(*model, datamodule, ckpt_path);
    std::string path = (std::filesystem::path(trainer.default_root_dir()) / "predictions.csv").string();
    if (auto it = parsed.app_flags.find("predictions"); it != parsed.app_flags.end()) path = it->second.back();
    write_predictions(outputs, path);
  }
  return 0;
}

}  // namespace

int run_fit(const std::vector<std::string>& args) { return run_stage("fit", args); }
int run_validate(const std::vector<std::string>& args) { return run_stage("validate", args); }
int run_test(const std::vector<std::string>& args) { return run_stage("test", args); }
int run_predict(const std::vector<std::string>& args) { return run_stage("predict", args); }

}  // namespace tandem::cli
