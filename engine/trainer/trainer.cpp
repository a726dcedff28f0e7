#include "engine/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "collectives/communicator.h"
#include "collectives/rank_failure.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/data/data_loader.h"
#include "engine/data/distributed_sampler.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/callbacks/model_summary.h"
#include "engine/trainer/callbacks/progress_bar.h"
#include "engine/trainer/job_failure.h"
#include "kernels/backend.h"

namespace tandem::trainer {

namespace {

template <typename T>
bool has_callback(const std::vector<std::shared_ptr<Callback>>& callbacks) {
  for (const auto& cb : callbacks) {
    if (dynamic_cast<T*>(cb.get())) return true;
  }
  return false;
}

}  // namespace

Trainer::Trainer(TrainerOptions options) : Trainer(options, [&] {
      validate_trainer_options(options);
      // TANDEM_SIMULATE_*_CUDA_DEVICES describe a pretend machine: fine to plan on, never to train on.
      refuse_training_when_simulating("start a Trainer");
      HardwareOptions hardware = hardware_options(options);
      if (options.communicator) hardware.cluster = host_comm_cluster(*options.communicator);
      return plan_execution(hardware);
    }()) {}

Trainer::Trainer(TrainerOptions options, ExecutionPlan plan) : options_(std::move(options)), plan_(std::move(plan)) {
  validate_trainer_options(options_);
  refuse_training_when_simulating("start a Trainer");
  setup_strategy();
  logger_connector_ = LoggerConnector(strategy_.get());
  set_allow_tf32(options_.allow_tf32);
  if (options_.cuda_graph) {
    TANDEM_CHECK(strategy_->can_capture_step(), ConfigError,
                 "trainer option cuda_graph=true captures the training step into a CUDA graph, which needs one GPU in "
                 "one process (strategy=single_device on accelerator=cuda), got strategy=" + plan_.strategy +
                 " on accelerator=" + plan_.accelerator + " with " + std::to_string(plan_.world_size) + " process(es) x " +
                 std::to_string(strategy_->devices_per_process()) + " device(s); set cuda_graph=false");
  }
  // Warnings about the hardware choice (GPUs left idle, a precision fallback) are shown
  // whatever the progress bar does; the other notes come with the fit banner.
  if (is_global_zero()) {
    for (const auto& note : plan_.notes) {
      if (note.rfind("warning:", 0) == 0) std::fprintf(stderr, "Tandem: %s\n", note.c_str());
    }
  }

  if (options_.fast_dev_run.enabled()) {
    // n batches of every stage, one epoch, no sanity check; nothing written (Lightning).
    const int64_t n = options_.fast_dev_run.batches;
    options_.limit_train_batches = options_.limit_val_batches = n;
    options_.limit_test_batches = options_.limit_predict_batches = n;
    options_.max_epochs = 1;
    options_.max_steps = n;
    options_.num_sanity_val_steps = 0;
    options_.val_check_interval = 1.0;
    options_.check_val_every_n_epoch = 1;
  }
  max_epochs_ = options_.max_epochs ? *options_.max_epochs : (options_.max_steps == -1 ? 1000 : -1);

  // Display callbacks first, the user's next, checkpointing last so it sees what everything
  // else logged (Lightning's order).
  const bool console = is_global_zero();
  if (options_.enable_progress_bar && console && !has_callback<ProgressBar>(options_.callbacks)) {
    callbacks_.push_back(std::make_shared<ProgressBar>());
  }
  if (options_.enable_model_summary && console && !has_callback<ModelSummary>(options_.callbacks)) {
    callbacks_.push_back(std::make_shared<ModelSummary>());
  }
  std::vector<std::shared_ptr<Callback>> checkpointing;
  for (const auto& cb : options_.callbacks) {
    (dynamic_cast<ModelCheckpoint*>(cb.get()) ? checkpointing : callbacks_).push_back(cb);
  }
  if (!checkpointing.empty() && !options_.enable_checkpointing) {
    throw ConfigError("trainer option enable_checkpointing=false, but callbacks holds a ModelCheckpoint; "
                      "remove the ModelCheckpoint or set enable_checkpointing=true");
  }
  if (checkpointing.empty() && options_.enable_checkpointing) checkpointing.push_back(std::make_shared<ModelCheckpoint>());
  callbacks_.insert(callbacks_.end(), checkpointing.begin(), checkpointing.end());

  if (!options_.fast_dev_run.enabled()) logger_ = std::make_unique<CSVLogger>(options_.default_root_dir);
}

// The plan's live objects become this run's: the accelerator sets up the root device, the
// strategy its devices, precision plugin and communicator. A plan that still needs its processes
// started is refused here (ddp_spawn's strategy starts them itself).
void Trainer::setup_strategy() {
  TANDEM_CHECK(plan_.live_strategy && plan_.live_accelerator, ValueError,
               "Trainer: the plan has no live strategy/accelerator; make it with plan_execution()");
  accelerator_ = plan_.live_accelerator;
  strategy_ = plan_.live_strategy;
  if (plan_.launch) {
    if (strategy_->launch_kind() == LaunchKind::Relaunch) {
      throw ConfigError("the plan needs " + std::to_string(plan_.world_size) + " processes (strategy=" + plan_.strategy +
                        "), but this process was not started by a launcher; start it as: " + *plan_.launch +
                        " (`tandem fit` does this itself where the strategy allows)");
    }
    strategy_->launch(plan_, {});  // spawn: returns as rank 0 of the new job; others say what they need
  }
  StrategyEnvironment env;
  env.accelerator = accelerator_;
  const size_t per_process = plan_.devices.size() / size_t(std::max(1, plan_.processes_per_node));
  const int local = std::max(0, plan_.cluster.launched() ? plan_.cluster.local_rank : 0);
  for (size_t i = 0; i < per_process; ++i) env.devices.push_back(plan_.devices[size_t(local) * per_process + i]);
  for (const AcceleratorDevice& d : env.devices) {
    const std::optional<Device> device = accelerator_->tensor_device(d);
    if (!device) {
      throw ConfigError("accelerator=" + plan_.accelerator + " cannot train: a registered accelerator needs a kernel "
                        "backend of its own (Tandem has cpu and cuda); use --trainer.accelerator=cpu or cuda");
    }
    env.tensor_devices.push_back(*device);
  }
  env.precision = plan_.precision;
  env.world_size = plan_.world_size;
  env.num_nodes = plan_.num_nodes;
  env.cluster = plan_.cluster;
  env.process_group_backend = options_.process_group_backend;
  env.collective_timeout_s = options_.collective_timeout;
  env.host_comm = options_.communicator;
  accelerator_->setup_device(env.devices.front());
  strategy_->setup_environment(env);
}

Trainer::~Trainer() {
  if (strategy_) strategy_->release_step_executor();  // a graph's memory goes back before the device is torn down
  if (accelerator_) accelerator_->teardown();
}

ModelCheckpoint* Trainer::checkpoint_callback() const {
  for (const auto& cb : callbacks_) {
    if (auto* mc = dynamic_cast<ModelCheckpoint*>(cb.get())) return mc;
  }
  return nullptr;
}

void Trainer::save_checkpoint(const std::string& path) { checkpoint_connector_.save_checkpoint(path); }

void Trainer::log_step_rows(const Metrics& rows, int64_t step) {
  if (!logger_ || rows.empty() || !is_global_zero()) return;
  Metrics with_epoch = rows;
  with_epoch["epoch"] = double(progress_.epoch);
  logger_->log_metrics(with_epoch, step);
}

void Trainer::log_to_loggers(const Metrics& metrics) {
  if (!logger_ || metrics.empty() || !is_global_zero() || sanity_checking()) return;
  Metrics with_epoch = metrics;
  with_epoch["epoch"] = double(progress_.epoch);
  logger_->log_metrics(with_epoch, progress_.batches_that_stepped);
}

std::string Trainer::log_dir() { return logger_ ? logger_->log_dir() : options_.default_root_dir; }

std::optional<int> Trainer::logger_version() {
  if (!logger_) return std::nullopt;
  return logger_->version();
}

void Trainer::attach(LightningModule& model, data::DataModule& datamodule, const std::string& stage) {
  module_ = &model;
  datamodule_ = &datamodule;
  model.attach_host(this);
  strategy_->setup_module(model);
  // Before the callbacks' setup: ModelCheckpoint puts its directory under log_dir(). predict
  // logs nothing, so it claims no version directory.
  if (stage != "predict") setup_logger();
  datamodule.setup(stage);
  model.setup(stage);
  for_each_callback([&](Callback& cb) { cb.setup(*this, model, stage); });
  if (options_.enable_progress_bar && is_global_zero() && stage == "fit") {
    std::printf("Tandem: accelerator=%s, strategy=%s, devices=%zu, precision=%s\n", accelerator_->name().c_str(),
                strategy_->name().c_str(), plan_.devices.size(), precision_name(plan_.precision).c_str());
    for (const auto& note : plan_.notes) {
      if (note.rfind("warning:", 0) != 0) std::printf("  %s\n", note.c_str());
    }
    std::fflush(stdout);
  }
}

void Trainer::detach(const std::string& stage) {
  if (!module_) return;
  for_each_callback([&](Callback& cb) { cb.teardown(*this, *module_, stage); });
  module_->teardown(stage);
  strategy_->teardown();
}

void Trainer::setup_logger() {
  if (!logger_) return;
  // Rank 0 claims version_N; the other ranks use the same N (their log_dir names the directory
  // rank 0 writes, e.g. for ModelCheckpoint's dirpath), without creating anything.
  const int64_t version = strategy_->broadcast_from_zero(is_global_zero() ? logger_->version() : 0);
  if (!is_global_zero() && version != logger_->version_if_set().value_or(-1)) {
    logger_ = std::make_unique<CSVLogger>(options_.default_root_dir, logger_->name(), static_cast<int>(version));
  }
}

namespace {
const char* const kStageNames[] = {"training", "validation", "test", "predict", "sanity-check"};
}  // namespace

void Trainer::shard_for_ranks(data::DataLoader& loader, RunningStage stage) const {
  if (world_size() == 1) return;
  if (datamodule_ && datamodule_->per_rank_data()) {
    // The host's partition stands; DDP pairs batch k of every rank, so the counts must agree.
    const double mine = double(loader.num_batches());
    const double fewest = strategy_->reduce(mine, ReduceFx::Min);
    const double most = strategy_->reduce(mine, ReduceFx::Max);
    if (fewest != most) {
      throw ConfigError("the datamodule's data is per rank (per_rank_data), and rank " + std::to_string(global_rank()) +
                        " has " + std::to_string(loader.num_batches()) + " " + kStageNames[int(stage)] +
                        " batch(es), but the ranks have between " + std::to_string(int64_t(fewest)) + " and " +
                        std::to_string(int64_t(most)) + "; give every rank the same number of batches (examples / "
                        "batch_size rounded up), e.g. by trimming the largest partitions");
    }
    return;
  }
  // Lightning's use_distributed_sampler: training shuffles as the loader did (same seed on every
  // rank); evaluation keeps order; predict splits without repeats so no example is predicted twice.
  data::DistributedSamplerOptions o;
  o.num_replicas = world_size();
  o.rank = global_rank();
  o.shuffle = stage == RunningStage::Train && dynamic_cast<const data::RandomSampler*>(&loader.sampler()) != nullptr;
  if (const auto* random = dynamic_cast<const data::RandomSampler*>(&loader.sampler())) o.seed = random->seed();
  o.pad = stage != RunningStage::Predict;
  if (const auto* already = dynamic_cast<const data::DistributedSampler*>(&loader.sampler())) {
    if (already->options().num_replicas == o.num_replicas && already->options().rank == o.rank) return;
    o.shuffle = already->options().shuffle;
    o.seed = already->options().seed;
  }
  loader.set_sampler(std::make_shared<data::DistributedSampler>(loader.dataset().size(), o));
}

void Trainer::write_hparams() {
  // Every rank checks the merge (the same model and datamodule on each), so a conflict stops
  // them all at once: ConfigError is not announced to the others (announce_failure below).
  if (!logger_) return;
  nlohmann::json hparams = module_->hparams.is_object() ? module_->hparams : nlohmann::json::object();
  const nlohmann::json data_hparams = datamodule_->hparams();
  if (data_hparams.is_object()) {
    for (auto it = data_hparams.begin(); it != data_hparams.end(); ++it) {
      if (hparams.contains(it.key()) && hparams[it.key()] != it.value()) {
        throw ConfigError("hyper-parameter '" + it.key() + "' is " + hparams[it.key()].dump() + " in the model but " +
                          it.value().dump() + " in the datamodule; rename one of them");
      }
      hparams[it.key()] = it.value();
    }
  }
  if (is_global_zero()) logger_->log_hyperparams(hparams);
}

namespace {

// Fail-fast (collectives/rank_failure.h): with several processes, an error that only this rank
// may know of is announced to the others before it propagates from a stage, so that their
// collectives stop at once instead of waiting for the timeout. Left alone, as errors every rank
// meets together: CommError (the communicator already fails, or aborts, the job),
// NonFiniteLossError (the ranks agree on it in a collective) and ConfigError (the ranks read the
// same configuration); a notice nobody waits for would stay queued for a later collective.
void announce_failure(const std::exception& error, int world_size, int rank) {
  if (world_size < 2) return;
  if (dynamic_cast<const CommError*>(&error) || dynamic_cast<const NonFiniteLossError*>(&error) ||
      dynamic_cast<const ConfigError*>(&error))
    return;
  collectives::announce_rank_failure(job_failure_from(error, rank).error, 1);
}

}  // namespace

void Trainer::fit(LightningModule& model, data::DataModule& datamodule, const std::string& ckpt_path) {
  fitting_ = true;
  try {
    attach(model, datamodule, "fit");
  } catch (const std::exception& e) {
    fitting_ = false;
    announce_failure(e, world_size(), global_rank());
    throw;
  }
  try {
    optimizer_config_ = model.configure_optimizers();
    TANDEM_CHECK(optimizer_config_.optimizer != nullptr, ConfigError,
                 "configure_optimizers() returned no optimizer; return {.optimizer = std::make_shared<optim::Adam>(parameters())}");
    TANDEM_CHECK(optimizer_config_.interval == "step" || optimizer_config_.interval == "epoch", ConfigError,
                 "configure_optimizers(): scheduler interval='" + optimizer_config_.interval + "' is not valid: expected 'step' or 'epoch'");
    TANDEM_CHECK(optimizer_config_.frequency >= 1, ConfigError,
                 "configure_optimizers(): scheduler frequency=" + std::to_string(optimizer_config_.frequency) + " is not valid: expected >= 1");
    strategy_->setup_optimizer(*optimizer_config_.optimizer);
    progress_ = FitProgress{};
    checkpoint_connector_.forget_resume_point();
    should_stop = false;
    logger_connector_.clear();
    const std::string resolved = checkpoint_connector_.resolve_ckpt_path(ckpt_path);
    ckpt_path_ = resolved;
    if (!resolved.empty()) checkpoint_connector_.restore_fit_state(resolved);
    write_hparams();
    start_step_watchdog();
    for_each_callback([&](Callback& cb) { cb.on_fit_start(*this, model); });
    model.on_fit_start();
    fit_loop_.run();
    for_each_callback([&](Callback& cb) { cb.on_fit_end(*this, model); });
    model.on_fit_end();
    watchdog_.reset();
  } catch (const std::exception& e) {
    watchdog_.reset();
    for_each_callback([&](Callback& cb) { cb.on_exception(*this, model, e); });
    fitting_ = false;
    detach("fit");
    announce_failure(e, world_size(), global_rank());
    throw;
  }
  fitting_ = false;
  detach("fit");
  if (is_global_zero() && world_size() > 1) std::printf("%s\n", strategy_->summary().c_str());
}

double Trainer::collective_deadline() const {
  return options_.collective_timeout + std::chrono::duration<double>(collectives::CommOptions{}.abort_grace).count();
}

double Trainer::effective_step_timeout() const {
  if (options_.step_timeout) return *options_.step_timeout;
  return world_size() > 1 ? collective_deadline() : 0.0;
}

void Trainer::start_step_watchdog() {
  const double timeout = effective_step_timeout();
  if (timeout <= 0.0) return;
  const int rank = global_rank(), world = world_size();
  // A rank waiting in a collective is left to the collective timeout and its abort grace.
  const double peer_timeout = world > 1 ? collective_deadline() : timeout;
  watchdog_ = std::make_unique<StepWatchdog>(timeout, peer_timeout, [rank, world, timeout](const std::string& where, double waited) {
    char seconds[64];
    std::snprintf(seconds, sizeof seconds, "%.1f s (step_timeout=%g s)", waited, timeout);
    const std::string message = "rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                " made no progress for " + seconds + ": stuck in " + where +
                                "; ending the job (raise --trainer.step_timeout if this can legitimately take so long)";
    std::fprintf(stderr, "tandem: error: %s\n", message.c_str());
    std::fflush(stderr);
    record_job_failure({rank, "StepTimeout", true, message});
    std::_Exit(1);  // the stuck thread cannot be unwound; mpirun ends the other ranks
  });
}

void Trainer::beat(const char* phase, int64_t batch_idx, bool waits_for_peers) {
  if (watchdog_) watchdog_->beat(phase, waits_for_peers, progress_.epoch, batch_idx, progress_.global_step);
}

template <typename Body>
auto Trainer::run_stage(LightningModule& model, data::DataModule& datamodule, const std::string& stage,
                        const std::string& ckpt_path, Body&& body) -> decltype(body()) {
  try {
    attach(model, datamodule, stage);
  } catch (const std::exception& e) {
    announce_failure(e, world_size(), global_rank());
    throw;
  }
  decltype(body()) result;
  try {
    const std::string resolved = checkpoint_connector_.resolve_ckpt_path(ckpt_path);
    ckpt_path_ = resolved;
    if (!resolved.empty()) checkpoint_connector_.restore_weights(resolved);
    result = body();
  } catch (const std::exception& e) {
    for_each_callback([&](Callback& cb) { cb.on_exception(*this, model, e); });
    detach(stage);
    announce_failure(e, world_size(), global_rank());
    throw;
  }
  detach(stage);
  return result;
}

void Trainer::print_stage_metrics(const std::string& title, const Metrics& metrics) const {
  if (!is_global_zero()) return;
  std::fputs(metrics_table(title, metrics).c_str(), stdout);
  std::fflush(stdout);
}

std::vector<Trainer::Metrics> Trainer::validate(LightningModule& model, data::DataModule& datamodule,
                                                const std::string& ckpt_path, bool verbose) {
  const Metrics metrics = run_stage(model, datamodule, "validate", ckpt_path, [&] {
    auto loader = datamodule.val_dataloader();
    TANDEM_CHECK(loader != nullptr, ConfigError, "validate: the datamodule returned no val_dataloader(); give it one, or use test()");
    shard_for_ranks(*loader, RunningStage::Validate);
    num_val_batches_ = limited_batches(options_.limit_val_batches, loader->num_batches(), "limit_val_batches");
    return evaluation_loop_.run(RunningStage::Validate, *loader, num_val_batches_);
  });
  if (verbose) print_stage_metrics("Validate metric", metrics);
  return {metrics};
}

std::vector<Trainer::Metrics> Trainer::test(LightningModule& model, data::DataModule& datamodule,
                                            const std::string& ckpt_path, bool verbose) {
  const Metrics metrics = run_stage(model, datamodule, "test", ckpt_path, [&] {
    auto loader = datamodule.test_dataloader();
    TANDEM_CHECK(loader != nullptr, ConfigError, "test: the datamodule returned no test_dataloader(); give it one");
    shard_for_ranks(*loader, RunningStage::Test);
    num_test_batches_ = limited_batches(options_.limit_test_batches, loader->num_batches(), "limit_test_batches");
    return evaluation_loop_.run(RunningStage::Test, *loader, num_test_batches_);
  });
  if (verbose) print_stage_metrics("Test metric", metrics);
  return {metrics};
}

std::vector<Tensor> Trainer::predict(LightningModule& model, data::DataModule& datamodule, const std::string& ckpt_path) {
  return run_stage(model, datamodule, "predict", ckpt_path, [&] {
    auto loader = datamodule.predict_dataloader();
    TANDEM_CHECK(loader != nullptr, ConfigError, "predict: the datamodule returned no predict_dataloader(); give it one");
    shard_for_ranks(*loader, RunningStage::Predict);
    num_predict_batches_ = limited_batches(options_.limit_predict_batches, loader->num_batches(), "limit_predict_batches");
    return evaluation_loop_.run_predict(*loader, num_predict_batches_);
  });
}

std::string metrics_table(const std::string& title, const std::map<std::string, double>& metrics) {
  if (metrics.empty()) return "";
  size_t name_width = title.size();
  for (const auto& [k, v] : metrics) name_width = std::max(name_width, k.size());
  const int value_width = 20;
  const std::string rule(name_width + value_width + 7, '-');
  char line[512];
  std::string out = rule + "\n";
  std::snprintf(line, sizeof line, "| %-*s | %-*s |\n", int(name_width), title.c_str(), value_width, "Value");
  out += line + rule + "\n";
  for (const auto& [k, v] : metrics) {
    std::snprintf(line, sizeof line, "| %-*s | %-*.6g |\n", int(name_width), k.c_str(), value_width, v);
    out += line;
  }
  return out + rule + "\n";
}

}  // namespace tandem::trainer
