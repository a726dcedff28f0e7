// `tandem` with one fault injected into fit, for the restart tests (test_elastic_cli.cpp). The
// program is Tandem's own command line plus one callback (cli::add_fit_callbacks), so the
// restart agent relaunches this same program and the fault can strike any attempt.
//
//   TANDEM_TEST_FAULT=MODE:RANK:STEP[:every]
//     kill           rank RANK raises SIGKILL when global step STEP starts
//     hang_backward  rank RANK sleeps inside backward (a parameter's gradient hook) at step STEP
//   The fault strikes in the first attempt only (TANDEM_RESTART_COUNT unset or 0), in every
//   attempt with ":every".
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "apps/tandem/subcommands.h"
#include "engine/trainer/job_failure.h"
#include "engine/trainer/trainer.h"

namespace {

using namespace tandem;

struct Fault {
  std::string mode;
  int rank = -1;
  int64_t step = -1;
  bool every = false;
};

class InjectedFault : public trainer::Callback {
 public:
  explicit InjectedFault(Fault fault) : fault_(std::move(fault)) {}
  std::string name() const override { return "InjectedFault"; }

  void on_train_start(trainer::Trainer& t, trainer::LightningModule& module) override {
    if (fault_.mode != "hang_backward" || t.global_rank() != fault_.rank) return;
    trainer::Trainer* trainer = &t;
    const int64_t step = fault_.step;
    module.parameters().front().register_post_accumulate_grad_hook([trainer, step](const Tensor&) {
      if (trainer->global_step() != step) return;
      std::fprintf(stderr, "rank %d: injected fault: hanging inside backward at step %lld\n", trainer->global_rank(),
                   static_cast<long long>(step));
      for (;;) pause();
    });
  }

  void on_train_batch_start(trainer::Trainer& t, trainer::LightningModule&, const data::Batch&, int64_t) override {
    if (fault_.mode != "kill" || t.global_rank() != fault_.rank || t.global_step() != fault_.step) return;
    std::fprintf(stderr, "rank %d: injected fault: killed at step %lld\n", t.global_rank(), static_cast<long long>(fault_.step));
    std::fflush(stderr);
    raise(SIGKILL);
  }

 private:
  Fault fault_;
};

std::optional<Fault> fault_from_environment() {
  const char* spec = std::getenv("TANDEM_TEST_FAULT");
  if (!spec || !*spec) return std::nullopt;
  Fault f;
  std::stringstream in(spec);
  std::string rank, step, every;
  std::getline(in, f.mode, ':');
  std::getline(in, rank, ':');
  std::getline(in, step, ':');
  std::getline(in, every, ':');
  f.rank = std::atoi(rank.c_str());
  f.step = std::atoll(step.c_str());
  f.every = every == "every";
  const char* attempt = std::getenv(trainer::kRestartCountVariable);
  if (!f.every && attempt && std::string(attempt) != "0") return std::nullopt;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (const std::optional<Fault> fault = fault_from_environment()) {
    tandem::cli::add_fit_callbacks([fault] {
      return std::vector<std::shared_ptr<tandem::trainer::Callback>>{std::make_shared<InjectedFault>(*fault)};
    });
  }
  return tandem::cli::run_cli(argc > 0 ? argv[0] : "faulty_tandem", std::vector<std::string>(argv + 1, argv + argc));
}
