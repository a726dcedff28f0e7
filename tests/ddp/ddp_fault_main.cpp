// A DDP training job in which one rank misbehaves at optimizer step 2, for the fault tests
// (tests/ddp/CMakeLists.txt checks each outcome with expect_job_failure.sh):
//   hang  the last rank stops calling collectives (sleeps): the others time out after
//         --timeout seconds with a CommError naming it, and the job is aborted
//   die   the last rank is killed (SIGKILL): the launcher ends the whole job
//   nan   the last rank's loss is NaN: every rank stops with NonFiniteLossError, exit 1
// Usage: mpirun -np N test_ddp_fault hang|die|nan [timeout_seconds [bagua_async]]
// bagua_async: the same job under strategy=bagua algorithm=async (1 warm-up step, 1 ms rounds),
// whose background thread averages the weights on a communicator of its own meanwhile.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "collectives/communicator_factory.h"
#include "trainer_test_util.h"

namespace {

using namespace tandem;
using namespace tandem::trainer;

class Misbehave : public Callback {
 public:
  explicit Misbehave(std::string mode) : mode_(std::move(mode)) {}
  std::string name() const override { return "Misbehave"; }
  void on_train_batch_start(Trainer& t, LightningModule&, const data::Batch&, int64_t) override {
    if (t.global_rank() != t.world_size() - 1 || t.global_step() != 2) return;
    std::fprintf(stderr, "rank %d: misbehaving (%s) at step 2\n", t.global_rank(), mode_.c_str());
    if (mode_ == "hang") {
      sleep(600);
    } else if (mode_ == "die") {
      raise(SIGKILL);
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
  const std::string root = "/tmp/tandem_ddp_fault_" + mode + "_" + std::to_string(getppid());
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
    o.default_root_dir = root;
    o.enable_progress_bar = false;
    o.enable_model_summary = false;
    o.enable_checkpointing = false;
    o.num_sanity_val_steps = 0;
    o.max_epochs = 3;
    o.collective_timeout = argc > 2 ? std::atof(argv[2]) : 5.0;
    o.callbacks = {std::make_shared<Misbehave>(mode)};
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
