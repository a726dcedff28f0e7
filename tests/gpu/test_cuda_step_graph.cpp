// CUDA graph capture (label gpu; skips without a device; the emulation build records and replays
// graphs too, kernels/cuda/emulation/stream_capture.h): StepGraph replays what it captured with
// new inputs, refuses a capture that waits for the device and leaves the stream usable, keeps
// its memory away from other allocations while it lives, and is destroyed without throwing
// after its device failed (a first-run defect: its destructor switched devices with a throwing
// guard); and the Trainer's cuda_graph=true gives
// the weights of the same run without graphs (float32, accumulation, 16-mixed), falls back when
// the step draws random numbers, runs short batches eagerly, and still names a bad target.
#include <gtest/gtest.h>

#include <cmath>

#include "../trainer/trainer_test_util.h"
#include "base/error.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/step_graph.h"
#include "tensor/ops/ops.h"
#include "tests/accelerators/expect_error.h"
#if TANDEM_CUDA_EMULATION
#include "kernels/cuda/emulation/fault_injection.h"
#endif

namespace tandem::trainer::testing {
namespace {

std::vector<float> cpu_values(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

TEST(CudaGraph, ReplaysTheCapturedWorkOnNewInputs) {
  SKIP_WITHOUT_GPU();
  Tensor x = Tensor::from_vector<float>({-2, -1, 0, 1, 2}, {5}).to(Device::cuda(0));
  Tensor y;
  auto graph = cuda::StepGraph::capture(0, [&] { y = relu(x * 2.0 - 1.0) + x; });
  for (const std::vector<float>& input : {std::vector<float>{3, -4, 0.5f, 7, -0.25f}, std::vector<float>{1, 1, 1, 1, 1}}) {
    x.copy_(Tensor::from_vector<float>(input, {5}));
    graph->replay();
    const Tensor x_cpu = Tensor::from_vector<float>(input, {5});
    EXPECT_EQ(cpu_values(y), (relu(x_cpu * 2.0 - 1.0) + x_cpu).to_vector<float>());
  }
}

TEST(CudaGraph, ACaptureThatWaitsForTheDeviceFailsAndTheStreamStillWorks) {
  SKIP_WITHOUT_GPU();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).to(Device::cuda(0));
  EXPECT_THROW(cuda::StepGraph::capture(0, [&] { (void)sum(x * 2.0).item(); }), DeviceError);
  EXPECT_EQ(cpu_values(x + 1.0), (std::vector<float>{2, 3, 4}));
  // The counters a caller checks before capturing: item() is a host read.
  const uint64_t reads = cuda::host_read_count();
  (void)sum(x).item();
  EXPECT_GT(cuda::host_read_count(), reads);
}

TEST(CudaGraph, ItsMemoryIsNotHandedOutWhileTheGraphLives) {
  SKIP_WITHOUT_GPU();
  Tensor x = Tensor::ones({1000}, DType::Float32, Device::cuda(0));
  const void* inside = nullptr;
  auto graph = cuda::StepGraph::capture(0, [&] {
    Tensor scratch = x * 3.0;  // freed inside the capture; every replay writes it again
    inside = scratch.raw_data();
  });
  std::vector<Tensor> eager;
  for (int i = 0; i < 4; ++i) {
    eager.push_back(Tensor::empty({1000}, DType::Float32, Device::cuda(0)));
    EXPECT_NE(eager.back().raw_data(), inside);
  }
  graph->replay();
  EXPECT_EQ(cpu_values(x), std::vector<float>(1000, 1.0f));
}

// A graph on cuda:1 that holds a pinned buffer, destroyed while cuda:0 is current and cuda:1 has
// a sticky error: the destructor's device switch fails and must not throw (a throw out of a
// destructor ends the process). Only the emulator can inject the error.
TEST(CudaGraph, IsDestroyedWithoutThrowingAfterItsDeviceFailed) {
  SKIP_WITHOUT_GPU();
#if TANDEM_CUDA_EMULATION
  if (cuda::visible_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  Tensor x = Tensor::ones({16}, DType::Float32, Device::cuda(1));
  Tensor y;
  auto graph = cuda::StepGraph::capture(1, [&] {
    // A host-to-device copy: every replay reads its pinned staging buffer, so the graph holds it.
    y = x * 2.0 + Tensor::ones({16}).to(Device::cuda(1));
  });
  graph->replay();
  EXPECT_EQ(cpu_values(y), std::vector<float>(16, 3.0f));
  cudaSetDevice(0);
  emu::inject_sticky_error(1, cudaErrorIllegalAddress);
  EXPECT_NO_THROW(graph.reset());
  emu::clear_sticky_error(1);
  cudaGetLastError();  // what the release paths' failed calls left
  EXPECT_EQ(cpu_values(x + 1.0), std::vector<float>(16, 2.0f));  // cuda:1 works again once cleared
#else
  GTEST_SKIP() << "injecting a sticky device error needs the emulation build";
#endif
}

struct GraphRun {
  std::vector<float> weights;
  double train_loss = 0;
  int64_t replays = 0;
  bool captured = false;
  std::string off_reason;
};

// 2 epochs of 200 examples in batches of 32: 6 full batches and one of 8 per epoch.
GraphRun fit_tiny(bool cuda_graph, const std::string& precision = "32-true", int64_t accumulate = 1,
                  double dropout = 0.0) {
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.accelerator = "cuda";
  o.precision = precision;
  o.accumulate_grad_batches = accumulate;
  o.cuda_graph = cuda_graph;
  o.max_epochs = 2;
  manual_seed(11);
  TinyClassifier model(0.02, dropout);
  SyntheticDataModule data(200, 64, 32);
  Trainer trainer(o);
  trainer.fit(model, data);
  GraphRun run;
  run.train_loss = trainer.callback_metrics().at("train_loss");
  if (const CudaGraphStep* g = trainer.cuda_graph_step()) {
    run.replays = g->replays();
    run.captured = g->captured();
    run.off_reason = g->off_reason();
  }
  model.to(Device::cpu());
  run.weights = flat_weights(model);
  return run;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

TEST(CudaGraphTrainer, GivesTheWeightsOfTheRunWithoutGraphs) {
  SKIP_WITHOUT_GPU();
  const GraphRun eager = fit_tiny(false), graphed = fit_tiny(true);
  ASSERT_TRUE(graphed.captured) << graphed.off_reason;
  // Per epoch: 2 warm-up steps in the first, then replays of every full batch; the short last
  // batch of each epoch runs eagerly.
  EXPECT_EQ(graphed.replays, 4 + 6);
  // The same kernels on the same data in the same order: the same numbers (0 + g == g).
  EXPECT_EQ(max_abs_diff(eager.weights, graphed.weights), 0.0);
  EXPECT_EQ(eager.train_loss, graphed.train_loss);
}

TEST(CudaGraphTrainer, AccumulatesAndScalesLikeTheRunWithoutGraphs) {
  SKIP_WITHOUT_GPU();
  const GraphRun eager_acc = fit_tiny(false, "32-true", 2), graphed_acc = fit_tiny(true, "32-true", 2);
  ASSERT_TRUE(graphed_acc.captured) << graphed_acc.off_reason;
  EXPECT_EQ(max_abs_diff(eager_acc.weights, graphed_acc.weights), 0.0);
  // 16-mixed: the GradScaler's scale is a device tensor the replay reads.
  const GraphRun eager16 = fit_tiny(false, "16-mixed"), graphed16 = fit_tiny(true, "16-mixed");
  ASSERT_TRUE(graphed16.captured) << graphed16.off_reason;
  EXPECT_EQ(max_abs_diff(eager16.weights, graphed16.weights), 0.0);
  const GraphRun bf16 = fit_tiny(true, "bf16-mixed");
  EXPECT_TRUE(bf16.captured) << bf16.off_reason;
}

TEST(CudaGraphTrainer, DropoutTurnsGraphsOffAndTrainingGoesOn) {
  SKIP_WITHOUT_GPU();
  const GraphRun eager = fit_tiny(false, "32-true", 1, 0.25), graphed = fit_tiny(true, "32-true", 1, 0.25);
  EXPECT_FALSE(graphed.captured);
  EXPECT_NE(graphed.off_reason.find("random numbers"), std::string::npos) << graphed.off_reason;
  EXPECT_EQ(graphed.replays, 0);
  EXPECT_EQ(max_abs_diff(eager.weights, graphed.weights), 0.0);
}

// Batches in order; example 150 (in the fifth batch, a replay) has class 7 of 3.
class BadTargetData : public SyntheticDataModule {
 public:
  BadTargetData() : SyntheticDataModule(200, 64, 32) {
    const auto base = synthetic_dataset(200, 4, 0);
    std::vector<int64_t> all(200);
    for (int64_t i = 0; i < 200; ++i) all[size_t(i)] = i;
    const data::Batch b = base->get_batch(all);
    std::vector<int64_t> y = b.target.to_vector<int64_t>();
    y[150] = 7;
    train = std::make_shared<data::TensorDataset>(b.input, Tensor::from_vector(y, {200}));
    val = synthetic_dataset(64, 4, 1000);
  }
  std::shared_ptr<data::DataLoader> train_dataloader() override {
    data::DataLoaderOptions o;
    o.batch_size = batch_size;
    o.prefetch = 0;
    return std::make_shared<data::DataLoader>(train, o);
  }
};

TEST(CudaGraphTrainer, AnOutOfRangeTargetInAReplayIsStillNamed) {
  SKIP_WITHOUT_GPU();
  TempDir dir;
  TrainerOptions o = quiet_options(dir.path);
  o.accelerator = "cuda";
  o.cuda_graph = true;
  o.max_epochs = 1;
  o.num_sanity_val_steps = 0;
  manual_seed(11);
  TinyClassifier model(0.02, 0.0);
  BadTargetData data;
  Trainer trainer(o);
  expect_error<ValueError>([&] { trainer.fit(model, data); }, {"target 7 is out of bounds for 3 classes"});
  ASSERT_NE(trainer.cuda_graph_step(), nullptr);
  EXPECT_TRUE(trainer.cuda_graph_step()->captured());
}

}  // namespace
}  // namespace tandem::trainer::testing
