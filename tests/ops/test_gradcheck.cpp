// Every op of the harness: float64 backward vs central finite differences, three random
// draws of shapes and values each.
#include <gtest/gtest.h>

#include "op_harness.h"

namespace tandem::testing {
namespace {

class GradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheck, BackwardMatchesFiniteDifferences) {
  const OpCase& op = op_case(GetParam());
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    std::vector<Tensor> inputs = op.make_inputs(rng, DType::Float64);
    std::string where;
    double err = max_gradient_error(op, inputs, &where);
    EXPECT_LE(err, op.grad_tol) << op.name << " seed " << seed << ": " << where;
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const OpCase& c : op_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradCheck, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tandem::testing
