// Every op error path: a typed exception whose message names what was wrong.
#include <gtest/gtest.h>

#include "base/error.h"
#include "tensor/ops/host_checks.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

template <typename E, typename F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing '" << fragment << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(OpErrors, MixedDtypesAndShapes) {
  Tensor f = Tensor::ones({2, 3}), d = Tensor::ones({2, 3}, DType::Float64);
  expect_error<DTypeError>([&] { add(f, d); }, "different dtypes (float32 and float64)");
  expect_error<ShapeError>([&] { add(f, Tensor::ones({4})); }, "cannot be broadcast");
  expect_error<ShapeError>([&] { matmul(f, f); }, "cannot be multiplied");
  expect_error<ShapeError>([&] { linear(f, Tensor::ones({4, 5})); }, "in_features = 5");
  expect_error<ShapeError>([&] { sum(f, {2}); }, "dim 2 out of range");
  expect_error<ShapeError>([&] { f.view({4, 2}); }, "invalid for input of shape [2, 3]");
  expect_error<ShapeError>([&] { f.t().view({6}); }, "use reshape()");
  EXPECT_EQ(f.t().reshape({6}).shape(), (Shape{6}));
  expect_error<ShapeError>([&] { f.expand({3, 3}); }, "cannot expand");
  expect_error<ShapeError>([&] { cat({f, Tensor::ones({3, 3})}, 1); }, "differs from");
}

TEST(OpErrors, MixedDtypesInWeightsBiasesAndStatistics) {
  // Kernels read every operand through the input's element type, so a companion tensor of
  // another dtype must be refused up front (it used to be read out of bounds).
  Tensor x = Tensor::ones({4, 3}, DType::Float64), w32 = Tensor::ones({3}), w64 = Tensor::ones({3}, DType::Float64);
  expect_error<DTypeError>([&] { batch_norm(x, Tensor(), Tensor(), w32, w64, true); },
                           "batch_norm: weight is float32 but the input is float64");
  expect_error<DTypeError>([&] { batch_norm(x, Tensor(), Tensor(), w64, w32, true); }, "batch_norm: bias is float32");
  expect_error<DTypeError>([&] { batch_norm(x, w32, w64, w64, w64, false); }, "batch_norm: running_mean is float32");
  expect_error<DTypeError>([&] { batch_norm(x, w64, w32, w64, w64, true); }, "batch_norm: running_var is float32");
  expect_error<DTypeError>([&] { layer_norm(x, {3}, w32); }, "layer_norm: weight is float32");
  expect_error<DTypeError>([&] { layer_norm(x, {3}, w64, w32); }, "layer_norm: bias is float32");
  Tensor img = Tensor::ones({1, 1, 3, 3}, DType::Float64), k = Tensor::ones({2, 1, 2, 2}, DType::Float64);
  expect_error<DTypeError>([&] { conv2d(img, k, Tensor::ones({2})); }, "conv2d: bias is float32");
  expect_error<DTypeError>([&] { conv2d(img, Tensor::ones({2, 1, 2, 2})); }, "different dtypes");
  expect_error<DTypeError>([&] { linear(x, Tensor::ones({2, 3}, DType::Float64), Tensor::ones({2})); },
                           "linear: bias is float32");
  expect_error<DTypeError>([&] { embedding(Tensor::from_vector<int64_t>({0}, {1}), Tensor::ones({2, 2}, DType::Int64)); },
                           "embedding needs a floating point tensor");
  expect_error<DTypeError>([&] { where(Tensor::ones({3}, DType::Bool), w32, w64); }, "different dtypes");
  expect_error<DTypeError>([&] { stack({w32, w64}); }, "different dtypes");
  // The same calls with matching dtypes work.
  EXPECT_EQ(batch_norm(x, w64, w64, w64, w64, false).dtype(), DType::Float64);
  EXPECT_EQ(conv2d(img, k, Tensor::ones({2}, DType::Float64)).shape(), (Shape{1, 2, 2, 2}));
}

TEST(OpErrors, MixedDevicesSayHowToFix) {
  // Needs a second device: a CUDA tensor (tests/gpu runs the same check on a GPU machine).
  Tensor g;
  try {
    g = Tensor::ones({2}, DType::Float32, Device::cuda(0));
  } catch (const DeviceError& e) {
    GTEST_SKIP() << "no CUDA tensor can be made here: " << e.what();
  }
  Tensor c = Tensor::ones({2});
  expect_error<DeviceError>([&] { add(c, g); }, "different devices (cpu and cuda:0)");
  expect_error<DeviceError>([&] { linear(Tensor::ones({1, 2}), Tensor::ones({2, 2}), g); }, "linear: bias is on cuda:0");
}

TEST(OpErrors, LossAndIndexValidation) {
  Tensor logits = Tensor::zeros({2, 3});
  expect_error<ValueError>([&] { cross_entropy(logits, Tensor::from_vector<int64_t>({0, 3}, {2})); },
                           "target 3 is out of bounds for 3 classes");
  {  // Deferring host checks (CUDA graph steps) skips only device targets: CPU ones cost no sync.
    ops::DeferHostChecks defer;
    EXPECT_TRUE(ops::host_checks_deferred());
    expect_error<ValueError>([&] { cross_entropy(logits, Tensor::from_vector<int64_t>({-1, 0}, {2})); },
                             "target -1 is out of bounds for 3 classes");
  }
  EXPECT_FALSE(ops::host_checks_deferred());
  expect_error<DTypeError>([&] { cross_entropy(logits, Tensor::zeros({2})); }, "int64");
  expect_error<ShapeError>([&] { cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2}, {3})); },
                           "does not match input");
  expect_error<ValueError>([&] { cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1}, {2}), Reduction::Mean, -100, 1.5); },
                           "label_smoothing");
  expect_error<ValueError>([&] { embedding(Tensor::from_vector<int64_t>({5}, {1}), Tensor::zeros({3, 2})); },
                           "index 5 is out of range for 3 embeddings");
  expect_error<ShapeError>([&] { mse_loss(Tensor::zeros({2}), Tensor::zeros({3})); }, "same shape");
  expect_error<ValueError>([&] { parse_reduction("avg"); }, "'mean', 'sum' or 'none'");
}

TEST(OpErrors, ConvPoolNormArguments) {
  Tensor x = Tensor::zeros({1, 2, 4, 4});
  expect_error<ShapeError>([&] { conv2d(x, Tensor::zeros({3, 5, 3, 3})); }, "input has 2 channels");
  expect_error<ValueError>([&] { conv2d(x, Tensor::zeros({2, 1, 3, 3}), Tensor(), {1}, {0}, {1}, 2); }, "groups = 2");
  expect_error<ShapeError>([&] { conv2d(x, Tensor::zeros({3, 2, 7, 7})); }, "smaller than the kernel");
  expect_error<ValueError>([&] { conv2d(x, Tensor::zeros({3, 2, 3, 3}), Tensor(), {0}); }, "stride must be >= 1");
  expect_error<ShapeError>([&] { conv2d(Tensor::zeros({2, 4, 4}), Tensor::zeros({3, 2, 3, 3})); }, "4-d input");
  expect_error<ValueError>([&] { max_pool2d(x, {2}, {2}, {2}); }, "at most half the kernel");
  expect_error<ShapeError>([&] { batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                           "more than 1 value per channel");
  expect_error<ShapeError>([&] { layer_norm(x, {5}); }, "trailing dims");
  expect_error<ValueError>([&] { dropout(x, 1.5, true); }, "p must be in [0, 1]");
  expect_error<ValueError>([&] { gelu(x, "fast"); }, "'none' or 'tanh'");
  expect_error<DTypeError>([&] { relu(Tensor::zeros({2}, DType::Int64)); }, "floating point");
  expect_error<DTypeError>([&] { exp(Tensor::zeros({2}, DType::BFloat16)); }, "storage-only on the CPU");
}

}  // namespace
}  // namespace tandem
