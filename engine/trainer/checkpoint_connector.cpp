// What the Trainer puts in a checkpoint and how a run continues from one.
//
// trainer_state (JSON in the safetensors header):
//   tandem_version, world_size, precision
//   epoch, global_step            current_epoch and optimizer steps when it was written
//   loops.fit                     batch_in_epoch, total_batch_idx, epoch_finished: where the
//                                 fit loop stood (a mid-epoch save resumes at the next batch)
//   generator {seed, offset}      the Philox stream (dropout, init): restoring it makes the
//                                 resumed run draw the same masks as the uninterrupted one
//   callbacks {state_key: state}  ModelCheckpoint, EarlyStopping, ...
//   module                        LightningModule::on_save_checkpoint's extra state
//   hparams, datamodule_hparams
// Data order needs no state: a loader's epoch order is a pure function of (seed, epoch).
#include <cmath>
#include <filesystem>

#include "engine/accelerators/precision.h"
#include "engine/core/error.h"
#include "engine/tensor/generator.h"
#include "engine/trainer/checkpoint.h"
#include "engine/trainer/trainer.h"

#ifndef TANDEM_VERSION_STRING
#define TANDEM_VERSION_STRING "0.1.0"
#endif

namespace fs = std::filesystem;

namespace tandem::trainer {

nlohmann::json Trainer::dump_trainer_state() {
  nlohmann::json s;
  s["tandem_version"] = TANDEM_VERSION_STRING;
  s["world_size"] = world_size();
  s["precision"] = precision_name(plan_.precision);
  s["epoch"] = progress_.epoch;
  s["global_step"] = progress_.global_step;
  s["loops"]["fit"] = {{"batch_in_epoch", progress_.batch_in_epoch},
                       {"total_batch_idx", progress_.total_batch_idx},
                       {"epoch_finished", progress_.epoch_finished},
                       {"num_training_batches", num_training_batches_}};
  const Generator& g = default_generator();
  s["generator"] = {{"seed", g.seed}, {"offset", g.offset}};
  s["callbacks"] = nlohmann::json::object();
  for (const auto& cb : callbacks_) {
    nlohmann::json state = cb->state_dict();
    if (!state.is_object() || !state.empty()) s["callbacks"][cb->state_key()] = std::move(state);
  }
  nlohmann::json module_state = nlohmann::json::object();
  if (module_) {
    module_->on_save_checkpoint(module_state);
    s["hparams"] = module_->hparams;
  }
  s["module"] = module_state;
  s["datamodule_hparams"] = datamodule_ ? datamodule_->hparams() : nlohmann::json::object();
  for_each_callback([&](Callback& cb) { cb.on_save_checkpoint(*this, *module_, s); });
  return s;
}

void Trainer::save_checkpoint(const std::string& path) {
  TANDEM_CHECK(module_ != nullptr, ValueError, "save_checkpoint(" + path + "): no model is attached; call it during fit");
  // Every rank has chosen its file names (ModelCheckpoint checks which exist) before rank 0
  // writes, so all ranks agree on best_model_path and friends.
  strategy_->barrier("before save_checkpoint");
  if (is_global_zero()) {
    Checkpoint ckpt;
    ckpt.model = module_->state_dict();
    if (optimizer_config_.optimizer) ckpt.optimizer = optimizer_config_.optimizer->state_dict();
    ckpt.scheduler = optimizer_config_.scheduler ? optimizer_config_.scheduler->state_dict() : nlohmann::json();
    ckpt.trainer_state = dump_trainer_state();
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) throw DataError("cannot create the checkpoint directory " + parent.string() + ": " + ec.message());
    trainer::save_checkpoint(path, ckpt);
  }
  strategy_->barrier("save_checkpoint");
}

void Trainer::restore_weights(const std::string& path) {
  const Checkpoint ckpt = load_checkpoint(path);
  module_->load_state_dict(ckpt.model);
  if (ckpt.trainer_state.is_object() && ckpt.trainer_state.contains("module")) {
    module_->on_load_checkpoint(ckpt.trainer_state["module"]);
  }
}

void Trainer::restore_fit_state(const std::string& path) {
  const Checkpoint ckpt = load_checkpoint(path);
  module_->load_state_dict(ckpt.model);
  const nlohmann::json& s = ckpt.trainer_state;
  if (!s.is_object()) {
    throw DataError("cannot resume fit from " + path + ": it holds weights only (no trainer state); load it "
                    "for validate/test/predict, or resume from a checkpoint written by ModelCheckpoint");
  }
  try {
    if (ckpt.optimizer) {
      optimizer_config_.optimizer->load_state_dict(*ckpt.optimizer);
    }
    if (optimizer_config_.scheduler && !ckpt.scheduler.is_null()) optimizer_config_.scheduler->load_state_dict(ckpt.scheduler);

    const nlohmann::json& fit = s.at("loops").at("fit");
    const int64_t epoch = s.at("epoch").get<int64_t>();
    const bool finished = fit.at("epoch_finished").get<bool>();
    progress_.global_step = s.at("global_step").get<int64_t>();
    progress_.batches_that_stepped = progress_.global_step;
    progress_.total_batch_idx = fit.at("total_batch_idx").get<int64_t>();
    // A finished epoch resumes at the next one; a save inside an epoch resumes at its next batch.
    progress_.epoch = finished ? epoch + 1 : epoch;
    resume_skip_batches_ = finished ? 0 : fit.at("batch_in_epoch").get<int64_t>();
    progress_.batch_in_epoch = resume_skip_batches_;

    const nlohmann::json& g = s.at("generator");
    default_generator().seed = g.at("seed").get<uint64_t>();
    default_generator().offset = g.at("offset").get<uint64_t>();

    const nlohmann::json& cbs = s.value("callbacks", nlohmann::json::object());
    for (const auto& cb : callbacks_) {
      if (cbs.contains(cb->state_key())) cb->load_state_dict(cbs.at(cb->state_key()));
    }
    if (s.contains("module")) module_->on_load_checkpoint(s.at("module"));
    for_each_callback([&](Callback& cb) { cb.on_load_checkpoint(*this, *module_, s); });
  } catch (const nlohmann::json::exception& e) {
    throw DataError("cannot resume fit from " + path + ": its trainer state is incomplete (" + e.what() +
                    "); it was not written by this Trainer's ModelCheckpoint");
  }
  if (s.contains("world_size") && s["world_size"].get<int>() != world_size()) {
    // Weights and optimizer state are the same on every rank, so they load at any world size;
    // epochs and optimizer steps mean the same too. Inside an epoch, though, a rank's batch
    // index counts per-rank batches: k of them at W ranks cover the first k*W*B examples of the
    // epoch's global order (DistributedSampler), so at W' ranks that is k*W/W' batches,
    // rounded down (a few examples are seen again rather than skipped).
    const int saved = s["world_size"].get<int>();
    const int64_t before = resume_skip_batches_;
    if (saved > 0 && before > 0) resume_skip_batches_ = before * saved / world_size();
    progress_.batch_in_epoch = resume_skip_batches_;
    if (is_global_zero()) {
      std::printf("note: resuming a checkpoint written at world size %d on world size %d", saved, world_size());
      if (before > 0) {
        std::printf("; mid-epoch position %lld per-rank batches becomes %lld", static_cast<long long>(before),
                    static_cast<long long>(resume_skip_batches_));
      }
      std::printf("\n");
    }
  }
}

}  // namespace tandem::trainer
