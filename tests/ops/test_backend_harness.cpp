// The backend-comparison half of the harness, exercised on the CPU: comparing the CPU backend
// with itself must give exactly zero difference for every op (so the comparison path works
// before a GPU is there), and the CPU kernels give the same results with 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include "op_harness.h"

namespace tandem::testing {
namespace {

TEST(BackendHarness, CpuAgainstItselfIsExactForEveryOp) {
  for (const OpCase& op : op_cases()) {
    BackendComparison r = compare_backends(op, Device::cpu(), 11);
    EXPECT_EQ(r.max_output_error, 0.0) << op.name << ": " << r.where;
    EXPECT_EQ(r.max_grad_error, 0.0) << op.name << ": " << r.where;
  }
}

TEST(BackendHarness, ThreadCountDoesNotChangeResultsBeyondRounding) {
  // Large enough inputs that the kernels take their parallel paths.
  std::mt19937 rng(3);
  Tensor x = randn64({64, 8, 32, 32}, DType::Float32, rng), w = randn64({16, 8, 3, 3}, DType::Float32, rng);
  Tensor a = randn64({512, 600}, DType::Float32, rng), b = randn64({600, 700}, DType::Float32, rng);
  auto run = [&] {
    std::vector<std::vector<float>> out;
    out.push_back(conv2d(x, w, Tensor(), {1}, {1}).to_vector<float>());
    out.push_back(matmul(a, b).to_vector<float>());
    out.push_back(sum(a, {0}).to_vector<float>());
    out.push_back(softmax(a, 1).to_vector<float>());
    out.push_back(max_pool2d(x, {2}).to_vector<float>());
    return out;
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run();
  omp_set_num_threads(2);
  auto two = run();
  omp_set_num_threads(saved);
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].size(), two[k].size());
    for (size_t i = 0; i < one[k].size(); ++i)
      ASSERT_NEAR(one[k][i], two[k][i], 1e-4 * (1 + std::abs(one[k][i]))) << "result " << k << " element " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
