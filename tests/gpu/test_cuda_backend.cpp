// CUDA backend tests (ctest label `gpu`). Without a GPU (or in a build without CUDA) every
// test here skips itself. The op-by-op comparison with the CPU reference runs through the one
// harness (tests/ops/op_harness.h): `compare_backends(op_case("add"), Device::cuda(0), seed)`
// per op, added to kCudaOps as the CUDA kernels land.
#include <gtest/gtest.h>

#include "../ops/op_harness.h"
#include "engine/ops/ops.h"
#include "kernels/cuda/device_query.h"

namespace tandem::testing {
namespace {

bool have_gpu() { return cuda::visible_device_count() > 0; }

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: " << cuda::device_count_note()

TEST(CudaBackend, HostDeviceRoundTripAndFill) {
  SKIP_WITHOUT_GPU();
  std::vector<float> v(1003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 7.0f;
  Tensor host = Tensor::from_vector(v, {17, 59});
  Tensor dev = host.to(Device::cuda(0));
  EXPECT_EQ(dev.device(), Device::cuda(0));
  EXPECT_EQ(dev.to(Device::cpu()).to_vector<float>(), v);
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Float16, DType::BFloat16}) {
    Tensor f = Tensor::full({333}, 2.5, dt, Device::cuda(0));
    for (double x : f.to(Device::cpu()).to_vector<double>()) ASSERT_EQ(x, 2.5) << dtype_name(dt);
  }
}

// Ops whose CUDA kernels exist; each is compared with the CPU reference on random inputs.
const std::vector<std::string> kCudaOps = {};

TEST(CudaBackend, EveryImplementedOpMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (const std::string& name : kCudaOps)
    for (uint64_t seed : {1u, 2u}) {
      BackendComparison r = compare_backends(op_case(name), Device::cuda(0), seed);
      EXPECT_LE(r.max_output_error, 1e-5) << name << ": " << r.where;
      EXPECT_LE(r.max_grad_error, 1e-4) << name << ": " << r.where;
    }
}

}  // namespace
}  // namespace tandem::testing
