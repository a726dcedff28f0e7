// Element-wise comparison of two value traces (per step, per epoch) for the optimizer tests.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace tandem::testing {

// got[i] within tol of want[i] for every i, and the same length.
inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

}  // namespace tandem::testing
