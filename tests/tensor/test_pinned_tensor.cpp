// Pinned host tensors (Tensor::empty_pinned) behave as ordinary CPU tensors: values, ops, views,
// copies to and from other CPU tensors, every dtype, empty shapes. Here (no GPU) they are
// ordinary host memory; tests/gpu/test_cuda_pinned.cpp covers the page-locked case.
#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/cuda/device_query.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

std::vector<float> iota_values(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + 0.5f * float(i);
  return v;
}

TEST(PinnedTensor, IsACpuTensorPinnedExactlyWhenADeviceIsVisible) {
  Tensor t = Tensor::empty_pinned({3, 5}, DType::Float64);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_EQ(t.dtype(), DType::Float64);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.is_pinned(), cuda::visible_device_count() > 0);
  EXPECT_FALSE(Tensor::empty({3, 5}, DType::Float64).is_pinned());
}

TEST(PinnedTensor, HoldsValuesWrittenThroughItsPointerAndFill) {
  Tensor t = Tensor::empty_pinned({2, 4}, DType::Float32);
  float* p = t.data_ptr<float>();
  for (int i = 0; i < 8; ++i) p[i] = float(i * i) - 3.0f;
  const auto v = t.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[size_t(i)], float(i * i) - 3.0f);
  t.fill_(2.25);
  for (float x : t.to_vector<float>()) EXPECT_EQ(x, 2.25f);
}

TEST(PinnedTensor, CopiesToAndFromOrdinaryCpuTensors) {
  const int64_t n = 1037;  // not a multiple of any block or vector size
  Tensor src = Tensor::from_vector(iota_values(n, -7.0f), {n});
  Tensor pinned = Tensor::empty_pinned({n}, DType::Float32);
  pinned.copy_(src);
  EXPECT_EQ(pinned.to_vector<float>(), iota_values(n, -7.0f));
  Tensor back = Tensor::zeros({n}, DType::Float32);
  back.copy_(pinned);
  EXPECT_EQ(back.to_vector<float>(), iota_values(n, -7.0f));
  // A copy that casts, and one from a strided view.
  Tensor as_double = Tensor::empty_pinned({n}, DType::Float64);
  as_double.copy_(pinned);
  const auto d = as_double.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(d[size_t(i)], double(-7.0f + 0.5f * float(i)));
  Tensor matrix = Tensor::from_vector(iota_values(12, 0.0f), {3, 4});
  Tensor transposed = Tensor::empty_pinned({4, 3}, DType::Float32);
  transposed.copy_(matrix.t());
  const auto tv = transposed.to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(tv[size_t(r * 3 + c)], 0.5f * float(c * 4 + r));
}

TEST(PinnedTensor, OpsViewsAndClonesWork) {
  Tensor a = Tensor::empty_pinned({6}, DType::Float32);
  a.copy_(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {6}));
  Tensor b = Tensor::from_vector(std::vector<float>{10, 20, 30, 40, 50, 60}, {6});
  EXPECT_EQ(add(a, b).to_vector<float>(), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  Tensor middle = a.narrow(0, 2, 3);  // a view shares the pinned storage
  EXPECT_EQ(middle.is_pinned(), a.is_pinned());
  middle.fill_(0.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 0, 6}));
  Tensor copy = a.clone();  // a new tensor is ordinary memory
  EXPECT_FALSE(copy.is_pinned());
  EXPECT_EQ(copy.to_vector<float>(), a.to_vector<float>());
}

TEST(PinnedTensor, EveryDtypeAndEmptyShapes) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::UInt8, DType::Bool}) {
    Tensor src = Tensor::from_vector(std::vector<double>{0, 1, 1, 0, 1}, {5}).to(dt);
    Tensor t = Tensor::empty_pinned({5}, dt);
    t.copy_(src);
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{0, 1, 1, 0, 1})) << dtype_name(dt);
  }
  Tensor none = Tensor::empty_pinned({0, 3});
  EXPECT_EQ(none.numel(), 0);
  none.copy_(Tensor::empty({0, 3}));
  EXPECT_TRUE(none.to_vector<float>().empty());
}

TEST(PinnedTensor, SeparateTensorsNeverShareMemory) {
  // Blocks freed and allocated again (the pinned cache reuses them) keep their own values.
  std::vector<Tensor> live;
  for (int i = 0; i < 8; ++i) {
    Tensor t = Tensor::empty_pinned({256});
    t.fill_(double(i));
    if (i % 2 == 0) live.push_back(t);  // odd ones are freed at once
  }
  for (size_t k = 0; k < live.size(); ++k)
    for (float x : live[k].to_vector<float>()) ASSERT_EQ(x, float(2 * k));
}

TEST(PinnedTensor, PinnedStorageMustBeOnTheHost) {
  EXPECT_THROW(Storage(64, Device::cuda(0), HostMemory::Pinned), DeviceError);
}

}  // namespace
}  // namespace tandem
