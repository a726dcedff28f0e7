// The one op harness. Each OpCase makes random inputs (shapes drawn per seed, including
// broadcasting and odd sizes) and applies one op. The same table drives:
//   - gradient checks: backward on CPU in float64 vs central finite differences;
//   - backend comparisons: every op on another backend vs the CPU reference
//     (compare_backends(case, Device::cuda(0), seed) — one name per op in tests/gpu/test_cuda_backend.cpp).
// Adding an op means adding one entry to op_cases.cpp. Every kernel of kernels/kernel_list.def
// must be reached by some case (kernel_coverage below; BackendHarness.EveryKernelIsReachedByACase).
#pragma once
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/ops/ops.h"

namespace tandem::testing {

struct OpCase {
  std::string name;
  // Random inputs in `dtype` on the CPU; integer inputs (targets, indices, masks) stay integer.
  std::function<std::vector<Tensor>(std::mt19937& rng, DType dtype)> make_inputs;
  std::function<Tensor(const std::vector<Tensor>&)> apply;
  double grad_tol = 1e-6;  // abs + rel tolerance of the finite-difference check
  // Central-difference step. Larger for ops that round through float32 (cast), where a
  // 1e-6 step would measure rounding instead of the derivative.
  double fd_eps = 1e-6;
  // False for kernels called directly (optimizer updates, compression, random fills): their
  // output has no gradient, so the gradient check asserts it carries no autograd history and
  // backend comparisons compare outputs only.
  bool differentiable = true;
};

const std::vector<OpCase>& op_cases();
const OpCase& op_case(const std::string& name);

// Max |analytic - numeric| / (1 + |numeric|) over every float input element, for the
// loss sum(apply(inputs) * w) with fixed random weights w. Inputs must be float64 on CPU.
// Ops with an integer or bool output (argmax) have no gradient: for them the check is that
// the output carries no autograd history (infinity otherwise).
double max_gradient_error(const OpCase& op, std::vector<Tensor> inputs, std::string* where = nullptr);

struct BackendComparison {
  double max_output_error = 0;  // relative to 1 + |reference|
  double max_grad_error = 0;
  std::string where;
};
// Runs op on the CPU and on `device` with identical float32 inputs and compares outputs and
// input gradients.
BackendComparison compare_backends(const OpCase& op, Device device, uint64_t seed);

// For every kernel of kernels/kernel_list.def (in list order), the names of the cases among
// `cases` whose forward or backward reaches it on the CPU backend (empty: no case does), found
// by running each case once on a counting decorator of the CPU backend
// (tests/ops/counting_backend.h).
std::vector<std::pair<std::string, std::vector<std::string>>> kernel_coverage(const std::vector<OpCase>& cases);

// Random shape helpers.
int64_t rand_dim(std::mt19937& rng, int64_t lo, int64_t hi);
Tensor randn64(const Shape& shape, DType dtype, std::mt19937& rng);  // normal, from rng seed
Tensor positive(const Shape& shape, DType dtype, std::mt19937& rng);  // in [0.5, 2)

}  // namespace tandem::testing
