#include "engine/strategies/execution_plan.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/accelerators/device_parsing.h"

namespace tandem {

namespace {

// auto_select_gpus: how many free GPUs to look for, or 0 when the devices value names indices.
int usable_devices_wanted(const DevicesSpec& spec, size_t parsed) {
  if (spec.kind() == DevicesSpec::Kind::List) return 0;
  if (spec.kind() == DevicesSpec::Kind::String && spec.as_string().find(',') != std::string::npos) return 0;
  int k = 0;
  const bool all = spec.is_auto() || (spec.kind() == DevicesSpec::Kind::Int && spec.as_int() == -1) ||
                   (spec.kind() == DevicesSpec::Kind::String && parse_int_strict(spec.as_string(), &k) && k == -1);
  return all ? -1 : static_cast<int>(parsed);
}

std::string list_str(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string launch_command(const ExecutionPlan& plan, const std::string& program) {
  std::string cmd = "mpirun -np " + std::to_string(plan.world_size);
  if (plan.num_nodes > 1) {
    cmd += " -H ";
    for (int n = 0; n < plan.num_nodes; ++n) {
      if (n > 0) cmd += ',';
      cmd += "<node" + std::to_string(n) + ">:" + std::to_string(plan.processes_per_node);
    }
  }
  return cmd + " " + program;
}

// Under a launcher, the launcher decides how many processes exist; they must be exactly the
// processes the flags ask for, or ranks would wait forever for peers that never come.
void check_against_launcher(ExecutionPlan& plan, bool on_gpus) {
  const ClusterEnvironment& c = plan.cluster;
  check_slurm_allocation(c, {plan.num_nodes, static_cast<int>(plan.devices.size()), plan.processes_per_node, plan.strategy,
                             on_gpus});
  if (c.world_size < 0) {
    plan.notes.push_back("the " + c.name + " launcher does not export the world size; it is "
                         "checked against devices x num_nodes when MPI starts");
  } else if (c.world_size != plan.world_size) {
    const std::string ask = plan.processes_per_node == static_cast<int>(plan.devices.size())
        ? "devices x num_nodes = " + std::to_string(plan.devices.size()) + " x " + std::to_string(plan.num_nodes)
        : "strategy=" + plan.strategy + " runs " + std::to_string(plan.processes_per_node) +
              " process per node x num_nodes " + std::to_string(plan.num_nodes);
    throw ConfigError("the " + c.name + " launcher started " + std::to_string(c.world_size) +
                      " processes, but " + ask + " = " + std::to_string(plan.world_size) +
                      " for strategy=" + plan.strategy + "; make them equal (launch with -np " +
                      std::to_string(plan.world_size) + ", or change --trainer.devices / "
                      "--trainer.num_nodes)");
  }
  if (c.local_rank >= plan.processes_per_node) {
    throw ConfigError("the " + c.name + " launcher gave this process local rank " +
                      std::to_string(c.local_rank) + ", but strategy=" + plan.strategy + " runs only " +
                      std::to_string(plan.processes_per_node) + " process(es) per node; start " +
                      std::to_string(plan.processes_per_node) + " per node (mpirun -npernode " +
                      std::to_string(plan.processes_per_node) + ")");
  }
  if (c.node_rank >= plan.num_nodes) {
    throw ConfigError("the " + c.name + " launcher puts this process on node " +
                      std::to_string(c.node_rank) + ", but num_nodes=" + std::to_string(plan.num_nodes) +
                      "; set --trainer.num_nodes to the number of nodes in the job");
  }
}

}  // namespace

ExecutionPlan plan_execution(const HardwareOptions& options, const std::string& program,
                             const EnvLookup& env, const AcceleratorRegistry& accelerators,
                             const StrategyRegistry& strategies) {
  ExecutionPlan plan;
  validate_num_nodes(options.num_nodes);
  plan.num_nodes = options.num_nodes;
  const Precision requested_precision = parse_precision(options.precision);  // fail early

  AcceleratorChoice acc = select_accelerator(options.accelerator, accelerators);
  plan.accelerator = acc.name;
  plan.notes = acc.notes;

  plan.cluster = options.cluster ? *options.cluster : detect_cluster_environment(env);
  std::vector<int> indices = acc.accelerator->parse_devices(options.devices);
  // `mpirun -np N tandem fit --trainer.strategy=ddp` on CPUs: devices=auto means "the processes
  // the launcher started on this node" (one process per CPU device), not 1.
  if (options.devices.is_auto() && plan.cluster.launched() && plan.cluster.world_size > 0 &&
      plan.cluster.world_size % options.num_nodes == 0) {
    const int per_node = plan.cluster.world_size / options.num_nodes;
    if (auto launched = acc.accelerator->auto_devices_as_launched(per_node)) {
      indices = *launched;
      if (per_node > 1) {
        plan.notes.push_back("devices=auto on " + acc.name + " under " + plan.cluster.name + ": " +
                             std::to_string(per_node) + " process(es) per node, as launched");
      }
    }
  }
  if (options.auto_select_gpus) {
    const int wanted = usable_devices_wanted(options.devices, indices.size());
    if (auto usable = wanted != 0 ? acc.accelerator->find_usable_devices(wanted) : std::nullopt) {
      indices = *usable;
      plan.notes.push_back("auto_select_gpus picked the free " + acc.name + " devices " + list_str(indices));
    } else if (wanted == 0) {
      plan.notes.push_back("auto_select_gpus has no effect: devices=" + options.devices.str() +
                           " names the GPUs explicitly");
    }
  }
  plan.devices = acc.accelerator->get_parallel_devices(indices);
  if (auto note = acc.accelerator->devices_note(indices)) plan.notes.push_back(*note);

  StrategyChoice st = select_strategy(
      options.strategy, StrategyContext{acc.name, static_cast<int>(indices.size()), options.num_nodes},
      strategies, options.strategy_options);
  plan.strategy = st.name;
  plan.notes.insert(plan.notes.end(), st.notes.begin(), st.notes.end());
  plan.processes_per_node = st.strategy->processes_per_node(static_cast<int>(indices.size()));
  plan.world_size = plan.processes_per_node * plan.num_nodes;

  PrecisionChoice prec = resolve_precision(requested_precision, *acc.accelerator);
  plan.precision = prec.precision;
  if (prec.note) plan.notes.push_back(*prec.note);
  st.strategy->validate_precision(plan.precision);

  if (plan.cluster.launched()) {
    check_against_launcher(plan, acc.accelerator->allocated_as_gpus());
  } else if (plan.world_size > 1) {
    plan.launch = st.strategy->launch_kind() == LaunchKind::Spawn
                      ? program + " (rank 0; it spawns the other " + std::to_string(plan.world_size - 1) +
                            " with MPI_Comm_spawn)"
                      : launch_command(plan, program);
  }
  // One process per device: the local rank picks the device. A process that drives all its
  // node's devices (dp, single_device) is reported by its first, root device. A job still to
  // be launched has no process of its own yet.
  const int local = plan.cluster.launched() ? plan.cluster.local_rank : 0;
  if (plan.launch) {
    // left empty: this process only plans; each launched rank picks its own device
  } else if (plan.processes_per_node == static_cast<int>(plan.devices.size()) && local >= 0) {
    plan.process_device = plan.devices[static_cast<size_t>(local)];
  } else if (plan.processes_per_node == 1) {
    plan.process_device = plan.devices.front();
  }
  plan.live_accelerator = std::move(acc.accelerator);
  plan.live_strategy = std::move(st.strategy);
  return plan;
}

std::string ExecutionPlan::to_json(int indent) const {
  nlohmann::ordered_json j;
  j["accelerator"] = accelerator;
  j["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : devices) j["devices"].push_back(d.str());
  j["num_devices"] = devices.size();
  j["strategy"] = strategy;
  j["num_nodes"] = num_nodes;
  j["world_size"] = world_size;
  j["precision"] = precision_name(precision);
  j["cluster_environment"] = cluster.name;
  j["launch"] = launch ? nlohmann::ordered_json(*launch) : nlohmann::ordered_json(nullptr);
  if (live_strategy) {
    static const char* kLaunchers[] = {"none", "mpirun relaunch", "external (mpirun/horovodrun)", "spawn"};
    j["launcher"] = kLaunchers[static_cast<int>(live_strategy->launch_kind())];
  }
  j["processes_per_node"] = processes_per_node;
  j["devices_per_process"] = processes_per_node > 0 ? devices.size() / size_t(processes_per_node) : 0;
  j["global_rank"] = cluster.global_rank;
  j["local_rank"] = cluster.local_rank;
  j["node_rank"] = cluster.node_rank;
  j["process_device"] = process_device ? nlohmann::ordered_json(process_device->str())
                                       : nlohmann::ordered_json(nullptr);
  j["notes"] = notes;
  return j.dump(indent);
}

}  // namespace tandem
