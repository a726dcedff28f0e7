// The devices table from the seeds, row by row, and every devices error in the issue, through
// the C++ API (CUDAAccelerator with simulated GPUs, the shared parser, the CPU parser).
#include <gtest/gtest.h>

#include <ctime>
#include <thread>

#include "base/error.h"
#include "engine/accelerators/cpu_accelerator.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/accelerators/device_parsing.h"
#include "tensor/tensor.h"
#include "tests/accelerators/expect_error.h"
#include "tests/accelerators/scoped_env.h"

using tandem::ConfigError;
using tandem::CUDAAccelerator;
using tandem::DevicesSpec;
using V = std::vector<int>;

namespace {
V cuda_parse(const DevicesSpec& spec, int gpus = 4) {
  auto env = simulated_gpus(gpus);
  return CUDAAccelerator().parse_devices(spec);
}
}  // namespace

// ---- the seeds' table: devices, type, parsed ----
TEST(DevicesTable, Int3IsFirstThree) { EXPECT_EQ(cuda_parse(3), (V{0, 1, 2})); }
TEST(DevicesTable, IntMinusOneIsAll) { EXPECT_EQ(cuda_parse(-1), (V{0, 1, 2, 3})); }
TEST(DevicesTable, ListZeroIsGpuZero) { EXPECT_EQ(cuda_parse(V{0}), (V{0})); }
TEST(DevicesTable, ListOneThreeIsGpusOneAndThree) { EXPECT_EQ(cuda_parse(V{1, 3}), (V{1, 3})); }
TEST(DevicesTable, String3IsFirstThree) { EXPECT_EQ(cuda_parse("3"), (V{0, 1, 2})); }
TEST(DevicesTable, StringOneCommaThreeIsGpusOneAndThree) { EXPECT_EQ(cuda_parse("1, 3"), (V{1, 3})); }
TEST(DevicesTable, StringMinusOneIsAll) { EXPECT_EQ(cuda_parse("-1"), (V{0, 1, 2, 3})); }
TEST(DevicesTable, AutoIsAll) {
  EXPECT_EQ(cuda_parse("auto"), (V{0, 1, 2, 3}));
  EXPECT_EQ(cuda_parse(" AUTO "), (V{0, 1, 2, 3}));
}
TEST(DevicesTable, AllFollowsTheMachine) {
  EXPECT_EQ(cuda_parse(-1, 2), (V{0, 1}));
  EXPECT_EQ(cuda_parse("auto", 1), (V{0}));
}
TEST(DevicesTable, ListOrderIsKept) { EXPECT_EQ(cuda_parse(V{3, 0, 2}), (V{3, 0, 2})); }
TEST(DevicesTable, StringListVariants) {
  EXPECT_EQ(cuda_parse("0,1"), (V{0, 1}));
  EXPECT_EQ(cuda_parse(" 2 ,0 "), (V{2, 0}));
  EXPECT_EQ(cuda_parse("1,"), (V{1}));  // a trailing comma still means a list of indices
}
TEST(DevicesTable, ParallelDevicesAreNamed) {
  auto env = simulated_gpus(4);
  CUDAAccelerator cuda;
  auto devices = cuda.get_parallel_devices(cuda.parse_devices("1, 3"));
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].str(), "cuda:1");
  EXPECT_EQ(devices[1].str(), "cuda:3");
}

// ---- errors: what was asked, what the machine has, which forms are accepted ----
TEST(DevicesErrors, ZeroIsInvalid) {
  expect_error<ConfigError>([] { cuda_parse(0); },
                            {"devices=0", "selects no device", "accelerator=cpu", "4 cuda devices", "accepted forms"});
  expect_error<ConfigError>([] { cuda_parse("0"); }, {"devices=\"0\"", "selects no device"});
}
TEST(DevicesErrors, EmptyListIsInvalid) {
  expect_error<ConfigError>([] { cuda_parse(V{}); }, {"devices=[]", "empty list", "accepted forms"});
}
TEST(DevicesErrors, DuplicatesAreInvalid) {
  expect_error<ConfigError>([] { cuda_parse(V{1, 1}); }, {"devices=[1, 1]", "index 1 appears more than once"});
  expect_error<ConfigError>([] { cuda_parse("2, 2"); }, {"devices=\"2, 2\"", "more than once"});
}
TEST(DevicesErrors, IndexBeyondMachine) {
  expect_error<ConfigError>([] { cuda_parse(V{0, 4}); },
                            {"index 4 does not exist", "this machine has 4 cuda devices (indices 0..3)"});
  expect_error<ConfigError>([] { cuda_parse("1, 7", 2); }, {"index 7", "2 cuda devices"});
}
TEST(DevicesErrors, CountBeyondMachine) {
  expect_error<ConfigError>([] { cuda_parse(5); }, {"devices=5", "first 5 devices", "4 cuda devices"});
  expect_error<ConfigError>([] { cuda_parse("8", 2); }, {"devices=\"8\"", "2 cuda devices"});
}
TEST(DevicesErrors, NegativeOtherThanMinusOne) {
  expect_error<ConfigError>([] { cuda_parse(-2); }, {"devices=-2", "negative values other than -1"});
  expect_error<ConfigError>([] { cuda_parse("-3"); }, {"negative values other than -1"});
  expect_error<ConfigError>([] { cuda_parse(V{0, -1}); }, {"index -1 is negative"});
}
TEST(DevicesErrors, NonIntegers) {
  expect_error<ConfigError>([] { cuda_parse("1.5"); }, {"'1.5' is not an integer", "accepted forms"});
  expect_error<ConfigError>([] { cuda_parse("two"); }, {"'two' is not an integer"});
  expect_error<ConfigError>([] { cuda_parse("1, x"); }, {"'x' is not an integer"});
  expect_error<ConfigError>([] { cuda_parse(""); }, {"is not an integer"});
}
TEST(DevicesErrors, NonIntegerListItems) {
  // Lists from a config file or flag may hold anything; the parser names the first bad item.
  const DevicesSpec spec = DevicesSpec::list_of_text({"0", " x ", "1.5"});
  EXPECT_EQ(spec.str(), "[0,  x , 1.5]");
  expect_error<ConfigError>([&] { cuda_parse(spec); },
                            {"devices=[0,  x , 1.5]", "'x' is not an integer index", "4 cuda devices", "accepted forms"});
  expect_error<ConfigError>([] { tandem::CPUAccelerator().parse_devices(DevicesSpec::list_of_text({"a"})); },
                            {"a list of indices selects GPUs"});
  const DevicesSpec ints = DevicesSpec::list_of_text({"3", " 1"});
  EXPECT_EQ(ints.kind(), DevicesSpec::Kind::List);
  EXPECT_EQ(ints.str(), "[3, 1]");
  EXPECT_EQ(cuda_parse(ints), (V{3, 1}));
}
TEST(DevicesErrors, AllWithNoGpus) {
  expect_error<ConfigError>([] { cuda_parse(-1, 0); }, {"none is available", "0 cuda devices"});
  expect_error<ConfigError>([] { cuda_parse("auto", 0); }, {"none is available"});
}
TEST(DevicesErrors, MentionsCudaVisibleDevicesWhenSet) {
  ScopedEnv env;
  env.set("CUDA_VISIBLE_DEVICES", "2,3").unset("TANDEM_SIMULATE_CUDA_DEVICES").unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  // Without simulation the real runtime answers; whatever it has, index 99 does not exist.
  expect_error<ConfigError>([] { CUDAAccelerator().parse_devices(V{99}); }, {"index 99", "CUDA_VISIBLE_DEVICES=2,3"});
}

// ---- CUDA_VISIBLE_DEVICES: indices are the process's, as the CUDA runtime numbers them ----
namespace {
V visible_parse(const std::string& visible, const DevicesSpec& spec) {
  auto env = simulated_gpus(4);
  env.set("CUDA_VISIBLE_DEVICES", visible);
  return CUDAAccelerator().parse_devices(spec);
}
int visible_count(const std::string& visible) {
  auto env = simulated_gpus(4);
  env.set("CUDA_VISIBLE_DEVICES", visible);
  return tandem::cuda_device_count();
}
}  // namespace
TEST(CudaVisibleDevices, RenumbersTheSimulatedMachine) {
  EXPECT_EQ(visible_parse("2,3", -1), (V{0, 1}));
  EXPECT_EQ(visible_parse("2,3", V{1}), (V{1}));
  EXPECT_EQ(visible_parse(" 3 ", "auto"), (V{0}));
  expect_error<ConfigError>([] { visible_parse("2,3", V{2}); },
                            {"index 2 does not exist", "this machine has 2 cuda devices (indices 0..1)",
                             "indices are relative to CUDA_VISIBLE_DEVICES=2,3"});
  expect_error<ConfigError>([] { visible_parse("2,3", 3); }, {"first 3 devices", "2 cuda devices"});
}
TEST(CudaVisibleDevices, ReadLikeTheRuntime) {
  EXPECT_EQ(visible_count("0,1,2,3"), 4);
  EXPECT_EQ(visible_count(""), 0);          // an empty value hides every GPU
  EXPECT_EQ(visible_count("1,9,2"), 1);     // entries stop at the first the machine lacks
  EXPECT_EQ(visible_count("0,0,1"), 1);     // ... or at a repeat
  EXPECT_EQ(visible_count("GPU-1234"), 0);  // the simulation knows no UUIDs
}
TEST(CudaVisibleDevices, NoteMapsToTheMachine) {
  ScopedEnv env;
  env.unset("CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(tandem::cuda_visible_devices_note({0}).has_value());
  env.set("CUDA_VISIBLE_DEVICES", "5, 7");
  EXPECT_EQ(tandem::cuda_visible_devices_note({1, 0}),
            "CUDA_VISIBLE_DEVICES=5, 7: cuda:1 is the machine's GPU 7, cuda:0 is the machine's GPU 5");
}
TEST(CudaVisibleDevices, BusyListUsesVisibleIndices) {
  auto env = simulated_gpus(4, "0");
  env.set("CUDA_VISIBLE_DEVICES", "1,2,3");
  EXPECT_EQ(tandem::find_usable_cuda_devices(-1), (V{1, 2}));
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(4); },
                            {"3 simulated CUDA devices", "CUDA_VISIBLE_DEVICES=1,2,3", "at most 3"});
}

// ---- the shared parser, for registered accelerators ----
TEST(IndexedParser, UsesTheAcceleratorName) {
  tandem::IndexedDeviceContext ctx{"xpu", 2, "pretend"};
  EXPECT_EQ(tandem::parse_indexed_devices("1, 0", ctx), (V{1, 0}));
  expect_error<ConfigError>([&] { tandem::parse_indexed_devices(3, ctx); },
                            {"accelerator=xpu", "2 xpu devices", "pretend"});
}

// ---- CPU: devices is the number of processes ----
TEST(CpuDevices, CountsProcesses) {
  tandem::CPUAccelerator cpu;
  EXPECT_EQ(cpu.parse_devices(1), (V{0}));
  EXPECT_EQ(cpu.parse_devices(3), (V{0, 0, 0}));
  EXPECT_EQ(cpu.parse_devices("2"), (V{0, 0}));
  EXPECT_EQ(cpu.parse_devices("auto"), (V{0}));
  auto devices = cpu.get_parallel_devices(cpu.parse_devices(2));
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].str(), "cpu");
  EXPECT_EQ(devices[1].str(), "cpu");
}
TEST(CpuDevices, Errors) {
  tandem::CPUAccelerator cpu;
  expect_error<ConfigError>([&] { cpu.parse_devices(0); }, {"devices=0", "must be > 0", "number of processes"});
  expect_error<ConfigError>([&] { cpu.parse_devices(-1); }, {"devices=-1", "must be > 0"});
  expect_error<ConfigError>([&] { cpu.parse_devices(V{0, 1}); }, {"a list of indices selects GPUs"});
  expect_error<ConfigError>([&] { cpu.parse_devices("1, 3"); }, {"not an integer"});
  expect_error<ConfigError>([&] { cpu.parse_devices("many"); }, {"not an integer"});
}
TEST(CpuDevices, StatsFollowResidentMemory) {
  tandem::CPUAccelerator cpu;
  const double before = cpu.get_device_stats({"cpu", 0}).at("resident_memory_bytes");
  EXPECT_GT(before, 1e5);  // a running gtest binary uses > 100 kB
  // 64 MiB written page by page is resident until freed.
  constexpr size_t kBytes = size_t(64) << 20;
  std::vector<char> block(kBytes);
  for (size_t i = 0; i < kBytes; i += 4096) block[i] = static_cast<char>(i);
  auto stats = cpu.get_device_stats({"cpu", 0});
  EXPECT_GE(stats.at("resident_memory_bytes") - before, 0.9 * kBytes);
  EXPECT_GE(stats.at("peak_resident_memory_bytes"), stats.at("resident_memory_bytes"));
  EXPECT_NE(block[4096], 1);  // keep the block alive until here
}
TEST(CpuDevices, StatsMeasureCpuUse) {
  tandem::CPUAccelerator cpu;
  const double start = cpu.get_device_stats({"cpu", 0}).at("cpu_time_seconds");
  // Spin until this process has used 0.2 s of CPU (by the C library's own clock).
  const std::clock_t spin_start = std::clock();
  volatile double sink = 0;
  while (std::clock() - spin_start < CLOCKS_PER_SEC / 5) sink = sink + 1.0;
  const auto stats = cpu.get_device_stats({"cpu", 0});
  EXPECT_GE(stats.at("cpu_time_seconds") - start, 0.19);
  // Since the previous call, this single thread was busy: above zero, and never more than
  // every core of the machine.
  EXPECT_GT(stats.at("cpu_percent"), 0.0);
  EXPECT_LE(stats.at("cpu_percent"), 100.0 * std::thread::hardware_concurrency() + 1.0);
}

// ---- CUDA device statistics on the real machine (simulated devices report only that) ----
TEST(CudaStats, RealDeviceOrAClearError) {
  ScopedEnv env;
  env.unset("TANDEM_SIMULATE_CUDA_DEVICES").unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  CUDAAccelerator cuda;
  if (tandem::cuda_device_count() == 0) {
    expect_error<tandem::DeviceError>([&] { cuda.get_device_stats({"cuda", 0}); }, {"CUDA"});
    return;
  }
  const tandem::Tensor held = tandem::Tensor::zeros({1 << 18}, tandem::DType::Float32, tandem::Device::cuda(0));
  const auto stats = cuda.get_device_stats({"cuda", 0});
  EXPECT_GT(stats.at("memory_total_bytes"), 0.0);
  EXPECT_LE(stats.at("memory_used_bytes"), stats.at("memory_total_bytes"));
  EXPECT_DOUBLE_EQ(stats.at("memory_used_bytes") + stats.at("memory_free_bytes"), stats.at("memory_total_bytes"));
  EXPECT_GE(stats.at("allocated_bytes"), 4.0 * (1 << 18));  // the caching allocator's numbers are merged in
}

// ---- find_usable_cuda_devices ----
TEST(FindUsable, FirstFreeOnes) {
  auto env = simulated_gpus(4, "1,2");
  EXPECT_EQ(tandem::find_usable_cuda_devices(2), (V{0, 3}));
  EXPECT_EQ(tandem::find_usable_cuda_devices(1), (V{0}));
  EXPECT_EQ(tandem::find_usable_cuda_devices(-1), (V{0, 3}));
}
TEST(FindUsable, AllFreeWithoutBusyList) {
  auto env = simulated_gpus(3);
  EXPECT_EQ(tandem::find_usable_cuda_devices(3), (V{0, 1, 2}));
}
TEST(FindUsable, TooFewFreeNamesTheOccupied) {
  auto env = simulated_gpus(4, "1,3");
  expect_error<tandem::DeviceError>([] { tandem::find_usable_cuda_devices(3); },
                                    {"only 2 of 4", "occupied: 1 (", "3 (marked busy"});
}
TEST(FindUsable, NoneFreeForMinusOne) {
  auto env = simulated_gpus(2, "0,1");
  expect_error<tandem::DeviceError>([] { tandem::find_usable_cuda_devices(-1); }, {"only 0 of 2"});
}
TEST(FindUsable, MachineHasFewer) {
  auto env = simulated_gpus(2);
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(3); }, {"find_usable_cuda_devices(3)", "2 simulated", "at most 2"});
  auto none = simulated_gpus(0);
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(1); }, {"accelerator=cpu"});
}
TEST(FindUsable, BadN) {
  auto env = simulated_gpus(2);
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(0); }, {"> 0, or -1"});
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(-4); }, {"> 0, or -1"});
}

// ---- the simulation switches ----
TEST(Simulation, MalformedValuesAreConfigErrors) {
  ScopedEnv env;
  env.set("TANDEM_SIMULATE_CUDA_DEVICES", "four");
  expect_error<ConfigError>([] { tandem::cuda_device_count(); }, {"TANDEM_SIMULATE_CUDA_DEVICES=four"});
  env.set("TANDEM_SIMULATE_CUDA_DEVICES", "4").set("TANDEM_SIMULATE_BUSY_CUDA_DEVICES", "1,x");
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(1); }, {"'x' is not a device index"});
  env.set("TANDEM_SIMULATE_BUSY_CUDA_DEVICES", "9");
  expect_error<ConfigError>([] { tandem::find_usable_cuda_devices(1); }, {"names device 9"});
}
TEST(Simulation, TrainingRefusesSimulatedGpus) {
  auto env = simulated_gpus(2);
  CUDAAccelerator cuda;
  EXPECT_TRUE(cuda.is_available());
  EXPECT_EQ(cuda.auto_device_count(), 2);
  expect_error<ConfigError>([&] { cuda.setup_device({"cuda", 0}); }, {"refusing to train", "simulated"});
  EXPECT_EQ(cuda.get_device_stats({"cuda", 0}).at("simulated"), 1.0);
}
TEST(Simulation, BusyListAloneAlsoRefusesTraining) {
  ScopedEnv env;
  env.unset("TANDEM_SIMULATE_CUDA_DEVICES").set("TANDEM_SIMULATE_BUSY_CUDA_DEVICES", "0");
  expect_error<ConfigError>([] { CUDAAccelerator().setup_device({"cuda", 0}); },
                            {"refusing to train on cuda:0", "TANDEM_SIMULATE_BUSY_CUDA_DEVICES=0 is set", "unset it"});
}
TEST(Simulation, RefusalNamesEveryVariableSet) {
  auto env = simulated_gpus(2, "1");
  expect_error<ConfigError>([] { tandem::refuse_training_when_simulating("run"); },
                            {"refusing to run: TANDEM_SIMULATE_CUDA_DEVICES=2 and TANDEM_SIMULATE_BUSY_CUDA_DEVICES=1 "
                             "are set", "unset them"});
  ScopedEnv none;
  none.unset("TANDEM_SIMULATE_CUDA_DEVICES").unset("TANDEM_SIMULATE_BUSY_CUDA_DEVICES");
  tandem::refuse_training_when_simulating("run");  // nothing set: no error
}
