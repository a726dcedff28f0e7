// The CPU backend's fused multi-tensor Adam / AdamW (adam_step_multi: one job over every
// tensor's elements, float32 in AVX-512 / AVX2 registers): bit for bit the single-tensor kernel
// on every instruction set this CPU runs and at 1 and 3 threads, across the kernel's 4096-element
// blocks, vector tails and empty tensors; and PyTorch's update formula (torch.optim.AdamW /
// Adam, evaluated here in double) over three steps. The optimizer-level literals are in
// test_adam.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/thread_pool.h"

using namespace tandem;

namespace {

// The sizes cross the block size (4096) and the vector widths (8, 16); the list is long enough
// (167 blocks) for 3 threads to take a run of blocks each.
const std::vector<int64_t> kSizes{0, 1, 15, 17, 4096, 4097, 70001, 600000};

template <typename T>
struct State {
  std::vector<std::vector<T>> p, g, m, v;
};

template <typename T>
State<T> random_state(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  State<T> s;
  for (int64_t n : kSizes) {
    std::vector<T> p(static_cast<size_t>(n)), g(static_cast<size_t>(n)), m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      p[size_t(i)] = T(d(rng));
      g[size_t(i)] = T(d(rng));
      m[size_t(i)] = T(0.1 * d(rng));
      v[size_t(i)] = T(0.01 * std::abs(d(rng)));
    }
    s.p.push_back(p), s.g.push_back(g), s.m.push_back(m), s.v.push_back(v);
  }
  return s;
}

template <typename T>
TensorView view(std::vector<T>& x) {
  return TensorView{x.data(), sizeof(T) == 4 ? DType::Float32 : DType::Float64, {int64_t(x.size())}, {1}};
}

struct Hyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
};

// `steps` steps from step 1, the whole list at once (fused) or one tensor per call.
template <typename T>
void run(State<T>& s, const Hyper& h, int steps, bool fused) {
  CpuBackend cpu;
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<TensorView> p, g, m, v;
    for (size_t i = 0; i < s.p.size(); ++i) {
      p.push_back(view(s.p[i])), g.push_back(view(s.g[i])), m.push_back(view(s.m[i])), v.push_back(view(s.v[i]));
      if (!fused)
        cpu.adam_step(p.back(), g.back(), m.back(), v.back(), h.lr, h.beta1, h.beta2, h.eps, h.weight_decay,
                      h.decoupled, step);
    }
    if (fused) cpu.adam_step_multi(p, g, m, v, h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.decoupled, step);
  }
}

const Hyper kAdamW{1e-3, 0.9, 0.99, 1e-8, 0.1, true};
const Hyper kAdamL2{3e-3, 0.8, 0.999, 1e-6, 0.05, false};

}  // namespace

TEST(AdamFused, EqualsTheSingleTensorKernelBitForBitOnEveryIsaAndThreadCount) {
  const cpu::CpuIsa saved_isa = cpu::active_isa();
  const int saved_threads = cpu::max_threads();
  std::vector<std::vector<float>> first_isa_params;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::Avx512, cpu::CpuIsa::Avx2, cpu::CpuIsa::Portable}) {
    if (!cpu::cpu_supports(isa)) continue;
    cpu::set_active_isa(isa);
    for (int threads : {1, 3})
      for (const Hyper& h : {kAdamW, kAdamL2}) {
        cpu::set_max_threads(threads);
        State<float> fused = random_state<float>(7), each = fused;
        run(fused, h, 3, true);
        cpu::set_max_threads(1);
        run(each, h, 3, false);
        EXPECT_EQ(fused.p, each.p) << cpu::isa_name(isa) << ", " << threads << " threads";
        EXPECT_EQ(fused.m, each.m) << cpu::isa_name(isa);
        EXPECT_EQ(fused.v, each.v) << cpu::isa_name(isa);
        // Every ISA rounds each operation as the scalar loop does: the same bits everywhere.
        if (h.decoupled) {
          if (first_isa_params.empty()) first_isa_params = fused.p;
          EXPECT_EQ(fused.p, first_isa_params) << cpu::isa_name(isa) << " differs from the widest ISA";
        }
      }
  }
  cpu::set_active_isa(saved_isa);
  cpu::set_max_threads(saved_threads);
}

TEST(AdamFused, FollowsPyTorchsFormulaOverThreeSteps) {
  for (const Hyper& h : {kAdamW, kAdamL2}) {
    State<double> s64 = random_state<double>(3);
    State<float> s32 = random_state<float>(3);
    State<double> want = s64;
    for (int step = 1; step <= 3; ++step)  // torch.optim.AdamW / Adam (amsgrad=False, maximize=False)
      for (size_t i = 0; i < want.p.size(); ++i)
        for (size_t j = 0; j < want.p[i].size(); ++j) {
          double &p = want.p[i][j], &m = want.m[i][j], &v = want.v[i][j], g = want.g[i][j];
          if (h.decoupled) p *= 1 - h.lr * h.weight_decay;
          else g += h.weight_decay * p;
          m = h.beta1 * m + (1 - h.beta1) * g;
          v = h.beta2 * v + (1 - h.beta2) * g * g;
          const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
          p -= h.lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + h.eps);
        }
    run(s64, h, 3, true);
    run(s32, h, 3, true);
    for (size_t i = 0; i < want.p.size(); ++i)
      for (size_t j = 0; j < want.p[i].size(); ++j) {
        ASSERT_NEAR(s64.p[i][j], want.p[i][j], 1e-12) << "tensor " << i << " element " << j;
        ASSERT_NEAR(s64.v[i][j], want.v[i][j], 1e-15) << "tensor " << i << " element " << j;
        // float32: each of the ~12 roundings per step moves p by at most an ulp of an lr-sized term.
        ASSERT_NEAR(s32.p[i][j], want.p[i][j], 2e-6 * (1 + std::abs(want.p[i][j]))) << "tensor " << i << " element " << j;
      }
  }
}
