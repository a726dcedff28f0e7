// AcceleratorRegistry / StrategyRegistry behaviour, "auto" selection, precision, and the XPU
// accelerator registered by a user program.
#include <gtest/gtest.h>

#include "apps/examples/xpu/xpu_accelerator.h"
#include "base/error.h"
#include "engine/accelerators/accelerator_registry.h"
#include "engine/accelerators/cpu_accelerator.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/accelerators/precision.h"
#include "engine/strategies/execution_plan.h"
#include "engine/strategies/strategy.h"
#include "kernels/cuda/device_query.h"
#include "tests/accelerators/expect_error.h"
#include "tests/accelerators/scoped_env.h"

using tandem::ConfigError;

namespace {
tandem::EnvLookup no_launcher() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}
}  // namespace

TEST(AcceleratorRegistry, HasCpuAndCuda) {
  auto names = tandem::accelerator_registry().names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
  EXPECT_FALSE(tandem::accelerator_registry().get("cuda").description.empty());
}

TEST(AcceleratorRegistry, DuplicateNeedsOverride) {
  tandem::AcceleratorRegistry registry;
  xpu_example::register_xpu(registry);
  expect_error<ConfigError>([&] { xpu_example::register_xpu(registry); }, {"'xpu' is already registered", "override"});
  registry.add("XPU", "replacement", [](const tandem::InitParams& p) {
    return std::make_unique<xpu_example::XPUAccelerator>(p);
  }, {{"device_count", "2"}}, /*override_existing=*/true);
  EXPECT_EQ(registry.get("xpu").description, "replacement");
  EXPECT_EQ(registry.create("xpu")->auto_device_count(), 2);
}

TEST(AcceleratorRegistry, DefaultParamsAndOverrides) {
  tandem::AcceleratorRegistry registry;
  xpu_example::register_xpu(registry);
  EXPECT_EQ(registry.get("xpu").default_params.at("device_count"), "4");
  EXPECT_EQ(registry.create("xpu")->auto_device_count(), 4);
  EXPECT_EQ(registry.create("Xpu", {{"device_count", "8"}})->auto_device_count(), 8);
  // A parameter the entry does not declare is refused with the ones it does.
  expect_error<ConfigError>([&] { registry.create("xpu", {{"device_cnt", "8"}}); },
                            {"accelerator 'xpu' has no option 'device_cnt'", "its options are: device_count"});
}

TEST(AcceleratorRegistry, UnknownListsRegistered) {
  expect_error<ConfigError>([] { tandem::select_accelerator("tpu"); },
                            {"unknown accelerator 'tpu'", "auto", "gpu (= cuda)", "cpu, cuda"});
}

// A typo of a registered name or option is answered with the closest one, from the registry.
TEST(AcceleratorRegistry, TyposSuggestTheClosestNameAndOption) {
  expect_error<ConfigError>([] { tandem::select_accelerator("cudda"); },
                            {"unknown accelerator 'cudda' (did you mean 'cuda'?)", "cpu, cuda"});
  tandem::AcceleratorRegistry registry;
  xpu_example::register_xpu(registry);
  expect_error<ConfigError>([&] { registry.create("xpu", {{"device_cont", "8"}}); },
                            {"has no option 'device_cont' (given device_cont=8) (did you mean 'device_count'?)"});
  expect_error<ConfigError>([&] { registry.get("xpv"); },
                            {"unknown accelerator 'xpv' (did you mean 'xpu'?); registered accelerators: xpu"});
  // Nothing close: no guess, only the list.
  const std::string far = [] {
    try {
      tandem::select_accelerator("quantum_annealer");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(far.find("unknown accelerator 'quantum_annealer'; choose auto"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(AcceleratorSelection, AutoPicksCudaWhenPresent) {
  auto env = simulated_gpus(2);
  auto choice = tandem::select_accelerator("auto");
  EXPECT_EQ(choice.name, "cuda");
  ASSERT_FALSE(choice.notes.empty());
  EXPECT_NE(choice.notes[0].find("picked cuda"), std::string::npos);
  EXPECT_NE(choice.notes[0].find("2 simulated CUDA devices"), std::string::npos);
}

TEST(AcceleratorSelection, AutoPicksCpuWithoutGpusAndSaysWhy) {
  auto env = simulated_gpus(0);
  auto choice = tandem::select_accelerator("AUTO");
  EXPECT_EQ(choice.name, "cpu");
  ASSERT_EQ(choice.notes.size(), 1u);
  EXPECT_NE(choice.notes[0].find("picked cpu: no usable CUDA device"), std::string::npos);
}

TEST(AcceleratorSelection, GpuMeansCuda) {
  auto env = simulated_gpus(1);
  EXPECT_EQ(tandem::select_accelerator("gpu").name, "cuda");
  EXPECT_EQ(tandem::select_accelerator("CUDA").name, "cuda");
}

TEST(AcceleratorSelection, CudaWithoutGpusListsAvailable) {
  auto env = simulated_gpus(0);
  expect_error<ConfigError>([] { tandem::select_accelerator("cuda"); },
                            {"accelerator=cuda is not available", "0 simulated", "accelerators available: cpu"});
  expect_error<ConfigError>([] { tandem::select_accelerator("gpu"); }, {"accelerator=gpu is not available"});
}

TEST(AcceleratorSelection, WarnsWhenGpuUnused) {
  auto env = simulated_gpus(2);
  auto choice = tandem::select_accelerator("cpu");
  EXPECT_EQ(choice.name, "cpu");
  ASSERT_EQ(choice.notes.size(), 1u);
  EXPECT_EQ(choice.notes[0].rfind("warning:", 0), 0u);
  EXPECT_NE(choice.notes[0].find("--trainer.accelerator=cuda"), std::string::npos);
}

TEST(AcceleratorSelection, WarnsWhenACustomAcceleratorLeavesGpusIdle) {
  auto env = simulated_gpus(2);
  tandem::AcceleratorRegistry registry;
  xpu_example::register_xpu(registry);
  registry.add("cuda", "CUDA", [](const tandem::InitParams&) { return std::make_unique<tandem::CUDAAccelerator>(); });
  auto choice = tandem::select_accelerator("xpu", registry);
  ASSERT_EQ(choice.notes.size(), 1u);
  EXPECT_EQ(choice.notes[0], "warning: 2 simulated CUDA devices (TANDEM_SIMULATE_CUDA_DEVICES) but accelerator=xpu "
                             "does not use them; pass --trainer.accelerator=cuda to use them");
  EXPECT_TRUE(tandem::select_accelerator("cuda", registry).notes.empty());  // nothing idle
}

// Without simulation the machine answers: its GPUs, or an error naming why there are none
// (no device, or a build without CUDA) and listing the accelerators that are available.
TEST(AcceleratorSelection, CudaOnTheRealMachine) {
  ScopedEnv env;
  env.unset("TANDEM_SIMULATE_CUDA_DEVICES").unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  if (tandem::cuda_device_count() > 0) {
    EXPECT_EQ(tandem::select_accelerator("cuda").name, "cuda");
    EXPECT_EQ(tandem::select_accelerator("auto").name, "cuda");
    return;
  }
  expect_error<ConfigError>([] { tandem::select_accelerator("gpu"); },
                            {"accelerator=gpu is not available here: ",
                             tandem::cuda::built_with_cuda() ? "the CUDA runtime found no usable device"
                                                             : "Tandem was built without CUDA",
                             "accelerators available: cpu (or use accelerator=auto)"});
  auto fallback = tandem::select_accelerator("auto");
  EXPECT_EQ(fallback.name, "cpu");
  EXPECT_NE(fallback.notes.at(0).find("no usable CUDA device"), std::string::npos);
}

TEST(XpuFromUserProgram, PlansEndToEnd) {
  tandem::AcceleratorRegistry registry;
  xpu_example::register_xpu(registry);
  tandem::HardwareOptions options;
  options.accelerator = "xpu";
  options.devices = "1, 3";
  auto plan = tandem::plan_execution(options, "prog", no_launcher(), registry);
  EXPECT_EQ(plan.accelerator, "xpu");
  ASSERT_EQ(plan.devices.size(), 2u);
  EXPECT_EQ(plan.devices[0].str(), "xpu:1");
  EXPECT_EQ(plan.devices[1].str(), "xpu:3");
  EXPECT_EQ(plan.strategy, "ddp");
  EXPECT_EQ(plan.world_size, 2);
  auto stats = registry.create("xpu")->get_device_stats(plan.devices[1]);
  EXPECT_EQ(stats.at("xpu_index"), 3.0);
  options.devices = 5;
  expect_error<ConfigError>([&] { tandem::plan_execution(options, "prog", no_launcher(), registry); },
                            {"accelerator=xpu", "4 xpu devices"});
}

// ---- strategies ----
TEST(StrategyRegistry, BuiltInsAndCaseInsensitive) {
  auto names = tandem::strategy_registry().names();
  EXPECT_EQ(names, (std::vector<std::string>{"bagua", "ddp", "ddp2", "ddp_sharded", "ddp_spawn", "dp", "horovod", "single_device"}));
  tandem::StrategyContext ctx{"cuda", 2, 1};
  EXPECT_EQ(tandem::select_strategy("DDP", ctx).name, "ddp");
  EXPECT_EQ(tandem::select_strategy("Ddp_Spawn", ctx).name, "ddp_spawn");
  EXPECT_NE(tandem::strategy_registry().get("dp").description.find("effective batch = batch x num_nodes"), std::string::npos);
  EXPECT_EQ(tandem::select_strategy("HOROVOD", ctx).strategy->launch_kind(), tandem::LaunchKind::External);
}

TEST(StrategyRegistry, UnknownListsRegistered) {
  expect_error<ConfigError>([] { tandem::select_strategy("colossal", {"cpu", 1, 1}); },
                            {"unknown strategy 'colossal'", "bagua, ddp, ddp2, ddp_sharded, ddp_spawn, dp, horovod, single_device"});
}

TEST(StrategySelection, AutoRules) {
  EXPECT_EQ(tandem::select_strategy("auto", {"cuda", 1, 1}).name, "single_device");
  EXPECT_EQ(tandem::select_strategy("auto", {"cuda", 2, 1}).name, "ddp");
  EXPECT_EQ(tandem::select_strategy("auto", {"cuda", 1, 2}).name, "ddp");  // num_nodes > 1
  EXPECT_EQ(tandem::select_strategy("auto", {"cpu", 3, 1}).name, "ddp");
}

TEST(StrategySelection, InvalidCombinations) {
  expect_error<ConfigError>([] { tandem::select_strategy("single_device", {"cuda", 2, 1}); },
                            {"single_device runs one process on one device", "2 device(s)"});
  EXPECT_EQ(tandem::select_strategy("dp", {"cpu", 2, 1}).strategy->processes_per_node(2), 1);  // CPU devices on threads
  expect_error<ConfigError>([] { tandem::select_strategy("dp", {"cuda", 2, 2}); }, {"one node", "num_nodes=2", "ddp2"});
  expect_error<ConfigError>([] { tandem::select_strategy("dp", {"cuda", 2, 1}).strategy->validate_precision(tandem::Precision::Float16Mixed); },
                            {"strategy=dp does not train with precision=16-mixed", "bf16-mixed"});
  tandem::select_strategy("dp", {"cuda", 2, 1}).strategy->validate_precision(tandem::Precision::BFloat16Mixed);
}

TEST(StrategySelection, NumNodesMustBePositive) {
  expect_error<ConfigError>([] { tandem::select_strategy("auto", {"cpu", 1, 0}); }, {"num_nodes=0", "positive integer"});
  expect_error<ConfigError>([] { tandem::validate_num_nodes(-2); }, {"num_nodes=-2"});
}

TEST(StrategyRegistry, UserStrategy) {
  tandem::StrategyRegistry registry;
  struct Hybrid : tandem::Strategy {
    std::string name() const override { return "hybrid"; }
    int processes_per_node(int) const override { return 1; }
  };
  registry.add("hybrid", "one process per node", [](const tandem::InitParams&) {
    return std::make_unique<Hybrid>();
  });
  auto choice = tandem::select_strategy("hybrid", {"cuda", 4, 2}, registry);
  EXPECT_EQ(choice.strategy->processes_per_node(4), 1);
  expect_error<ConfigError>([&] { registry.add("HYBRID", "again", nullptr); }, {"already registered"});
}

// ---- precision ----
TEST(Precision, AcceptedForms) {
  using tandem::Precision;
  EXPECT_EQ(tandem::parse_precision("32-true"), Precision::Float32True);
  EXPECT_EQ(tandem::parse_precision("32"), Precision::Float32True);
  EXPECT_EQ(tandem::parse_precision("16-mixed"), Precision::Float16Mixed);
  EXPECT_EQ(tandem::parse_precision("16"), Precision::Float16Mixed);
  EXPECT_EQ(tandem::parse_precision("bf16-mixed"), Precision::BFloat16Mixed);
  EXPECT_EQ(tandem::parse_precision("bf16"), Precision::BFloat16Mixed);
  EXPECT_EQ(tandem::parse_precision("64-true"), Precision::Float64True);
  EXPECT_EQ(tandem::parse_precision("64"), Precision::Float64True);
  EXPECT_EQ(tandem::precision_name(Precision::BFloat16Mixed), "bf16-mixed");
}

TEST(Precision, IntsAsLightningTakesThem) {
  using tandem::Precision;
  EXPECT_EQ(tandem::parse_precision(32), Precision::Float32True);
  EXPECT_EQ(tandem::parse_precision(16), Precision::Float16Mixed);
  EXPECT_EQ(tandem::parse_precision(64), Precision::Float64True);
  expect_error<ConfigError>([] { tandem::parse_precision(8); }, {"precision='8'", "allowed"});
  tandem::HardwareOptions options;
  options.precision = 16;  // an int, not the character '\x10'
  EXPECT_EQ(options.precision.str(), "16");
}

TEST(Precision, OthersListAllowed) {
  expect_error<ConfigError>([] { tandem::parse_precision("8"); },
                            {"precision='8'", "\"32-true\"", "\"16-mixed\"", "\"bf16-mixed\"", "\"64-true\""});
  expect_error<ConfigError>([] { tandem::parse_precision("fp16"); }, {"not supported"});
}

TEST(Precision, CpuFallbackAndCpuOnly64) {
  const tandem::CPUAccelerator cpu;
  const tandem::CUDAAccelerator cuda;
  auto cpu16 = tandem::resolve_precision(tandem::Precision::Float16Mixed, cpu);
  EXPECT_EQ(cpu16.precision, tandem::Precision::BFloat16Mixed);
  ASSERT_TRUE(cpu16.note.has_value());
  EXPECT_EQ(cpu16.note->rfind("warning:", 0), 0u);
  EXPECT_FALSE(tandem::resolve_precision(tandem::Precision::Float16Mixed, cuda).note.has_value());
  EXPECT_EQ(tandem::resolve_precision(tandem::Precision::Float64True, cpu).precision,
            tandem::Precision::Float64True);
  expect_error<ConfigError>([&] { tandem::resolve_precision(tandem::Precision::Float64True, cuda); },
                            {"64-true is supported on CPU only"});
}
