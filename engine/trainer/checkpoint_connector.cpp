// What the Trainer puts in a checkpoint and how a run continues from one.
//
// trainer_state (JSON in the safetensors header):
//   tandem_version, world_size, precision
//   epoch, global_step            current_epoch and optimizer steps when it was written
//   loops.fit                     batch_in_epoch, total_batch_idx, epoch_finished: where the
//                                 fit loop stood (a mid-epoch save resumes at the next batch);
//                                 batch_size: the per-rank batch batch_in_epoch counts in;
//                                 after_batch_pending: saved inside on_train_batch_end (a step
//                                 or time checkpoint), so the resumed run first does that batch's
//                                 after-batch work (epoch scheduler step, validation when due)
//   optimizer_class,              the classes that wrote the optimizer and scheduler state: a
//   lr_scheduler_class            resume with another optimizer is refused, another schedule
//                                 is followed from the saved position
//   generator {seed, offset}      the Philox stream (dropout, init): restoring it makes the
//                                 resumed run draw the same masks as the uninterrupted one
//   callbacks {state_key: state}  ModelCheckpoint, EarlyStopping, ...
//   module                        LightningModule::on_save_checkpoint's extra state
//   hparams, datamodule_hparams
// Data order needs no state: a loader's epoch order is a pure function of (seed, epoch).
#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/join.h"
#include "base/json_integer.h"
#include "engine/accelerators/precision.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "engine/trainer/checkpoint.h"
#include "engine/trainer/checkpoint_connector.h"
#include "engine/trainer/trainer.h"
#include "tensor/generator.h"

#ifndef TANDEM_VERSION_STRING
#define TANDEM_VERSION_STRING "0.1.0"
#endif

namespace fs = std::filesystem;

namespace tandem::trainer {

nlohmann::json CheckpointConnector::dump_trainer_state() {
  Trainer& t = trainer_;
  nlohmann::json s;
  s["tandem_version"] = TANDEM_VERSION_STRING;
  s["world_size"] = t.world_size();
  s["precision"] = precision_name(t.plan_.precision);
  s["epoch"] = t.progress_.epoch;
  s["global_step"] = t.progress_.global_step;
  s["loops"]["fit"] = {{"batch_in_epoch", t.progress_.batch_in_epoch},
                       {"total_batch_idx", t.progress_.total_batch_idx},
                       {"epoch_finished", t.progress_.epoch_finished},
                       {"after_batch_pending", t.progress_.after_batch_pending},
                       {"num_training_batches", t.num_training_batches_},
                       {"batch_size", t.fit_loop_.train_batch_size()}};
  if (t.optimizer_config_.optimizer) s["optimizer_class"] = t.optimizer_config_.optimizer->name();
  if (t.optimizer_config_.scheduler) s["lr_scheduler_class"] = t.optimizer_config_.scheduler->name();
  const Generator& g = default_generator();
  s["generator"] = {{"seed", g.seed}, {"offset", g.offset}};
  // Named: iterating items() of the temporary would read it after it is destroyed (C++20 keeps
  // only the outermost temporary of a range-for alive).
  const nlohmann::json strategy_state = t.strategy_->state_dict();  // the loss scaler
  for (const auto& [key, value] : strategy_state.items()) s[key] = value;
  s["callbacks"] = nlohmann::json::object();
  for (const auto& cb : t.callbacks_) {
    nlohmann::json state = cb->state_dict();
    if (!state.is_object() || !state.empty()) s["callbacks"][cb->state_key()] = std::move(state);
  }
  nlohmann::json module_state = nlohmann::json::object();
  if (t.module_) {
    t.module_->on_save_checkpoint(module_state);
    s["hparams"] = t.module_->hparams;
  }
  s["module"] = module_state;
  s["datamodule_hparams"] = t.datamodule_ ? t.datamodule_->hparams() : nlohmann::json::object();
  t.for_each_callback([&](Callback& cb) { cb.on_save_checkpoint(t, *t.module_, s); });
  return s;
}

void CheckpointConnector::save_checkpoint(const std::string& path) {
  Trainer& t = trainer_;
  TANDEM_CHECK(t.module_ != nullptr, ValueError, "save_checkpoint(" + path + "): no model is attached; call it during fit");
  t.beat("saving a checkpoint", t.progress_.batch_in_epoch, /*waits_for_peers=*/true);
  // Every rank has chosen its file names (ModelCheckpoint checks which exist) before rank 0
  // writes, so all ranks agree on best_model_path and friends.
  t.strategy_->barrier("before save_checkpoint");
  // Collective under ddp_sharded (each rank holds part of the state): every rank gathers it.
  std::optional<optim::OptimizerStateDict> optimizer_state;
  if (t.optimizer_config_.optimizer) optimizer_state = t.strategy_->optimizer_state(*t.optimizer_config_.optimizer);
  if (t.is_global_zero()) {
    Checkpoint ckpt;
    ckpt.model = t.module_->state_dict();
    ckpt.optimizer = std::move(optimizer_state);
    ckpt.scheduler = t.optimizer_config_.scheduler ? t.optimizer_config_.scheduler->state_dict() : nlohmann::json();
    ckpt.trainer_state = dump_trainer_state();
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) throw DataError("cannot create the checkpoint directory " + parent.string() + ": " + ec.message());
    trainer::save_checkpoint(path, ckpt);
  }
  t.strategy_->barrier("save_checkpoint");
}

void CheckpointConnector::restore_weights(const std::string& path) {
  Trainer& t = trainer_;
  const Checkpoint ckpt = load_checkpoint(path);
  t.module_->load_state_dict(ckpt.model);
  announce_restore("Loaded model weights from the checkpoint at", path, ckpt);
  if (ckpt.trainer_state.is_object() && ckpt.trainer_state.contains("module")) {
    t.module_->on_load_checkpoint(ckpt.trainer_state["module"]);
  }
}

namespace {

std::vector<double> group_lrs(const optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const auto& group : optimizer.param_groups()) lrs.push_back(group.lr());
  return lrs;
}

std::string lrs_text(const std::vector<double>& lrs) {
  std::string out;
  for (double lr : lrs) out += (out.empty() ? "" : ", ") + optim::format_number(lr);
  return out;
}

// A scheduler state without its position: what makes two schedules the same schedule.
nlohmann::json schedule_settings(nlohmann::json state) {
  if (!state.is_object()) return state;
  for (const char* key : {"last_epoch", "base_lrs", "_last_lr"}) state.erase(key);
  if (state.contains("_schedulers")) {
    for (auto& sub : state["_schedulers"]) sub = schedule_settings(sub);
  }
  return state;
}

// Another optimizer's state would be loaded into this one key by key (Adam's and AdamW's are
// indistinguishable that way) and the run would continue on a mix: refused.
void refuse_other_optimizer(const std::string& path, const nlohmann::json& trainer_state, const optim::Optimizer& now) {
  const std::string saved = trainer_state.value("optimizer_class", "");
  if (saved.empty() || saved == now.name()) return;
  throw ConfigError("cannot resume fit from " + path + ": its optimizer state was written by " + saved +
                    ", but this run configures " + now.name() + "; resume with --optimizer=" + saved +
                    " (and its settings), or start a new run without --ckpt_path to train with " + now.name());
}

// The scheduler's position comes from the checkpoint; the schedule itself from this run when
// they differ (a run fitted for 1 epoch with the default cosine ended at lr 0; extended to 3
// epochs it must continue on the 3-epoch cosine, not train the new epochs at lr 0).
void restore_schedule(const Checkpoint& ckpt, const OptimizerConfig& config, const std::vector<double>& configured_lrs,
                      bool is_global_zero) {
  optim::Optimizer& optimizer = *config.optimizer;
  const nlohmann::json& s = ckpt.trainer_state;
  const bool saved_has_schedule = ckpt.scheduler.is_object();
  optim::LRScheduler* sched = config.scheduler.get();
  if (!sched && !saved_has_schedule) {
    // Constant rates both: the loaded groups hold the checkpoint's; this run's configured one wins.
    const std::vector<double> saved_lrs = group_lrs(optimizer);
    if (saved_lrs == configured_lrs) return;
    for (size_t i = 0; i < optimizer.param_groups().size() && i < configured_lrs.size(); ++i) {
      optimizer.param_groups()[i].set_lr(configured_lrs[i]);
    }
    if (is_global_zero) {
      std::printf("note: the checkpoint trained at the constant lr %s; this run configures lr %s, which training "
                  "continues at\n", lrs_text(saved_lrs).c_str(), lrs_text(configured_lrs).c_str());
    }
    return;
  }
  if (!sched) {
    // The checkpoint's scheduler left its last rate in the groups; this run asked for a constant one.
    for (size_t i = 0; i < optimizer.param_groups().size() && i < configured_lrs.size(); ++i) {
      optimizer.param_groups()[i].set_lr(configured_lrs[i]);
    }
    if (is_global_zero) {
      std::printf("note: the checkpoint was trained with a learning-rate scheduler and this run has none; training "
                  "continues at the configured constant lr %s\n", lrs_text(configured_lrs).c_str());
    }
    return;
  }
  if (!saved_has_schedule) {
    sched->resume_at(sched->last_epoch());  // a new scheduler: its step 0 rate, which the loaded groups overwrote
    return;
  }
  const std::string saved_class = s.value("lr_scheduler_class", sched->name());
  if (saved_class == sched->name() && schedule_settings(ckpt.scheduler) == schedule_settings(sched->state_dict())) {
    sched->load_state_dict(ckpt.scheduler);
    return;
  }
  const int64_t position = json_integer(ckpt.scheduler.at("last_epoch"), "checkpoint scheduler state last_epoch", -1,
                                        kMaxJsonCounter);
  const std::vector<double> saved_lrs = group_lrs(optimizer);
  sched->resume_at(position);
  if (is_global_zero) {
    std::printf("note: this run's learning-rate schedule (%s %s) differs from the checkpoint's (%s %s); it continues "
                "from the checkpoint's scheduler step %lld on this run's schedule: lr %s (the checkpoint's schedule "
                "was at %s)\n",
                sched->name().c_str(), schedule_settings(sched->state_dict()).dump().c_str(), saved_class.c_str(),
                schedule_settings(ckpt.scheduler).dump().c_str(), static_cast<long long>(position),
                lrs_text(sched->get_last_lr()).c_str(), lrs_text(saved_lrs).c_str());
  }
}

}  // namespace

void CheckpointConnector::announce_restore(const char* what, const std::string& path, const Checkpoint& ckpt) const {
  if (!trainer_.is_global_zero()) return;
  std::printf("%s %s\n", what, path.c_str());
  const std::string warning = unverified_metadata_warning(path, ckpt);
  if (!warning.empty()) std::fprintf(stderr, "tandem: %s\n", warning.c_str());
  std::fflush(stdout);
}

void CheckpointConnector::restore_fit_state(const std::string& path) {
  Trainer& t = trainer_;
  const Checkpoint ckpt = load_checkpoint(path);
  announce_restore("Restoring states from the checkpoint path at", path, ckpt);
  if (ckpt.trainer_state.is_object() && ckpt.optimizer) {
    refuse_other_optimizer(path, ckpt.trainer_state, *t.optimizer_config_.optimizer);
  }
  t.module_->load_state_dict(ckpt.model);
  const nlohmann::json& s = ckpt.trainer_state;
  if (!s.is_object()) {
    throw DataError("cannot resume fit from " + path + ": it holds weights only (no trainer state); load it "
                    "for validate/test/predict, or resume from a checkpoint written by ModelCheckpoint");
  }
  int64_t saved_world_size = t.world_size();
  resume_batch_size_ = 0;
  try {
    if (ckpt.optimizer) {
      const std::vector<double> configured_lrs = group_lrs(*t.optimizer_config_.optimizer);
      t.strategy_->load_optimizer_state(*t.optimizer_config_.optimizer, *ckpt.optimizer);
      restore_schedule(ckpt, t.optimizer_config_, configured_lrs, t.is_global_zero());
    }

    const nlohmann::json& fit = s.at("loops").at("fit");
    // Counters a run can reach (below 2^53: JSON's exact integers, stored as integers), so that
    // epoch + 1 and rescale_resume_position cannot overflow; anything else is a damaged file.
    const auto counter = [&](const nlohmann::json& value, const char* name) {
      return json_integer(value, "cannot resume fit from " + path + ": its trainer state has " + name, 0, kMaxJsonCounter);
    };
    // The generator's seed and offset take any uint64.
    const auto u64 = [&](const nlohmann::json& value, const char* name) {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
        throw DataError("cannot resume fit from " + path + ": its trainer state has " + name + " = " + value.dump() +
                        ", expected an integer from 0 to 2^64-1; the checkpoint is corrupt: use another one");
      return value.get<uint64_t>();
    };
    const int64_t epoch = counter(s.at("epoch"), "epoch");
    const bool finished = fit.at("epoch_finished").get<bool>();
    t.progress_.global_step = counter(s.at("global_step"), "global_step");
    t.progress_.batches_that_stepped = t.progress_.global_step;
    t.progress_.total_batch_idx = counter(fit.at("total_batch_idx"), "loops.fit.total_batch_idx");
    // A finished epoch resumes at the next one; a save inside an epoch resumes at its next batch.
    t.progress_.epoch = finished ? epoch + 1 : epoch;
    resume_.skip_batches = finished ? 0 : counter(fit.at("batch_in_epoch"), "loops.fit.batch_in_epoch");
    // World size and batch size multiply into an example count: bounded to 2^31 so it cannot overflow.
    const auto size = [&](const nlohmann::json& value, const char* name) {
      return json_integer(value, "cannot resume fit from " + path + ": its trainer state has " + name, 0,
                          int64_t(1) << 31);
    };
    if (s.contains("world_size")) saved_world_size = size(s.at("world_size"), "world_size");
    resume_batch_size_ = fit.contains("batch_size") ? size(fit.at("batch_size"), "loops.fit.batch_size") : 0;
    t.progress_.batch_in_epoch = resume_.skip_batches;
    resume_.after_batch_pending = !finished && fit.value("after_batch_pending", false);

    const nlohmann::json& g = s.at("generator");
    default_generator().seed = u64(g.at("seed"), "generator.seed");
    default_generator().offset = u64(g.at("offset"), "generator.offset");
    // A 16-mixed run resumes with the loss scale it had learned (absent: the default scale).
    t.strategy_->load_state_dict(s);

    const nlohmann::json& cbs = s.value("callbacks", nlohmann::json::object());
    for (const auto& cb : t.callbacks_) {
      if (cbs.contains(cb->state_key())) cb->load_state_dict(cbs.at(cb->state_key()));
    }
    if (s.contains("module")) t.module_->on_load_checkpoint(s.at("module"));
    t.for_each_callback([&](Callback& cb) { cb.on_load_checkpoint(t, *t.module_, s); });
  } catch (const nlohmann::json::exception& e) {
    throw DataError("cannot resume fit from " + path + ": its trainer state is incomplete (" + e.what() +
                    "); it was not written by this Trainer's ModelCheckpoint");
  } catch (const ValueError& e) {
    // A setting the optimizer, scheduler or a callback refuses (Adam's betas = [5.9, 0.999]):
    // the file is damaged or was edited, not this run misconfigured.
    throw DataError("cannot resume fit from " + path + ": its saved state holds a value out of range (" + e.what() +
                    "); the checkpoint is corrupt: use another one");
  }
  resume_world_size_ = saved_world_size;
}

// Inside an epoch a rank's batch index counts per-rank batches: k of them at W ranks of B
// examples cover the first k*W*B examples of the epoch's global order (DistributedSampler), so
// at W' ranks of B' that is k*W*B / (W'*B') batches. Weights, optimizer state, epochs and
// optimizer steps mean the same at any world size and batch size.
void CheckpointConnector::rescale_resume_position(int64_t batch_size) {
  Trainer& t = trainer_;
  if (resume_world_size_ == 0) return;  // not resuming
  const int64_t saved_world = resume_world_size_, saved_batch = resume_batch_size_ ? resume_batch_size_ : batch_size;
  resume_world_size_ = 0;
  if (saved_world == t.world_size() && saved_batch == batch_size) return;
  const int64_t before = resume_.skip_batches;
  // Each factor is below 2^53 (checked when read), so the products fit in 128 bits.
  const __int128 seen = __int128(before) * saved_world * saved_batch;
  const __int128 per_batch = __int128(t.world_size()) * batch_size;
  const __int128 rescaled = seen / per_batch;
  if (saved_batch != batch_size && seen % per_batch != 0) {
    // Rounding would train some examples of this epoch twice or skip some: refused.
    throw ConfigError("cannot resume fit from " + t.ckpt_path_ + " inside its epoch with batch size " +
                      std::to_string(batch_size) + ": it was saved after " + std::to_string(before) +
                      " batches of " + std::to_string(saved_batch) + " per rank at world size " +
                      std::to_string(saved_world) + ", i.e. " + std::to_string(int64_t(seen)) +
                      " examples of the epoch, which is not a whole number of batches of " +
                      std::to_string(batch_size) + " at world size " + std::to_string(t.world_size()) +
                      "; resume with --data.batch_size=" + std::to_string(saved_batch) +
                      " (the checkpoint's), a batch size that divides that count, or from a checkpoint saved at "
                      "the end of an epoch");
  }
  if (rescaled >= (__int128(1) << 53))
    throw DataError("cannot resume fit from " + t.ckpt_path_ + ": its mid-epoch position " + std::to_string(before) +
                    " at world size " + std::to_string(saved_world) + " is beyond any epoch; the checkpoint is corrupt");
  resume_.skip_batches = int64_t(rescaled);
  t.progress_.batch_in_epoch = resume_.skip_batches;
  if (!t.is_global_zero()) return;
  if (saved_world != t.world_size()) {
    std::printf("note: resuming a checkpoint written at world size %lld on world size %d",
                static_cast<long long>(saved_world), t.world_size());
  } else {
    std::printf("note: resuming a checkpoint written with batch size %lld at batch size %lld",
                static_cast<long long>(saved_batch), static_cast<long long>(batch_size));
  }
  if (before > 0) {
    // Rounded down at another world size alone: a few examples are seen again rather than skipped.
    std::printf("; mid-epoch position %lld per-rank batches (%lld examples) becomes %lld%s", static_cast<long long>(before),
                static_cast<long long>(seen), static_cast<long long>(resume_.skip_batches),
                seen % per_batch ? ", rounded down: the last few examples before it are seen again" : "");
  }
  std::printf("\n");
}

// ---- ckpt_path: a file, "last" or "best" ----

std::optional<std::string> CheckpointConnector::find_newest_checkpoint(std::vector<std::string>* looked) {
  Trainer& t = trainer_;
  if (!run_dir_.empty()) {  // the run the user pointed at, alone
    const std::string dir = (fs::path(run_dir_) / "checkpoints").string();
    looked->push_back(dir);
    return find_last_checkpoint(dir);
  }
  // This run's checkpoint directories first, then the newest version under lightning_logs.
  for (const auto& cb : t.callbacks_) {
    auto* mc = dynamic_cast<ModelCheckpoint*>(cb.get());
    if (!mc) continue;
    if (!mc->last_model_path().empty() && fs::exists(mc->last_model_path())) return mc->last_model_path();
    if (!mc->options().dirpath.empty()) {
      looked->push_back(mc->options().dirpath);
      if (auto found = find_last_checkpoint(mc->options().dirpath)) return found;
    }
  }
  const fs::path logs = fs::path(t.options_.default_root_dir) / "lightning_logs";
  std::optional<std::string> newest;
  std::vector<std::string> runs;  // the versions with checkpoints, newest first
  const std::vector<int> versions = CSVLogger::existing_versions(t.options_.default_root_dir);
  for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
    const std::string run = "version_" + std::to_string(*v);
    if (auto found = find_last_checkpoint((logs / run / "checkpoints").string())) {
      if (!newest) newest = found;
      runs.push_back(run);
    }
  }
  if (runs.size() > 1 && t.is_global_zero()) {
    std::string others;
    for (size_t i = 1; i < runs.size(); ++i) others += (i > 1 ? ", " : "") + runs[i];
    std::printf("note: %zu runs under %s have checkpoints; using the newest, %s (not %s); point at another with "
                "--config %s/<version>/config.yaml, or pass a checkpoint file\n",
                runs.size(), logs.string().c_str(), runs[0].c_str(), others.c_str(), logs.string().c_str());
  }
  if (!newest) looked->push_back((logs / "version_*" / "checkpoints").string());
  return newest;
}

namespace {

// The best_model_path a checkpoint's ModelCheckpoint state recorded: the one with `state_key`
// when present, else any ModelCheckpoint's; "" when none.
std::string recorded_best_path(const std::string& checkpoint, const std::string& state_key) {
  const nlohmann::json state = load_checkpoint(checkpoint).trainer_state;
  if (!state.is_object() || !state.contains("callbacks") || !state["callbacks"].is_object()) return "";
  const nlohmann::json& callbacks = state["callbacks"];
  if (callbacks.contains(state_key)) return callbacks[state_key].value("best_model_path", "");
  for (const auto& [key, cb] : callbacks.items()) {
    if (key.rfind("ModelCheckpoint", 0) == 0 && cb.is_object() && !cb.value("best_model_path", "").empty()) {
      return cb.value("best_model_path", "");
    }
  }
  return "";
}

}  // namespace

std::string CheckpointConnector::resolve_ckpt_path(const std::string& ckpt_path) {
  Trainer& t = trainer_;
  if (ckpt_path.empty()) return "";
  if (ckpt_path == "best") {
    ModelCheckpoint* mc = t.checkpoint_callback();
    if (!mc) {
      throw ConfigError("ckpt_path=\"best\" needs a ModelCheckpoint callback, and this Trainer has none "
                        "(enable_checkpointing=false?); pass the checkpoint's path instead");
    }
    std::string best = mc->best_model_path();
    std::vector<std::string> looked;
    if (best.empty()) {
      // No fit in this process (`tandem test --ckpt_path=best`): every checkpoint records its
      // ModelCheckpoint's best_model_path, so the newest one knows the run's best.
      if (auto newest = find_newest_checkpoint(&looked)) best = recorded_best_path(*newest, mc->state_key());
    }
    if (best.empty()) {
      throw ConfigError("ckpt_path=\"best\": no best checkpoint is known; this Trainer has not run fit() and no "
                        "checkpoint records one (looked in " + join(looked) + "); run fit() first, or pass a path");
    }
    if (!fs::exists(best)) throw ConfigError("ckpt_path=\"best\" is " + best + ", which no longer exists");
    return best;
  }
  if (ckpt_path == "last") {
    std::vector<std::string> looked;
    if (auto found = find_newest_checkpoint(&looked)) return *found;
    throw ConfigError("ckpt_path=\"last\": no checkpoint found; looked in " + join(looked) +
                      "; train first (ModelCheckpoint writes them), or pass a path");
  }
  if (!fs::is_regular_file(ckpt_path)) {
    throw ConfigError("ckpt_path=" + ckpt_path + " does not exist or is not a file; pass a checkpoint "
                      "written by ModelCheckpoint, or \"last\" / \"best\"");
  }
  return ckpt_path;
}

CheckpointConnector::ResumePoint CheckpointConnector::take_resume_point() {
  const ResumePoint point = resume_;
  resume_ = {};
  return point;
}

}  // namespace tandem::trainer
