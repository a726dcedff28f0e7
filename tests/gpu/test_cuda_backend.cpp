// CUDA backend tests (ctest label `gpu`). Without a GPU (or in a build without CUDA) every
// test here skips itself. The op-by-op comparison with the CPU reference runs through the one
// harness (tests/ops/op_harness.h): `compare_backends(op_case("add"), Device::cuda(0), seed)`
// for every op of the table. Families add their own checks (half dtypes, odd sizes, edge
// cases) in test_cuda_<family>.cpp beside this file.
#include <gtest/gtest.h>

#include "../ops/op_harness.h"
#include "base/error.h"
#include "engine/nn/nn.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "tensor/ops/ops.h"

namespace tandem::testing {
namespace {

TEST(CudaBackend, HostDeviceRoundTripAndFill) {
  SKIP_WITHOUT_GPU();
  std::vector<float> v(1003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 7.0f;
  Tensor host = Tensor::from_vector(v, {17, 59});
  Tensor dev = host.to(Device::cuda(0));
  EXPECT_EQ(dev.device(), Device::cuda(0));
  EXPECT_EQ(dev.to(Device::cpu()).to_vector<float>(), v);
  // 2.5 is exact in every float dtype; an integer fill truncates it to 2, as on the CPU.
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Float16, DType::BFloat16}) {
    const double want = is_floating(dt) ? 2.5 : 2.0;
    EXPECT_EQ(Tensor::full({1}, 2.5, dt).to_vector<double>()[0], want) << "CPU " << dtype_name(dt);
    Tensor f = Tensor::full({333}, 2.5, dt, Device::cuda(0));
    for (double x : f.to(Device::cpu()).to_vector<double>()) ASSERT_EQ(x, want) << dtype_name(dt);
  }
}

TEST(CudaBackend, MixingDevicesIsADeviceErrorThatSaysHowToFix) {
  SKIP_WITHOUT_GPU();
  Tensor c = Tensor::ones({2, 2}), g = Tensor::ones({2, 2}, DType::Float32, Device::cuda(0));
  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  for (BinaryFn op : {BinaryFn(add), BinaryFn(sub), BinaryFn(mul), BinaryFn(div), BinaryFn(matmul)}) {
    try {
      op(c, g);
      ADD_FAILURE() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("different devices (cpu and cuda:0)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(".to(device)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(linear(Tensor::ones({1, 2}), Tensor::ones({2, 2}), Tensor::ones({2}, DType::Float32, Device::cuda(0))),
               DeviceError);
  EXPECT_THROW(Tensor::ones({2}).requires_grad_().backward(Tensor::ones({2}, DType::Float32, Device::cuda(0))),
               DeviceError);
  EXPECT_THROW(Tensor::ones({2}).requires_grad_().set_grad(Tensor::ones({2}, DType::Float32, Device::cuda(0))),
               DeviceError);
}

TEST(CudaBackend, ToAndTypeAsMoveBetweenDevices) {
  SKIP_WITHOUT_GPU();
  Tensor x = Tensor::from_vector<float>({1.5f, -2.0f, 3.25f}, {3});
  Tensor like = Tensor::zeros({1}, DType::Float64, Device::cuda(0));
  Tensor y = x.type_as(like);
  EXPECT_EQ(y.device(), Device::cuda(0));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_EQ(y.to(Device::cpu()).to_vector<double>(), (std::vector<double>{1.5, -2.0, 3.25}));
  Tensor back = y.type_as(x);
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_EQ(back.dtype(), DType::Float32);
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  // A non-contiguous view moves as its logical values.
  Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).t();
  EXPECT_EQ(m.to(Device::cuda(0)).to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(CudaBackend, ModuleToMovesParametersBuffersAndGradientsInPlace) {
  SKIP_WITHOUT_GPU();
  nn::Sequential model(std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::BatchNorm1d>(2));
  auto lin = model.at<nn::Linear>(0);
  Tensor weight_handle = lin->weight;  // as an optimizer would hold it
  lin->weight.set_grad(Tensor::ones({2, 3}));
  const auto before = model.state_dict();
  std::vector<std::vector<double>> values;
  for (const auto& [name, t] : before) values.push_back(t.clone().to_vector<double>());
  model.to(Device::cuda(0));
  EXPECT_EQ(model.device(), Device::cuda(0));
  for (const auto& [name, t] : model.named_parameters()) EXPECT_EQ(t.device(), Device::cuda(0)) << name;
  for (const auto& [name, t] : model.named_buffers()) EXPECT_EQ(t.device(), Device::cuda(0)) << name;
  EXPECT_EQ(weight_handle.device(), Device::cuda(0));  // the same handle sees the moved data
  EXPECT_EQ(weight_handle.grad().device(), Device::cuda(0));
  EXPECT_EQ(model.at<nn::BatchNorm1d>(1)->num_batches_tracked.dtype(), DType::Int64);
  model.to(Device::cpu());
  size_t i = 0;
  for (const auto& [name, t] : model.state_dict()) {
    EXPECT_EQ(t.device(), Device::cpu()) << name;
    EXPECT_EQ(t.to_vector<double>(), values[i++]) << name;
  }
}

// Every op of the harness's table, on fresh random float32 inputs (odd sizes, broadcasting),
// forward and backward, against the CPU reference.
TEST(CudaBackend, EveryOpMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (const OpCase& op : op_cases())
    for (uint64_t seed : {1u, 2u, 3u}) {
      const std::string& name = op.name;
      BackendComparison r = compare_backends(op, Device::cuda(0), seed);
      EXPECT_LE(r.max_output_error, 1e-5) << name << ": " << r.where;
      EXPECT_LE(r.max_grad_error, 1e-4) << name << ": " << r.where;
    }
}

}  // namespace
}  // namespace tandem::testing
