// The CUDA memory family (kernels/cuda/memory_cuda.cu and the caching allocator) beyond the op
// table (label gpu; each test skips itself without a device):
//   - the caching allocators poll events with cudaEventQuery; a "not ready" answer must not stay
//     behind as the thread's last runtime error, or the next kernel launch check reports it as a
//     launch failure;
//   - a copy between devices waits for the source device's work.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_family_test_util.h"
#include "tensor/ops/ops.h"

namespace tandem::testing {
namespace {

std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

// Keeps the compute stream busy for a while: `rounds` float32 GEMMs of size x size x size.
void queue_long_work(Tensor& a, Tensor& c, int64_t size, int rounds) {
  for (int r = 0; r < rounds; ++r)
    gpu_backend().gemm(DType::Float32, false, false, size, size, size, 1.0, a.view_desc().data, 0,
                       a.view_desc().data, 0, 0.0, c.view_desc().data, 0, 1);
}

TEST(CudaMemory, KernelLaunchAfterAPendingPinnedCopySucceeds) {
  SKIP_WITHOUT_GPU();
  const int64_t size = long_work_size(4096);
  Tensor a = Tensor::full({size, size}, 1.0 / double(size), DType::Float32, kGpu);
  Tensor c = Tensor::empty({size, size}, DType::Float32, kGpu);
  queue_long_work(a, c, size, 8);  // tens of milliseconds of queued work on a GPU
  const int64_t n = 1 << 20;
  std::vector<float> host(size_t(n), 2.0f);
  // The first copy's staging buffer waits behind the GEMMs; the second copy's pinned_alloc polls
  // that event while it is still pending (cudaErrorNotReady).
  Tensor first = Tensor::from_vector(host, {n}).to(kGpu);
  Tensor second = Tensor::from_vector(host, {n}).to(kGpu);
  // A kernel launch (fill) right after: its launch check must not see the poll's answer.
  Tensor filled;
  ASSERT_NO_THROW(filled = Tensor::full({n}, 3.0, DType::Float32, kGpu));
  const std::vector<float> f = filled.to(Device::cpu()).to_vector<float>();
  const std::vector<float> s = second.to(Device::cpu()).to_vector<float>();
  for (int64_t i = 0; i < n; i += 4099) {
    ASSERT_EQ(f[size_t(i)], 3.0f) << i;
    ASSERT_EQ(s[size_t(i)], 2.0f) << i;
  }
  // Every element of c is a sum of `size` products (1/size)^2 = 1/size exactly (a power of two).
  const std::vector<float> cv = c.to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(cv[0], float(1.0 / double(size)));
}

TEST(CudaMemory, ACopyBetweenDevicesWaitsForTheSourceDevicesWork) {
  SKIP_WITHOUT_GPU();
  if (cuda::visible_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Tensor a = Tensor::from_vector<float>({1, -2, 3, -4}, {4}).to(Device::cuda(0));
  const Tensor b = relu(a * 3.0);  // queued on cuda:0's stream
  const Tensor on_1 = b.to(Device::cuda(1));
  EXPECT_EQ(host(on_1 + 1.0), (std::vector<float>{4, 1, 10, 1}));
  const Tensor back = (on_1 * 2.0).to(Device::cuda(0));  // and the other way
  EXPECT_EQ(host(back), (std::vector<float>{6, 0, 18, 0}));
}

}  // namespace
}  // namespace tandem::testing
