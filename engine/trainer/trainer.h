// Trainer: runs a LightningModule on a DataModule the way Lightning's Trainer does.
//
//   trainer::TrainerOptions opts;
//   opts.max_epochs = 5;
//   opts.callbacks = {std::make_shared<trainer::EarlyStopping>("val_loss")};
//   trainer::Trainer trainer(opts);
//   trainer.fit(model, datamodule);            // or fit(model, dm, "last") to resume exactly
//   auto results = trainer.test(model, datamodule, "best");
//
// Where the code lives: trainer.cpp (setup, stages), FitLoop (fit_loop.h: epochs, batches handed
// to Strategy::run_training_step, accumulation, clipping, scheduler steps, when to validate),
// EvaluationLoop (evaluation_loop.h: validate/test/sanity/predict), CheckpointConnector
// (checkpoint_connector.h: what a checkpoint holds, exact resume, ckpt_path), LoggerConnector
// (logger_connector.h: metric aggregation), callbacks/ (checkpointing, early stopping, progress
// bar, summaries). The loops and the connector are the Trainer's parts and read its state.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/data_module.h"
#include "engine/module/lightning_module.h"
#include "engine/strategies/cuda_graph_step.h"
#include "engine/strategies/execution_plan.h"
#include "engine/strategies/grad_scaler.h"
#include "engine/strategies/strategy.h"
#include "engine/trainer/callback.h"
#include "engine/trainer/checkpoint_connector.h"
#include "engine/trainer/csv_logger.h"
#include "engine/trainer/evaluation_loop.h"
#include "engine/trainer/fit_loop.h"
#include "engine/trainer/logger_connector.h"
#include "engine/trainer/step_watchdog.h"
#include "engine/trainer/trainer_options.h"

namespace tandem::data { class DataLoader; }

namespace tandem::trainer {

class ModelCheckpoint;

// A training loss (or gradient) that is NaN or infinite. The run stops before the optimizer
// step, so no weights or checkpoints are touched.
class NonFiniteLossError : public Error { public: using Error::Error; };

// Where the fit loop is, as a checkpoint records it.
struct FitProgress {
  int64_t epoch = 0;                  // current_epoch
  int64_t global_step = 0;            // optimizer steps taken
  int64_t batches_that_stepped = 0;   // the loggers' step counter (Lightning's)
  int64_t batch_in_epoch = 0;         // training batches finished in the current epoch
  int64_t total_batch_idx = 0;        // training batches finished in the whole run
  bool epoch_finished = false;        // the epoch's batches are all done (resume at epoch+1)
  // The last finished batch's after-batch work (the epoch-interval scheduler step after an
  // epoch's last batch, validation when due) has not run yet: true inside on_train_batch_end,
  // where step- and time-interval checkpoints are saved.
  bool after_batch_pending = false;
};

// The metrics as a two-column text table under `title` (what validate/test print, and
// `tandem fit` after training), one row per name in name order.
std::string metrics_table(const std::string& title, const std::map<std::string, double>& metrics);

// The Trainer is the ModuleHost of the module it runs (privately: the module's view of it).
class Trainer : private ModuleHost {
 public:
  using Metrics = std::map<std::string, double>;

  // Validates the options (ConfigError) and resolves the hardware plan; refuses plans that
  // cannot train. Nothing is written to disk until a stage runs. With options.communicator (a
  // host MPI code's communicator) the job is that communicator (host_comm_cluster: collective
  // over it, so all its ranks construct together) and the strategy communicates over a
  // duplicate of it.
  explicit Trainer(TrainerOptions options);
  // With a plan already made from the same options (`tandem fit` plans once, to launch): the
  // plan's live Accelerator and Strategy are the ones that train. With options.communicator, make
  // the plan with HardwareOptions::cluster = host_comm_cluster(...), so that ranks and devices
  // are the communicator's (a plan of another size is a ConfigError at setup).
  Trainer(TrainerOptions options, ExecutionPlan plan);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // ckpt_path: "" (fresh), a file, "last" (the newest last.safetensors) or "best" (the best
  // checkpoint of this trainer's ModelCheckpoint). fit resumes exactly from it; the other
  // stages load its weights.
  void fit(LightningModule& model, data::DataModule& datamodule, const std::string& ckpt_path = "");
  // One map per dataloader of the metrics logged during the stage (epoch values). verbose:
  // print them as a table on rank 0.
  std::vector<Metrics> validate(LightningModule& model, data::DataModule& datamodule,
                                const std::string& ckpt_path = "", bool verbose = true);
  std::vector<Metrics> test(LightningModule& model, data::DataModule& datamodule,
                            const std::string& ckpt_path = "", bool verbose = true);
  // predict_step's outputs, one per batch, detached.
  std::vector<Tensor> predict(LightningModule& model, data::DataModule& datamodule,
                              const std::string& ckpt_path = "");

  // ---- state, for callbacks and the module ----
  const Metrics& callback_metrics() const { return logger_connector_.callback_metrics(); }
  const Metrics& progress_bar_metrics() const { return logger_connector_.progress_bar_metrics(); }
  const Metrics& logged_metrics() const { return logger_connector_.logged_metrics(); }
  // <default_root_dir>/lightning_logs/version_N; default_root_dir when there is no logger
  // (fast_dev_run).
  std::string log_dir();
  const std::string& default_root_dir() const { return options_.default_root_dir; }
  CSVLogger* logger() { return logger_.get(); }
  std::optional<int> logger_version();

  const TrainerOptions& options() const { return options_; }
  // The checkpoint the current stage loaded (resolved "last"/"best"); empty when none.
  const std::string& ckpt_path() const { return ckpt_path_; }
  // The run ckpt_path="last"/"best" refer to: a log directory (lightning_logs/version_N) whose
  // checkpoints/ they are looked up in, alone. Unset, they look in this run's checkpoint
  // directories, then in the newest version_N that has checkpoints (saying which when several do).
  void set_checkpoint_run_dir(std::string dir) { checkpoint_connector_.set_run_dir(std::move(dir)); }
  const ExecutionPlan& plan() const { return plan_; }
  Strategy& strategy() { return *strategy_; }
  int world_size() const { return strategy_->world_size(); }
  int global_rank() const { return strategy_->global_rank(); }
  bool is_global_zero() const override { return strategy_->is_global_zero(); }

  int64_t current_epoch() const override { return progress_.epoch; }
  int64_t global_step() const override { return progress_.global_step; }
  const FitProgress& fit_progress() const { return progress_; }
  int64_t max_epochs() const { return max_epochs_; }       // -1: no limit
  int64_t max_steps() const { return options_.max_steps; }
  // Batches each loop runs this epoch after limits (0 before the loop knows).
  int64_t num_training_batches() const { return num_training_batches_; }
  // Between the batches of an accumulated step (accumulate_grad_batches > 1): gradients are
  // partial and no checkpoint could hold them.
  bool accumulating_gradients() const { return fit_loop_.accumulating_gradients(); }
  int64_t num_val_batches() const { return num_val_batches_; }
  int64_t num_test_batches() const { return num_test_batches_; }
  int64_t num_predict_batches() const { return num_predict_batches_; }
  int64_t num_sanity_val_batches() const { return num_sanity_batches_; }

  RunningStage stage() const { return stage_; }
  // Inside fit() (also while it validates); false in validate/test/predict.
  bool fitting() const { return fitting_; }
  bool training() const { return stage_ == RunningStage::Train; }
  bool sanity_checking() const { return stage_ == RunningStage::SanityCheck; }
  bool fast_dev_run() const { return options_.fast_dev_run.enabled(); }
  // Set by EarlyStopping (or any callback); the fit loop stops after the current batch/epoch.
  bool should_stop = false;

  const std::vector<std::shared_ptr<Callback>>& callbacks() const { return callbacks_; }
  // The first ModelCheckpoint, or null.
  ModelCheckpoint* checkpoint_callback() const;
  optim::Optimizer* optimizer() const { return optimizer_config_.optimizer.get(); }
  optim::LRScheduler* lr_scheduler() const { return optimizer_config_.scheduler.get(); }
  const OptimizerConfig& optimizer_config() const { return optimizer_config_; }
  // The loss scaler of precision=16-mixed (the strategy's precision plugin); null otherwise.
  const GradScaler* grad_scaler() const { return strategy_->precision_plugin().grad_scaler(); }
  // bfloat16 or float16 when steps run under autocast (mixed precision), else nullopt.
  std::optional<DType> autocast_dtype() const { return strategy_->precision_plugin().autocast_dtype(); }
  // cuda_graph=true: the graph of the current (or last) fit; null otherwise.
  const CudaGraphStep* cuda_graph_step() const { return strategy_->cuda_graph_step(); }
  LightningModule* lightning_module() const { return module_; }
  data::DataModule* datamodule() const { return datamodule_; }

  // Writes a checkpoint of the current state (model, optimizer, scheduler, trainer_state) to
  // path atomically. Rank 0 writes; the others wait.
  void save_checkpoint(const std::string& path);

  // Sends metrics straight to the loggers at the loggers' current step (LearningRateMonitor).
  void log_to_loggers(const Metrics& metrics);

  // Where LightningModule::log goes (the module's ModuleHost::metrics()).
  LoggerConnector& logger_connector() { return logger_connector_; }

 private:
  // ModuleHost: what the attached module asks of its Trainer.
  MetricsSink& metrics() override { return logger_connector_; }
  Tensor all_gather(const Tensor& tensor) override { return strategy_->all_gather(tensor); }
  Trainer* trainer() override { return this; }

  friend class FitLoop;
  friend class EvaluationLoop;
  friend class CheckpointConnector;

  void setup_strategy();
  void attach(LightningModule& model, data::DataModule& datamodule, const std::string& stage);
  void detach(const std::string& stage);
  void setup_logger();
  // Under DDP, gives the loader a DistributedSampler for this rank (no-op for one process).
  void shard_for_ranks(data::DataLoader& loader, RunningStage stage) const;
  void write_hparams();
  // validate/test/predict: attach, load ckpt_path's weights, run `body`, detach; callbacks see
  // an exception (on_exception) before it propagates.
  template <typename Body>
  auto run_stage(LightningModule& model, data::DataModule& datamodule, const std::string& stage,
                 const std::string& ckpt_path, Body&& body) -> decltype(body());
  void print_stage_metrics(const std::string& title, const Metrics& metrics) const;
  template <typename Fn> void for_each_callback(Fn&& fn) {
    for (const auto& cb : callbacks_) fn(*cb);
  }
  // The step watchdog of fit (step_watchdog.h): step_timeout; unset, collective_deadline()
  // with several processes (a backstop behind the collective timeout) and off in one; 0 is off.
  double effective_step_timeout() const;
  // collective_timeout plus the communicators' abort grace: when a job whose collective timed
  // out has surely ended.
  double collective_deadline() const;
  void start_step_watchdog();
  // Progress for the watchdog: this rank enters `phase` (a string literal) at batch_idx;
  // waits_for_peers: the phase blocks in collectives (the watchdog then allows
  // collective_timeout plus the abort grace).
  void beat(const char* phase, int64_t batch_idx, bool waits_for_peers = false);
  void log_step_rows(const Metrics& rows, int64_t step);

  TrainerOptions options_;
  ExecutionPlan plan_;
  std::shared_ptr<Accelerator> accelerator_;  // the plan's; set up on the root device, torn down by ~Trainer
  std::shared_ptr<Strategy> strategy_;        // the plan's; the loops talk only to it
  int64_t max_epochs_ = 1000;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::unique_ptr<CSVLogger> logger_;
  LoggerConnector logger_connector_;

  LightningModule* module_ = nullptr;
  data::DataModule* datamodule_ = nullptr;
  OptimizerConfig optimizer_config_;
  RunningStage stage_ = RunningStage::Train;
  bool fitting_ = false;
  FitProgress progress_;
  std::string ckpt_path_;
  int64_t num_training_batches_ = 0, num_val_batches_ = 0, num_test_batches_ = 0;
  int64_t num_predict_batches_ = 0, num_sanity_batches_ = 0;
  std::unique_ptr<StepWatchdog> watchdog_;  // during fit, when a step timeout applies
  FitLoop fit_loop_{*this};
  EvaluationLoop evaluation_loop_{*this};
  CheckpointConnector checkpoint_connector_{*this};
};

}  // namespace tandem::trainer
