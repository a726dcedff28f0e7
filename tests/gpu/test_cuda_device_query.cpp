// The CUDA device queries (kernels/cuda/device_query.h): probing a device must not reset it, so
// what the process holds on it stays usable.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_skip.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_query.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

TEST(CudaDeviceQuery, ProbingADeviceLeavesWhatTheProcessHoldsOnItUsable) {
  SKIP_WITHOUT_GPU();
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).to(Device::cuda(0));
  const Tensor y = x * 2.0;  // the compute stream and cached blocks exist now
  const cuda::DeviceProbe probe = cuda::probe_device(0);
  EXPECT_TRUE(probe.usable) << probe.reason;
  EXPECT_EQ(host(y + 1.0), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(host(x), (std::vector<float>{1, 2, 3}));
}



}  // namespace
}  // namespace tandem
