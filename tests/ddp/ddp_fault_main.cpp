// A DDP training job in which one rank misbehaves at optimizer step 2, for the fault tests
// (tests/ddp/CMakeLists.txt checks each outcome with expect_job_failure.sh):
//   hang  the last rank stops calling collectives (sleeps): the others time out after
//         --timeout seconds with a CommError naming it, and the job is aborted
//   die   the last rank is killed (SIGKILL): the launcher ends the whole job
//   nan   the last rank's loss is NaN: every rank stops with NonFiniteLossError, exit 1
// and fail-fast (one rank fails outside any collective; the others must not wait for the
// timeout, and only that rank's error is printed):
//   root_is_file   default_root_dir is a regular file: rank 0 fails setting up the logs
//   ckpt_is_file   ModelCheckpoint's dirpath is under a regular file: rank 0 fails saving
//   step_raises    the last rank's training step 2 throws DataError
//   val_raises     the last rank's first validation batch throws DataError
//   log_raises     the last rank logs a 2-element tensor at step 2 (the logger's ValueError)
//   all_raise      every rank's training step 2 throws DataError (all announce, all abort)
// Usage: mpirun -np N test_ddp_fault MODE [timeout_seconds [bagua_async]]
// bagua_async: the same job under strategy=bagua algorithm=async (1 warm-up step, 1 ms rounds),
// whose background thread averages the weights on a communicator of its own meanwhile.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "collectives/communicator_factory.h"
#include "engine/trainer/callbacks/model_checkpoint.h"
#include "trainer_test_util.h"

namespace {

using namespace tandem;
using namespace tandem::trainer;

class Misbehave : public Callback {
 public:
  explicit Misbehave(std::string mode) : mode_(std::move(mode)) {}
  std::string name() const override { return "Misbehave"; }
  void on_train_batch_start(Trainer& t, LightningModule& m, const data::Batch&, int64_t) override {
    if (mode_ == "all_raise" && t.global_step() == 2) {
      throw DataError("injected failure in training step 2 on every rank, here rank " + std::to_string(t.global_rank()));
    }
    if (t.global_rank() != t.world_size() - 1 || t.global_step() != 2) return;
    if (mode_ == "step_raises") {
      throw DataError("injected failure in training step 2 on rank " + std::to_string(t.global_rank()));
    } else if (mode_ == "log_raises") {
      m.log("two_values", Tensor::full({2}, 1.0));
      return;
    }
    if (mode_ != "hang" && mode_ != "die") return;
    std::fprintf(stderr, "rank %d: misbehaving (%s) at step 2\n", t.global_rank(), mode_.c_str());
    if (mode_ == "hang") {
      sleep(600);
    } else {
      raise(SIGKILL);
    }
  }
  void on_validation_batch_start(Trainer& t, LightningModule&, const data::Batch&, int64_t) override {
    if (mode_ == "val_raises" && t.global_rank() == t.world_size() - 1) {
      throw DataError("injected failure in validation on rank " + std::to_string(t.global_rank()));
    }
  }

 private:
  std::string mode_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_ddp_fault hang|die|nan [timeout_seconds [bagua_async]]\n");
    return 2;
  }
  const std::string mode = argv[1];
  collectives::init_comm_runtime(collectives::CommBackend::Mpi, &argc, &argv);
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string root = "/tmp/tandem_ddp_fault_" + mode + "_" + std::to_string(getppid());
  const std::string file = root + "_file";  // a regular file where a directory is expected
  if ((mode == "root_is_file" || mode == "ckpt_is_file") && rank && std::string(rank) == "0") {
    std::FILE* f = std::fopen(file.c_str(), "w");
    if (f) std::fclose(f);
  }
  try {
    trainer::testing::SyntheticDataModule dm(64, 16, 4);
    trainer::testing::TinyClassifier model(0.05, 0.0);
    TrainerOptions o;
    o.accelerator = "cpu";
    o.devices = size ? std::atoi(size) : 1;
    o.strategy = "ddp";
    if (argc > 3 && std::string(argv[3]) == "bagua_async") {
      o.strategy = "bagua";
      o.strategy_options = {{"algorithm", "async"}, {"sync_interval_ms", "1"}, {"warmup_steps", "1"}};
    }
    o.default_root_dir = mode == "root_is_file" ? file : root;
    o.enable_progress_bar = false;
    o.enable_model_summary = false;
    o.enable_checkpointing = mode == "ckpt_is_file";
    o.num_sanity_val_steps = 0;
    o.max_epochs = 3;
    o.collective_timeout = argc > 2 ? std::atof(argv[2]) : 5.0;
    o.callbacks = {std::make_shared<Misbehave>(mode)};
    if (mode == "ckpt_is_file") {
      ModelCheckpointOptions c;
      c.dirpath = file + "/checkpoints";
      o.callbacks.push_back(std::make_shared<ModelCheckpoint>(c));
    }
    Trainer trainer(o);
    if (mode == "nan" && trainer.global_rank() == trainer.world_size() - 1) model.nan_at_step = 2;
    trainer.fit(model, dm);
    std::printf("rank %d: training finished (unexpected)\n", trainer.global_rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught %s\n", e.what());
    return 1;
  }
}
