// `tandem fit|validate|test|predict`: LightningCLI's subcommands. Each parses the flags and
// --config files into one resolved tree (run_config.h), and with --print_config stops there;
// otherwise it seeds, builds the model, the data module and the Trainer from the tree, and runs
// the stage. Configuration problems surface as ConfigError (exit 2) before any data is read;
// missing data, unreadable checkpoints and failures while training are runtime errors (exit 1).
#include <filesystem>
#include <iostream>

#include "apps/tandem/restart_agent.h"
#include "apps/tandem/run_config.h"
#include "apps/tandem/subcommands.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/config/config_args.h"
#include "engine/config/data_section.h"
#include "engine/io/atomic_file.h"
#include "engine/trainer/callbacks/slurm_requeue.h"
#include "engine/trainer/job_failure.h"
#include "engine/trainer/trainer.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

namespace tandem::cli {

namespace {

std::vector<AppFlag> stage_flags(const std::string& stage) {
  if (stage == "predict") return {{"predictions", "file for index,class lines", true}};
  return {};
}

std::string ckpt_path_of(const YAML::Node& config) {
  const YAML::Node v = get_config_value(config, "ckpt_path");
  return v.IsNull() ? "" : v.Scalar();
}

// The run a --config file points at: a config.yaml that fit saved in its log directory
// (lightning_logs/version_N), whose checkpoints ckpt_path=last|best then mean; "" otherwise.
std::string run_dir_of(const std::vector<std::string>& config_files) {
  if (config_files.empty()) return "";
  const std::filesystem::path dir = std::filesystem::path(config_files.back()).parent_path();
  return dir.filename().string().rfind("version_", 0) == 0 ? dir.string() : "";
}

// LightningCLI's SaveConfigCallback: the resolved config next to the run's logs, so
// `tandem test --config <log_dir>/config.yaml --ckpt_path=...` rebuilds the same model. Written
// when fit sets up (rank 0), so a run that is interrupted or fails still has it.
class SaveConfigCallback : public trainer::Callback {
 public:
  explicit SaveConfigCallback(YAML::Node config) : config_(std::move(config)) {}
  std::string name() const override { return "SaveConfigCallback"; }
  void setup(trainer::Trainer& trainer, trainer::LightningModule&, const std::string& stage) override {
    if (stage != "fit" || !trainer.is_global_zero()) return;
    const std::filesystem::path dir = trainer.log_dir();  // default_root_dir without a logger (fast_dev_run)
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw DataError("cannot save config.yaml: creating " + dir.string() + " failed: " + ec.message());
    io::write_file_atomically((dir / "config.yaml").string(), config_to_yaml(config_));
  }

 private:
  YAML::Node config_;
};

// index,class for every example predict_step saw (its logits' argmax). Under DDP each rank
// predicted the examples r, r + W, r + 2W, ... (predict shards without repeats); rank 0
// gathers every rank's classes (padded with -1 to the longest shard) and writes one file in
// dataset order.
void write_predictions(trainer::Trainer& trainer, const std::vector<Tensor>& outputs, const std::string& path) {
  std::vector<int64_t> mine;
  for (const Tensor& logits : outputs) {
    for (int64_t c : argmax(logits.to(Device::cpu()), 1).to_vector<int64_t>()) mine.push_back(c);
  }
  const int world = trainer.world_size();
  std::vector<int64_t> classes = mine;
  if (world > 1) {
    int64_t longest = trainer.strategy().reduce(double(mine.size()), trainer::ReduceFx::Max);
    mine.resize(size_t(longest), -1);
    const std::vector<int64_t> all =
        trainer.strategy().all_gather(Tensor::from_vector<int64_t>(mine, {longest})).to_vector<int64_t>();  // [W, longest]
    classes.clear();
    for (int64_t k = 0; k < longest; ++k) {
      for (int r = 0; r < world; ++r) {
        const int64_t c = all[size_t(r * longest + k)];
        if (c >= 0) classes.push_back(c);
      }
    }
  }
  if (!trainer.is_global_zero()) return;
  // The directory is created as fit creates default_root_dir; the file appears whole or not at all.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw DataError("cannot write predictions to " + path + ": creating " + parent.string() + " failed: " + ec.message());
  std::string text = "index,class\n";
  for (size_t i = 0; i < classes.size(); ++i) text += std::to_string(i) + "," + std::to_string(classes[i]) + "\n";
  io::write_file_atomically(path, text);
  std::cout << "tandem predict: wrote " << classes.size() << " predictions to " << path << "\n";
}

std::vector<CallbackFactory>& extra_fit_callbacks() {
  static std::vector<CallbackFactory> factories;
  return factories;
}

int run_planned_stage(const std::string& stage, const ParsedRun& run, trainer::TrainerOptions trainer_options,
                      ExecutionPlan plan, trainer::LightningModule& model, data::DataModule& datamodule);

int run_stage(const std::string& stage, const std::vector<std::string>& args) {
  const std::optional<ParsedRun> run =
      parse_run(args, stage_flags(stage), [&](const ConfigSchema& schema) { return run_help(stage, schema); });
  if (!run) return 0;
  const YAML::Node& config = run->config;
  // Everything that can be a configuration error is built before any data is read.
  const YAML::Node seed = get_config_value(config, "seed_everything");
  if (!seed.IsNull()) manual_seed(seed.as<uint64_t>());
  trainer::TrainerOptions trainer_options = trainer::trainer_options_from_config(config);
  std::shared_ptr<trainer::LightningModule> model = models::make_model(config);
  const std::shared_ptr<data::DataModule> datamodule = make_data_module(config, *model);
  // Planned once: the plan's strategy launches the job when it needs processes nobody started
  // (ddp: become `mpirun -np W tandem <stage> <args>`, as Lightning re-runs the script), and the
  // Trainer trains with the same live objects.
  trainer::validate_trainer_options(trainer_options);
  refuse_training_when_simulating("start a Trainer");  // before a relaunch could multiply the refusal
  HardwareOptions hardware = trainer::hardware_options(trainer_options);
  // In a Slurm batch script with max_restarts, this process is the agent that starts srun steps.
  if (stage == "fit") {
    if (auto agent = restart_agent_cluster(trainer_options)) hardware.cluster = agent;
  }
  ExecutionPlan plan = plan_execution(hardware);
  // With max_restarts, this process stays behind as the restart agent and runs the job as its
  // child (restart_agent.h) instead of becoming it.
  if (stage == "fit" && needs_restart_agent(trainer_options, plan)) {
    return run_fit_with_restarts(args, trainer_options, plan, data_batch_size(config));
  }
  if (plan.launch && plan.live_strategy->launch_kind() != LaunchKind::Spawn) {
    std::vector<std::string> argv{"tandem", stage};
    argv.insert(argv.end(), args.begin(), args.end());
    plan.live_strategy->launch(plan, argv);
  }
  // A rank of a job under the restart agent tells it why it failed (job_failure.h).
  const int rank = plan.cluster.launched() ? plan.cluster.global_rank : 0;
  try {
    return run_planned_stage(stage, *run, std::move(trainer_options), std::move(plan), *model, *datamodule);
  } catch (const std::exception& e) {
    trainer::record_job_failure(trainer::job_failure_from(e, rank));
    throw;
  }
}

int run_planned_stage(const std::string& stage, const ParsedRun& run, trainer::TrainerOptions trainer_options,
                      ExecutionPlan plan, trainer::LightningModule& model, data::DataModule& datamodule) {
  const YAML::Node& config = run.config;
  // In an srun step of a Slurm job: checkpoint and requeue on Slurm's warning signal, and a
  // requeued run resumes from that checkpoint (slurm_requeue.h).
  std::shared_ptr<trainer::SlurmRequeue> requeue;
  if (stage == "fit") {
    trainer_options.callbacks.push_back(std::make_shared<SaveConfigCallback>(config));
    for (const auto& make : extra_fit_callbacks()) {
      for (auto& cb : make()) trainer_options.callbacks.push_back(std::move(cb));
    }
    if ((requeue = trainer::slurm_requeue_for(plan.cluster))) trainer_options.callbacks.push_back(requeue);
  }
  trainer::Trainer trainer(std::move(trainer_options), std::move(plan));
  std::string ckpt_path = ckpt_path_of(config);
  if (requeue && ckpt_path.empty()) {
    if (auto saved = trainer::requeued_job_checkpoint(trainer.plan().cluster, trainer.default_root_dir())) {
      ckpt_path = *saved;
      if (trainer.is_global_zero()) std::cout << "tandem: resuming the requeued Slurm job from " << ckpt_path << "\n";
    }
  }
  if (const std::string dir = run_dir_of(run.args.config_files); !dir.empty()) trainer.set_checkpoint_run_dir(dir);

  if (stage == "fit") {
    trainer.fit(model, datamodule, ckpt_path);
    if (trainer.is_global_zero()) {
      std::cout << tandem::trainer::metrics_table("Fit metric", trainer.callback_metrics());
      std::cout << "logs and checkpoints: " << trainer.log_dir() << "\n";
    }
  } else if (stage == "validate") {
    trainer.validate(model, datamodule, ckpt_path);
  } else if (stage == "test") {
    trainer.test(model, datamodule, ckpt_path);
  } else {
    const std::vector<Tensor> outputs = trainer.predict(model, datamodule, ckpt_path);
    std::string path = (std::filesystem::path(trainer.default_root_dir()) / "predictions.csv").string();
    if (auto it = run.args.app_flags.find("predictions"); it != run.args.app_flags.end()) path = it->second.back();
    write_predictions(trainer, outputs, path);
  }
  return 0;
}

}  // namespace

std::shared_ptr<data::DataModule> make_data_module(const YAML::Node& config, trainer::LightningModule& model) {
  if (data_class_of(config) != "text") return std::make_shared<data::FashionMNISTDataModule>(data_options_from_config(config));
  data::TextDataOptions options = text_data_options_from_config(config);
  auto* gpt = dynamic_cast<models::GPT*>(&model);
  if (!gpt) {
    throw ConfigError("--data=text gives token ids [B, T]; --model=" + config["model"]["name"].Scalar() +
                      " does not take them (use --model=gpt, gpt-nano, gpt-char or gpt2)");
  }
  models::fit_text_data_to_model(options, *gpt);
  if (options.path.empty() && options.tokens.empty()) options.path = ensure_default_corpus();
  return std::make_shared<data::TextDataModule>(options);
}

void add_fit_callbacks(CallbackFactory factory) { extra_fit_callbacks().push_back(std::move(factory)); }

int run_fit(const std::vector<std::string>& args) { return run_stage("fit", args); }
int run_validate(const std::vector<std::string>& args) { return run_stage("validate", args); }
int run_test(const std::vector<std::string>& args) { return run_stage("test", args); }
int run_predict(const std::vector<std::string>& args) { return run_stage("predict", args); }

}  // namespace tandem::cli
