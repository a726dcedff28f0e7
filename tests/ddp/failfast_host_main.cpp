// Fail-fast inside a host code that owns MPI (docs/COLLECTIVES.md, "When one rank fails"): the
// host initializes MPI, trains with TrainerOptions::communicator = its MPI_COMM_WORLD, and its
// last rank's training step 2 throws DataError. What the host must get, checked on every rank:
//   - the failing rank: its DataError from fit();
//   - every other rank: collectives::PeerFailedError from fit(), naming the failing rank, within
//     30 s although collective_timeout is 600 s (under 1 s in a plain build);
//   - nobody aborts the job (the host decides): the host's own communicator still works, and
//     the host agrees on the verdict over it and ends the job with MPI_Abort (what a host does
//     after a failed rank; docs say why not MPI_Finalize).
// Exit 0 (through MPI_Abort(…, 0)) when all holds. Usage: mpirun -np N failfast_host
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "collectives/mpi/host_comm.h"
#include "collectives/rank_failure.h"
#include "trainer_test_util.h"

using namespace tandem;
using namespace tandem::trainer;

namespace {

class FailAtStepTwo : public Callback {
 public:
  std::string name() const override { return "FailAtStepTwo"; }
  void on_train_batch_start(Trainer& t, LightningModule&, const data::Batch&, int64_t) override {
    if (t.global_rank() == t.world_size() - 1 && t.global_step() == 2)
      throw DataError("host test: injected failure on rank " + std::to_string(t.global_rank()));
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int failing = size - 1;
  std::string got = "nothing", message;
  double seconds = 0;
  {
    trainer::testing::SyntheticDataModule dm(64, 16, 4);
    trainer::testing::TinyClassifier model(0.05, 0.0);
    TrainerOptions o;
    o.accelerator = "cpu";
    o.devices = size;
    o.strategy = "ddp";
    o.communicator = collectives::host_comm(MPI_COMM_WORLD);
    o.default_root_dir = "/tmp/tandem_failfast_host";
    o.enable_progress_bar = false;
    o.enable_model_summary = false;
    o.enable_checkpointing = false;
    o.num_sanity_val_steps = 0;
    o.max_epochs = 3;
    o.collective_timeout = 600;
    o.callbacks = {std::make_shared<FailAtStepTwo>()};
    Trainer trainer(o);
    const auto start = std::chrono::steady_clock::now();
    try {
      trainer.fit(model, dm);
    } catch (const collectives::PeerFailedError& e) {
      got = "PeerFailedError";
      message = e.what();
    } catch (const DataError& e) {
      got = "DataError";
      message = e.what();
    } catch (const std::exception& e) {
      got = "another exception";
      message = e.what();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool ok = seconds < 30.0;  // collective_timeout is 600 s; a plain build takes under 1 s
  if (rank == failing) {
    ok = ok && got == "DataError" && message.find("injected failure on rank " + std::to_string(failing)) != std::string::npos;
  } else {
    ok = ok && got == "PeerFailedError" &&
         message.find("stopped because rank " + std::to_string(failing) + " failed (DataError") != std::string::npos;
  }
  std::printf("rank %d: fit threw %s after %.1f s: %s -> %s\n", rank, got.c_str(), seconds, message.c_str(),
              ok ? "as documented" : "NOT as documented");
  std::fflush(stdout);
  int good = ok ? 1 : 0, all_good = 0;
  MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);  // the host's communicator still works
  if (rank == 0) std::printf("failfast host: %s\n", all_good ? "passed" : "FAILED");
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  // A rank's Tandem communicator keeps requests that can never complete: end the job as a host
  // does after a failed rank.
  MPI_Abort(MPI_COMM_WORLD, all_good ? 0 : 1);
  return 0;
}
