// CUDA optimizer steps against the CPU: SGD (momentum, dampening, Nesterov, weight decay,
// the first step's buffer copy) and Adam/AdamW over 5 steps, through the optimizers (one
// fused multi-tensor launch per group on CUDA) for parameters of odd sizes; float64, half
// types (one step against the CPU's float32 update of the rounded values), unaligned views,
// lists longer than one launch's table, mixed dtypes and empty tensors through the backend.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "cuda_family_test_util.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"

namespace tandem::testing {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Runs `steps` steps with the same random gradients on CPU and CUDA copies of params of the
// given sizes and compares parameters after every step and the state after the last.
void compare_optimizer(const MakeOptimizer& make, const std::vector<int64_t>& sizes, DType dtype, int steps,
                       double rel_tol, const std::string& what) {
  std::mt19937 rng(7);
  std::vector<Tensor> cpu_params, gpu_params;
  for (int64_t n : sizes) {
    Tensor p = randn_host({n}, rng).to(dtype);
    cpu_params.push_back(p.clone().requires_grad_());
    gpu_params.push_back(p.to(kGpu).requires_grad_());
  }
  auto cpu_opt = make(cpu_params), gpu_opt = make(gpu_params);
  for (int step = 1; step <= steps; ++step) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor g = randn_host({sizes[i]}, rng).to(dtype);
      cpu_params[i].set_grad(g);
      gpu_params[i].set_grad(g.to(kGpu));
    }
    cpu_opt->step();
    gpu_opt->step();
    for (size_t i = 0; i < sizes.size(); ++i)
      expect_close(gpu_params[i], cpu_params[i], rel_tol, rel_tol,
                   what + " param " + std::to_string(i) + " (" + std::to_string(sizes[i]) + ") step " +
                       std::to_string(step));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const StateDict &gs = gpu_opt->state_of(gpu_params[i]), &cs = cpu_opt->state_of(cpu_params[i]);
    for (const char* key : {"momentum_buffer", "exp_avg", "exp_avg_sq"})
      if (cs.contains(key)) {
        ASSERT_TRUE(gs.contains(key)) << what << ": " << key;
        expect_close(gs.at(key), cs.at(key), rel_tol, rel_tol, what + " " + key + " of param " + std::to_string(i));
      }
  }
}

const std::vector<int64_t> kOddSizes = {1, 3, 1000, 65537};

// float32: the kernels follow the CPU's operation order; only where one compiler fuses a
// multiply-add and the other does not can the last bit differ: about 8 ulps after 5 steps.
constexpr double kFloat32Tol = 1e-6;

TEST(CudaOptim, SgdVariantsMatchTheCpuOverFiveSteps) {
  SKIP_WITHOUT_GPU();
  struct Variant { const char* name; optim::SGDOptions o; };
  for (const Variant& v : {Variant{"plain+wd", {.lr = 0.1, .weight_decay = 0.05}},
                           Variant{"momentum+dampening", {.lr = 0.1, .momentum = 0.9, .dampening = 0.1}},
                           Variant{"nesterov+wd", {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}}}) {
    MakeOptimizer make = [&](std::vector<Tensor> ps) { return std::make_unique<optim::SGD>(std::move(ps), v.o); };
    compare_optimizer(make, kOddSizes, DType::Float32, 5, kFloat32Tol, std::string("SGD ") + v.name);
    compare_optimizer(make, kOddSizes, DType::Float64, 5, 1e-14, std::string("SGD f64 ") + v.name);
  }
}

TEST(CudaOptim, AdamAndAdamWMatchTheCpuOverFiveSteps) {
  SKIP_WITHOUT_GPU();
  MakeOptimizer adam = [](std::vector<Tensor> ps) {
    return std::make_unique<optim::Adam>(std::move(ps), optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
  };
  MakeOptimizer adamw = [](std::vector<Tensor> ps) {
    return std::make_unique<optim::AdamW>(std::move(ps), optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
  };
  compare_optimizer(adam, kOddSizes, DType::Float32, 5, kFloat32Tol, "Adam");
  compare_optimizer(adamw, kOddSizes, DType::Float32, 5, kFloat32Tol, "AdamW");
  compare_optimizer(adam, kOddSizes, DType::Float64, 5, 1e-14, "Adam f64");
  compare_optimizer(adamw, kOddSizes, DType::Float64, 5, 1e-14, "AdamW f64");
  // More tensors than one launch's argument table holds (a second launch covers the rest).
  std::vector<int64_t> many(200);
  for (size_t i = 0; i < many.size(); ++i) many[i] = int64_t(1 + (i * 37) % 300);
  compare_optimizer(adamw, many, DType::Float32, 2, kFloat32Tol, "AdamW x200");
  MakeOptimizer sgd = [](std::vector<Tensor> ps) {
    return std::make_unique<optim::SGD>(std::move(ps), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  };
  compare_optimizer(sgd, many, DType::Float32, 2, kFloat32Tol, "SGD x200");
}

// Through the backend: unaligned views (scalar path), an empty tensor in the list, and a
// list with two dtypes (updated one dtype at a time).
TEST(CudaOptim, MultiTensorListsWithUnalignedEmptyAndMixedEntries) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  const int64_t n = 1001;
  Tensor p_big = randn_host({n + 1}, rng), g_big = randn_host({n + 1}, rng), buf_big = randn_host({n + 1}, rng);
  Tensor p64 = randn_host({17}, rng).to(DType::Float64), g64 = randn_host({17}, rng).to(DType::Float64);
  Tensor buf64 = Tensor::zeros({17}, DType::Float64);
  Tensor empty = Tensor::empty({0});
  // Device copies; the float32 entries are views one element into their buffers.
  Tensor pg_big = p_big.to(kGpu), gg_big = g_big.to(kGpu), bg_big = buf_big.to(kGpu);
  Tensor pg = pg_big.narrow(0, 1, n), gg = gg_big.narrow(0, 1, n), bg = bg_big.narrow(0, 1, n);
  Tensor pg64 = p64.to(kGpu), gg64 = g64.to(kGpu), bg64 = buf64.to(kGpu), eg = empty.to(kGpu);
  gpu_backend().sgd_step_multi({pg.view_desc(), eg.view_desc(), pg64.view_desc()},
                               {gg.view_desc(), eg.view_desc(), gg64.view_desc()},
                               {bg.view_desc(), eg.view_desc(), bg64.view_desc()}, 0.1, 0.9, 0.0, 0.01, true, false);
  Tensor pc = p_big.narrow(0, 1, n).clone(), gc = g_big.narrow(0, 1, n).clone(), bc = buf_big.narrow(0, 1, n).clone();
  TensorView bcv = bc.view_desc(), b64v = buf64.view_desc();
  cpu_backend().sgd_step(pc.view_desc(), gc.view_desc(), &bcv, 0.1, 0.9, 0.0, 0.01, true, false);
  cpu_backend().sgd_step(p64.view_desc(), g64.view_desc(), &b64v, 0.1, 0.9, 0.0, 0.01, true, false);
  expect_close(pg, pc, kFloat32Tol, kFloat32Tol, "unaligned float32 param");
  expect_close(bg, bc, kFloat32Tol, kFloat32Tol, "unaligned float32 momentum");
  expect_close(pg64, p64, 1e-15, 1e-15, "float64 param in a mixed list");
  // The element before each view is untouched.
  EXPECT_EQ(pg_big.narrow(0, 0, 1).item(), p_big.narrow(0, 0, 1).item());
}

// Half types: one step from the same rounded values equals the CPU's float32 update of those
// values, rounded once to the half type.
TEST(CudaOptim, HalfTypesUpdateInFloat32AndRoundOnce) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    const double u = unit_roundoff(dt);
    const std::string name = dtype_name(dt);
    Tensor p = rounded_to(randn_host({1003}, rng), dt), g = rounded_to(randn_host({1003}, rng), dt);
    Tensor m = rounded_to(randn_host({1003}, rng, 0, 0.1), dt), v = rounded_to(uniform_host({1003}, rng, 0, 0.01), dt);
    Tensor pg = p.to(dt).to(kGpu), gg = g.to(dt).to(kGpu), mg = m.to(dt).to(kGpu), vg = v.to(dt).to(kGpu);
    gpu_backend().adam_step_multi({pg.view_desc()}, {gg.view_desc()}, {mg.view_desc()}, {vg.view_desc()}, 0.01, 0.9,
                                  0.999, 1e-8, 0.1, true, 3);
    cpu_backend().adam_step(p.view_desc(), g.view_desc(), m.view_desc(), v.view_desc(), 0.01, 0.9, 0.999, 1e-8, 0.1,
                            true, 3);
    // Rounding of the result (u relative) plus float32 noise.
    expect_close(pg, p, 1e-6, 1.01 * u, name + " Adam param");
    expect_close(mg, m, 1e-7, 1.01 * u, name + " Adam exp_avg");
    expect_close(vg, v, 1e-9, 1.01 * u, name + " Adam exp_avg_sq");

    Tensor q = rounded_to(randn_host({1003}, rng), dt), b = rounded_to(randn_host({1003}, rng), dt);
    Tensor qg = q.to(dt).to(kGpu), bg = b.to(dt).to(kGpu);
    TensorView bgv = bg.view_desc(), bcv = b.view_desc();
    gpu_backend().sgd_step(qg.view_desc(), gg.view_desc(), &bgv, 0.1, 0.9, 0.0, 0.0, false, false);
    cpu_backend().sgd_step(q.view_desc(), rounded_to(g, dt).view_desc(), &bcv, 0.1, 0.9, 0.0, 0.0, false, false);
    expect_close(qg, q, 1e-6, 1.01 * u, name + " SGD param");
    expect_close(bg, b, 1e-6, 1.01 * u, name + " SGD momentum");
  }
}

}  // namespace
}  // namespace tandem::testing
