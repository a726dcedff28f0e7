// Pinned host tensors with a device (label gpu; each test skips itself without one): they are
// page-locked, host-to-device copies from them are direct DMA that may still be queued when the
// tensor is freed (the pinned cache must not hand the block out before the copy ran), copies
// from views that start inside a block, and device-to-host copies into them.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_family_test_util.h"

namespace tandem::testing {
namespace {

// Keeps the compute stream busy for tens of milliseconds: `rounds` float32 GEMMs of
// size x size x size, so copies queued behind them run long after the host moved on.
void queue_long_work(const Tensor& a, const Tensor& c, int64_t size, int rounds) {
  for (int r = 0; r < rounds; ++r)
    gpu_backend().gemm(DType::Float32, false, false, size, size, size, 1.0, a.view_desc().data, 0,
                       a.view_desc().data, 0, 0.0, c.view_desc().data, 0, 1);
}

float value_at(int64_t i, int round) { return float(i % 1009) * 0.25f + float(round); }

Tensor pinned_with_values(int64_t n, int round) {
  Tensor t = Tensor::empty_pinned({n}, DType::Float32);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = value_at(i, round);
  return t;
}

TEST(CudaPinned, TensorsArePageLockedWithADevice) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(Tensor::empty_pinned({7}).is_pinned());
  EXPECT_TRUE(Tensor::empty_pinned({0}).is_pinned());
  EXPECT_FALSE(Tensor::empty({7}).is_pinned());
}

TEST(CudaPinned, HostToDeviceCopyThenFreeingTheSourceAtOnceKeepsItsValues) {
  SKIP_WITHOUT_GPU();
  const int64_t size = long_work_size(4096);
  Tensor a = Tensor::full({size, size}, 1.0 / double(size), DType::Float32, kGpu);
  Tensor c = Tensor::empty({size, size}, DType::Float32, kGpu);
  const int64_t n = 2'000'003;
  std::vector<Tensor> on_device;
  for (int round = 0; round < 4; ++round) {
    queue_long_work(a, c, size, 4);  // the copy below waits behind these
    {
      Tensor src = pinned_with_values(n, round);
      ASSERT_TRUE(src.is_pinned());
      on_device.push_back(src.to(kGpu));
    }  // src is freed here, long before its DMA ran
    // A pinned tensor of the same size class right away: reusing src's block now would let
    // these writes reach the device instead of src's values.
    Tensor next = Tensor::empty_pinned({n}, DType::Float32);
    next.fill_(-1.0);
  }
  for (int round = 0; round < 4; ++round) {
    const auto back = on_device[size_t(round)].to(Device::cpu()).to_vector<float>();
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(back[size_t(i)], value_at(i, round)) << "round " << round;
    ASSERT_EQ(back[size_t(n - 1)], value_at(n - 1, round)) << "round " << round;
  }
}

TEST(CudaPinned, CopiesFromAViewInsideThePinnedBlock) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 100'001;
  Tensor src = pinned_with_values(n, 3);
  Tensor middle = src.narrow(0, 17, n - 40);  // starts and ends inside the block
  Tensor dev = Tensor::empty({n - 40}, DType::Float32, kGpu);
  dev.copy_(middle);  // copy_ between host and device: one DMA from the view's first element
  middle = Tensor();
  src = Tensor();
  const auto back = dev.to(Device::cpu()).to_vector<float>();
  for (int64_t i = 0; i < n - 40; ++i) ASSERT_EQ(back[size_t(i)], value_at(i + 17, 3)) << i;
}

TEST(CudaPinned, DeviceToHostIntoPinnedAfterQueuedWork) {
  SKIP_WITHOUT_GPU();
  const int64_t size = long_work_size(2048);
  Tensor a = Tensor::full({size, size}, 1.0 / double(size), DType::Float32, kGpu);
  Tensor c = Tensor::empty({size, size}, DType::Float32, kGpu);
  queue_long_work(a, c, size, 4);  // c = a @ a: every element 1/size, written behind the queue
  Tensor host = Tensor::empty_pinned({size, size}, DType::Float32);
  ASSERT_TRUE(host.is_pinned());
  host.copy_(c);  // returns once the bytes are there
  const float* p = host.data_ptr<float>();
  for (int64_t i = 0; i < size * size; i += 4093) ASSERT_EQ(p[i], float(1.0 / double(size))) << i;
  // And back: pinned to a device tensor of another shape-compatible layout goes through to().
  Tensor again = host.to(kGpu);
  host = Tensor();
  EXPECT_EQ(again.to(Device::cpu()).to_vector<float>()[size_t(size * size - 1)], float(1.0 / double(size)));
}

}  // namespace
}  // namespace tandem::testing
