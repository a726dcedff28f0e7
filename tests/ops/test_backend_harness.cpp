// The backend-comparison half of the harness, exercised on the CPU: comparing the CPU backend
// with itself must give exactly zero difference for every op (so the comparison path works
// before a GPU is there), every kernel of the list is reached by some case, and the CPU kernels
// give the same results with 1 and 2 threads.
#include <gtest/gtest.h>

#include <map>

#include "counting_backend.h"
#include "op_harness.h"
#include "kernels/cpu/thread_pool.h"

namespace tandem::testing {
namespace {

TEST(BackendHarness, CpuAgainstItselfIsExactForEveryOp) {
  for (const OpCase& op : op_cases()) {
    BackendComparison r = compare_backends(op, Device::cpu(), 11);
    EXPECT_EQ(r.max_output_error, 0.0) << op.name << ": " << r.where;
    EXPECT_EQ(r.max_grad_error, 0.0) << op.name << ": " << r.where;
  }
}

// Adding a kernel to kernels/kernel_list.def without a case that reaches it fails here, naming
// the kernel.
TEST(BackendHarness, EveryKernelIsReachedByACase) {
  std::string uncovered;
  for (const auto& [kernel, cases] : kernel_coverage(op_cases()))
    if (cases.empty()) uncovered += " " + kernel;
  EXPECT_TRUE(uncovered.empty()) << "kernels of kernels/kernel_list.def that no case of tests/ops/op_cases.cpp "
                                    "reaches:" << uncovered;
}

// The coverage check can fail: with the add case alone, the convolution kernels are unreached,
// while binary (add's forward) and reduce (its broadcast gradient's sum) are reached by it.
TEST(BackendHarness, KernelCoverageNamesTheKernelsACaseListLeavesOut) {
  std::map<std::string, std::vector<std::string>> coverage;
  for (const auto& [kernel, cases] : kernel_coverage({op_case("add")})) coverage[kernel] = cases;
  EXPECT_EQ(coverage.size(), CountingBackend::listed_kernels().size());
  EXPECT_EQ(coverage.at("binary"), std::vector<std::string>{"add"});
  EXPECT_TRUE(coverage.at("conv2d").empty());
  EXPECT_TRUE(coverage.at("conv2d_backward").empty());
  EXPECT_TRUE(coverage.at("adam_step").empty());
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
  const int saved = cpu::max_threads();
  cpu::set_max_threads(1);
  auto one = run();
  cpu::set_max_threads(2);
  auto two = run();
  cpu::set_max_threads(saved);
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].size(), two[k].size());
    for (size_t i = 0; i < one[k].size(); ++i)
      ASSERT_NEAR(one[k][i], two[k][i], 1e-4 * (1 + std::abs(one[k][i]))) << "result " << k << " element " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
