// Regression tests for defects found in the review of the CUDA backend (label gpu; each test
// skips itself without a device):
//   - the caching allocators poll events with cudaEventQuery; a "not ready" answer used to stay
//     behind as the thread's last runtime error, so the next kernel launch check reported it as
//     a launch failure;
//   - conv2d of an input with no element but a non-empty output (H = 0 with padding) must give
//     the bias everywhere, as on the CPU, instead of handing cuDNN a zero-sized tensor.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_family_test_util.h"

namespace tandem::testing {
namespace {

// Keeps the compute stream busy for a while: `rounds` float32 GEMMs of size x size x size.
void queue_long_work(Tensor& a, Tensor& c, int64_t size, int rounds) {
  for (int r = 0; r < rounds; ++r)
    gpu_backend().gemm(DType::Float32, false, false, size, size, size, 1.0, a.view_desc().data, 0,
                       a.view_desc().data, 0, 0.0, c.view_desc().data, 0, 1);
}

TEST(CudaReview, KernelLaunchAfterAPendingPinnedCopySucceeds) {
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

TEST(CudaReview, Conv2dOfAnEmptySpatialInputIsTheBias) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  // x [2, 3, 0, 4], w [4, 3, 2, 2], padding 1: output [2, 4, 1, 5], every window in the padding.
  Tensor x = Tensor::empty({2, 3, 0, 4});
  Tensor w = randn_host({4, 3, 2, 2}, rng), b = randn_host({4}, rng);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  for (Device d : {Device::cpu(), kGpu}) {
    Tensor xd = x.to(d), wd = w.to(d), bd = b.to(d);
    Tensor y = Tensor::empty({2, 4, 1, 5}, DType::Float32, d);
    TensorView bv = bd.view_desc();
    ASSERT_NO_THROW(backend_for(d).conv2d(xd.view_desc(), wd.view_desc(), &bv, p, y.view_desc())) << d.str();
    const std::vector<float> yv = y.to(Device::cpu()).to_vector<float>(), bh = b.to_vector<float>();
    for (size_t i = 0; i < yv.size(); ++i) ASSERT_EQ(yv[i], bh[(i / 5) % 4]) << d.str() << " element " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
