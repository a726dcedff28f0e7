#include "engine/strategies/ddp_strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "collectives/communicator_factory.h"
#include "engine/strategies/collective_values.h"
#include "engine/strategies/execution_plan.h"
#include "engine/strategies/mpirun_launcher.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem {

using collectives::CommBackend;

namespace {

// "auto": nccl for CUDA when it was built in, else mpi; a world of one needs no transport.
CommBackend comm_backend_for(const StrategyEnvironment& env, Device device, const std::string& strategy) {
  const std::string requested = env.process_group_backend.empty() ? "auto" : env.process_group_backend;
  if (requested != "auto") {
    const CommBackend backend = collectives::parse_comm_backend(requested);
    if (backend == CommBackend::Local && env.world_size > 1) {
      throw ConfigError("process_group_backend=local is a world of one process, but strategy=" + strategy +
                        " has world size " + std::to_string(env.world_size) + "; use mpi (CPU or GPU) or nccl (GPU)");
    }
    if (backend == CommBackend::Nccl && !device.is_cuda()) {
      throw ConfigError("process_group_backend=nccl moves GPU buffers, but this process trains on " + device.str() +
                        "; use mpi (Lightning's gloo role) for CPU training");
    }
    return backend;
  }
  if (env.world_size == 1) return CommBackend::Local;
  if (device.is_cuda() && collectives::comm_backend_compiled_in(CommBackend::Nccl)) return CommBackend::Nccl;
  return CommBackend::Mpi;
}

}  // namespace

DDPStrategy::~DDPStrategy() = default;

void DDPStrategy::launch(const ExecutionPlan& plan, const std::vector<std::string>& argv) {
  if (!collectives::comm_backend_compiled_in(CommBackend::Mpi)) {
    throw ConfigError("strategy=" + name() + " needs " + std::to_string(plan.world_size) +
                      " processes, but Tandem was built without MPI, which starts and connects them; install "
                      "Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild, or train with "
                      "--trainer.devices=1");
  }
  relaunch_with_mpirun(plan, argv);
}

std::shared_ptr<collectives::Communicator> make_world_communicator(const StrategyEnvironment& env,
                                                                   const std::string& strategy) {
  if (!(env.collective_timeout_s > 0) || !std::isfinite(env.collective_timeout_s)) {
    throw ConfigError("collective_timeout=" + std::to_string(env.collective_timeout_s) +
                      " is not valid: expected a number of seconds > 0 (default 600)");
  }
  collectives::CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(env.collective_timeout_s * 1000.0));
  const Device device = env.tensor_devices.front();
  // NCCL drives this rank's GPU (the plan's process device, e.g. cuda:3 for --trainer.devices=2,3).
  const CommBackend backend = comm_backend_for(env, device, strategy);
  const int device_index = device.is_cuda() ? device.index : -1;
  try {
    if (env.host_comm) return collectives::make_communicator(backend, *env.host_comm, options, device_index);
    return collectives::make_communicator(backend, options, device_index);
  } catch (const DeviceError& e) {
    // The collectives know no command line; the Trainer's flag for choosing another backend:
    throw DeviceError(std::string(e.what()) + " (--trainer.process_group_backend=mpi)");
  }
}

void DDPStrategy::setup_environment(const StrategyEnvironment& env) {
  setup_environment(env, make_world_communicator(env, name()));
}

void DDPStrategy::setup_environment(const StrategyEnvironment& env, std::shared_ptr<collectives::Communicator> comm) {
  TANDEM_CHECK(comm != nullptr, ValueError, "strategy=" + name() + ": the communicator is null");
  Strategy::setup_environment(env);
  if (comm->size() != env.world_size) {
    throw ConfigError("strategy=" + name() + " planned " + std::to_string(env.world_size) + " processes, but the " +
                      comm->backend_name() + " communicator has " + std::to_string(comm->size()) +
                      "; launch with mpirun -np " + std::to_string(env.world_size));
  }
  comm_ = std::move(comm);
  node_rank_ = env.cluster.node_rank < 0 ? 0 : env.cluster.node_rank;
  // NCCL moves only tensors on this rank's GPU; MPI takes host tensors (and stages device ones).
  comm_device_ = comm_->buffer_device(root_device());
}

void DDPStrategy::setup_replica(trainer::LightningModule& module) {
  TANDEM_CHECK(comm_ != nullptr, ValueError, "strategy=" + name() + ": setup_module before setup_environment");
  Strategy::setup_module(module);
  NoGradGuard no_grad;
  // Rank 0's initial weights everywhere (a seed that differs per rank must not matter).
  for (auto& [name, p] : module.named_parameters()) comm_->broadcast(p, 0);
  for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
}

void DDPStrategy::setup_module(trainer::LightningModule& module) {
  setup_replica(module);
  std::vector<Tensor> trainable;
  for (const Tensor& p : module.parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  if (reducer_) finished_stats_ += reducer_->stats();
  reducer_.reset();
  reducer_ = std::make_unique<Reducer>(std::move(trainable), comm_, reducer_options_);
}

collectives::CommTraffic DDPStrategy::traffic_so_far() const { return comm_->traffic(); }

void DDPStrategy::begin_step_traffic() { step_traffic_.begin(traffic_so_far()); }

void DDPStrategy::end_step_traffic() { step_traffic_.end(traffic_so_far()); }

std::optional<StepTraffic> DDPStrategy::step_traffic() const { return step_traffic_.total(); }

void DDPStrategy::before_training_step(trainer::LightningModule& module) {
  begin_step_traffic();
  if (comm_->size() == 1) return;
  NoGradGuard no_grad;
  for (auto& [name, b] : module.named_buffers()) comm_->broadcast(b, 0);
}

void DDPStrategy::backward(const Tensor& loss, double factor, bool will_step) {
  TANDEM_CHECK(reducer_ != nullptr, ValueError,
               "strategy=" + name() + ": backward before setup_module; the Trainer sets the module up first");
  reducer_->prepare_for_backward(will_step);
  Strategy::backward(loss, factor, will_step);
}

void DDPStrategy::optimizer_step(optim::Optimizer& optimizer, const std::function<void(bool)>& before_step) {
  if (reducer_) reducer_->finalize();
  // Gradients are identical on every rank after the allreduce, so a skip decision is too.
  Strategy::optimizer_step(optimizer, before_step);
  after_optimizer_step_communication();
  end_step_traffic();
}

double DDPStrategy::reduce(double value, trainer::ReduceFx reduce_fx) const {
  return reduce_value(*comm_, comm_device_, value, reduce_fx);
}

bool DDPStrategy::reduce_any(bool decision) const { return reduce_any_rank(*comm_, comm_device_, decision); }

void DDPStrategy::barrier(const std::string& /*where*/) const {
  if (comm_->size() > 1) comm_->barrier();
}

int64_t DDPStrategy::broadcast_from_zero(int64_t value) const { return broadcast_value(*comm_, comm_device_, value); }

Tensor DDPStrategy::all_gather(const Tensor& tensor) const { return all_gather_tensor(*comm_, comm_device_, tensor); }

std::string DDPStrategy::summary() const {
  ReducerStats s = finished_stats_;
  if (reducer_) s += reducer_->stats();
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: %d ranks over %s, %zu gradient bucket(s); %lld synchronized steps, exposed communication "
                "%.3f ms/step, %lld of %lld bucket allreduces started during backward",
                name().c_str(), comm_->size(), comm_->backend_name().c_str(), reducer_ ? reducer_->buckets().size() : size_t(0),
                static_cast<long long>(s.reductions), s.mean_exposed_ms(),
                static_cast<long long>(s.buckets_launched_in_backward), static_cast<long long>(s.bucket_launches));
  return line + step_traffic_.summary();
}

void HorovodStrategy::launch(const ExecutionPlan& plan, const std::vector<std::string>& /*argv*/) {
  throw ConfigError("strategy=horovod runs one process per device started by mpirun or horovodrun, and Tandem never "
                    "starts them itself; this process was started without a launcher, but the plan needs " +
                    std::to_string(plan.world_size) + " processes. Start the job as: " +
                    plan.launch.value_or("mpirun -np N ...") + " (or horovodrun -np " + std::to_string(plan.world_size) +
                    " ...), or use --trainer.strategy=ddp, which relaunches itself");
}

void HorovodStrategy::setup_environment(const StrategyEnvironment& env) {
  if (!collectives::comm_backend_compiled_in(CommBackend::Mpi)) {
    throw ConfigError("strategy=horovod averages gradients over MPI, but Tandem was built without MPI; install Open MPI "
                      "(apt-get install libopenmpi-dev openmpi-bin) and rebuild, or use --trainer.strategy=single_device");
  }
  StrategyEnvironment mpi = env;
  // Horovod's transport is MPI: the CPU path always, GPUs through staged (or CUDA-aware) MPI.
  if (mpi.process_group_backend == "auto") mpi.process_group_backend = mpi.world_size == 1 ? "local" : "mpi";
  DDPStrategy::setup_environment(mpi);
}

void DDPSpawnStrategy::validate(const StrategyContext& context) const {
  if (context.num_nodes != 1) {
    throw ConfigError("strategy=ddp_spawn starts its processes from the first one, on its node, but num_nodes=" +
                      std::to_string(context.num_nodes) + "; use --trainer.strategy=ddp under mpirun/srun across nodes");
  }
}

void DDPSpawnStrategy::launch(const ExecutionPlan& plan, const std::vector<std::string>& /*argv*/) {
  if (!collectives::comm_backend_compiled_in(CommBackend::Mpi)) {
    throw ConfigError("strategy=ddp_spawn starts its processes with MPI_Comm_spawn, but Tandem was built without MPI; "
                      "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild, or train with "
                      "--trainer.devices=1");
  }
  to_spawn_ = plan.world_size - 1;
}

void DDPSpawnStrategy::setup_environment(const StrategyEnvironment& env) {
  collectives::CommOptions options;
  if (env.collective_timeout_s > 0 && std::isfinite(env.collective_timeout_s)) {
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(env.collective_timeout_s * 1000.0));
  }
  if (to_spawn_ > 0) {
    // This program again, with the arguments it was started with.
    std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
    if (!args.empty()) args.erase(args.begin());
    std::error_code ec;
    const std::string program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    std::printf("Tandem: strategy=ddp_spawn spawning %d process(es) of %s (MPI_Comm_spawn); this one is rank 0\n",
                to_spawn_, program.c_str());
    std::fflush(stdout);
    const std::vector<std::string> vars{"TANDEM_SPAWN_WORLD_SIZE=" + std::to_string(env.world_size)};
    auto world = collectives::spawn_world(program, args, to_spawn_, vars, options);
    to_spawn_ = 0;
    return DDPStrategy::setup_environment(env, std::move(world));
  }
  if (env.cluster.spawned_by_parent()) return DDPStrategy::setup_environment(env, collectives::join_spawned_world(options));
  DDPStrategy::setup_environment(env);
}

}  // namespace tandem
