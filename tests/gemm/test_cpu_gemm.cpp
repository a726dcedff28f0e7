// The packed float32 GEMM (kernels/cpu/gemm) against a float64 reference on every instruction
// set this CPU can execute: all transpose combinations, sizes around the register tile and the
// cache blocks (n = 1 and n < 16 with B transposed take the dot-product path), alpha/beta,
// leading dimensions wider than the matrix, the fused bias, threads, and through CpuBackend
// (batched, broadcast strides, linear_forward); and TANDEM_CPU_ISA's errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/activation_cpu.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/sgemm_dot.h"
#include "kernels/cpu/gemm/sgemm_packed.h"

using namespace tandem;
using namespace tandem::cpu;

namespace {

std::vector<CpuIsa> runnable_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : {CpuIsa::Portable, CpuIsa::Avx2, CpuIsa::Avx512})
    if (cpu_supports(isa)) v.push_back(isa);
  return v;
}

// The ISAs the GEMM tests loop over: the one TANDEM_CPU_ISA forces (the ctest entries
// cpu_isa_portable_*), else every one this CPU runs.
std::vector<CpuIsa> isas_to_test() {
  const char* env = std::getenv("TANDEM_CPU_ISA");
  if (env && *env) return {parse_isa(env)};
  return runnable_isas();
}

// Restores the ISA in use when a test that forces one ends.
struct IsaGuard {
  CpuIsa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad = 0;  // extra columns in every leading dimension
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  int threads = 1;
  bool epilogue = false;  // an SgemmEpilogue mapping every v to 2 v + 1 (CountedEpilogue)
};

// An epilogue that doubles and increments every element it is given, counting the visits of
// each element of C and checking that each block's pointer is C[i0, j0].
struct CountedEpilogue {
  float* c;
  int64_t ldc, n;
  std::vector<int>* visits;
  std::atomic<bool>* coordinates_ok;
  static void run(const void* context, float* block, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
    const auto& e = *static_cast<const CountedEpilogue*>(context);
    if (block != e.c + i0 * e.ldc + j0 || ldc != e.ldc) e.coordinates_ok->store(false);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        block[i * ldc + j] = 2.0f * block[i * ldc + j] + 1.0f;
        ++(*e.visits)[size_t((i0 + i) * e.n + j0 + j)];
      }
  }
};

// Runs sgemm on random operands and checks every element against the float64 sum:
// |C - ref| <= 1e-5 * (sum over p of |a||b| + |beta c| + |bias|) + 1e-6, the float32 bound.
void check(const Case& t) {
  const int64_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
  const int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
  const int64_t lda = a_cols + t.pad, ldb = b_cols + t.pad, ldc = t.n + t.pad;
  std::vector<float> a = random_floats(size_t(a_rows * lda), 1), b = random_floats(size_t(b_rows * ldb), 2);
  std::vector<float> c = random_floats(size_t(t.m * ldc), 3), bias = random_floats(size_t(t.n), 4);
  if (t.beta == 0.0f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> c0 = c;
  std::vector<int> visits(size_t(t.m * t.n), 0);
  std::atomic<bool> coordinates_ok{true};
  const CountedEpilogue counted{c.data(), ldc, t.n, &visits, &coordinates_ok};
  const SgemmEpilogue epilogue{CountedEpilogue::run, &counted};
  sgemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(), ldc,
        t.bias ? bias.data() : nullptr, t.threads, t.epilogue ? &epilogue : nullptr);
  if (t.epilogue) {
    ASSERT_TRUE(coordinates_ok) << "an epilogue block's pointer is not C[i0, j0]";
    for (size_t i = 0; i < visits.size(); ++i)
      ASSERT_EQ(visits[i], 1) << "element " << i << " of C: the epilogue must see it once, after the last depth block";
  }
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = t.ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)];
        const double y = t.tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)];
        sum += x * y;
        mag += std::abs(x * y);
      }
      double ref = t.alpha * sum;
      if (t.beta != 0.0f) ref += double(t.beta) * c0[size_t(i * ldc + j)];
      if (t.bias) ref += bias[size_t(j)];
      double tol = 1e-5 * (std::abs(t.alpha) * mag + std::abs(t.beta) + 1.0) + 1e-6;
      if (t.epilogue) ref = 2 * ref + 1, tol *= 2;
      ASSERT_NEAR(c[size_t(i * ldc + j)], ref, tol)
          << isa_name(active_isa()) << " ta=" << t.ta << " tb=" << t.tb << " m=" << t.m << " n=" << t.n
          << " k=" << t.k << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = t.n; j < ldc; ++j)  // the padding of C is never written
      ASSERT_TRUE(std::isnan(c[size_t(i * ldc + j)]) ? std::isnan(c0[size_t(i * ldc + j)])
                                                     : c[size_t(i * ldc + j)] == c0[size_t(i * ldc + j)]);
  }
}

}  // namespace

// First in this file, so no test has forced an ISA yet: TANDEM_CPU_ISA (or, unset, the widest
// ISA the CPU runs) decides the one in use.
TEST(CpuIsa, TheEnvironmentChoosesTheIsa) {
  const char* env = std::getenv("TANDEM_CPU_ISA");
  EXPECT_EQ(active_isa(), env && *env ? parse_isa(env) : best_isa());
}

TEST(CpuGemm, EveryIsaEveryTransposeAroundTheTileSizes) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    const SgemmKernel& kernel = sgemm_kernel(isa);
    const int64_t mr = kernel.mr, nr = kernel.nr;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int64_t m : {int64_t(1), mr - 1, mr + 1, 2 * mr + 3})
          for (int64_t n : {int64_t(1), nr - 1, nr + 1, 2 * nr + 5})
            for (int64_t k : {int64_t(1), int64_t(7)}) check({bool(ta), bool(tb), m, n, k});
  }
}

// The corners at C's edge: every row count of a tile, beside a full panel and a half one (AVX-512
// has edge micro-kernels for rows x 16 and rows x 32 that write straight into C; other corners and
// ISAs go through the scratch tile), with beta, the bias and padded strides.
TEST(CpuGemm, EveryRowCountAtTheEdgeBesideFullAndHalfPanels) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    const SgemmKernel& kernel = sgemm_kernel(isa);
    for (int64_t m = 1; m <= kernel.mr; ++m) check({false, false, m, kernel.nr + kernel.nr / 2, 5, 3, 1.0f, 0.5f, true});
  }
}

TEST(CpuGemm, DepthBeyondOneCacheBlockAlphaBetaStridesAndBias) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    const SgemmKernel& kernel = sgemm_kernel(isa);
    const int64_t kc = sgemm_blocking(kernel).kc;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        // Three depth blocks (k cut evenly): beta applies once, alpha to every block.
        check({bool(ta), bool(tb), kernel.mr + 2, kernel.nr + 3, 3 * kc + 5, 3, 0.5f, -1.5f, true});
        check({bool(ta), bool(tb), 2 * kernel.mr, 2 * kernel.nr, 9, 5, -2.0f, 1.0f, false});
        check({bool(ta), bool(tb), 5, 6, 11, 1, 1.0f, 0.0f, true});  // beta 0: C's NaNs never read
      }
  }
}

TEST(CpuGemm, RowsBeyondOneCacheBlockAndThreads) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    const SgemmKernel& kernel = sgemm_kernel(isa);
    const SgemmBlocking blocking = sgemm_blocking(kernel);
    check({false, true, blocking.mc + kernel.mr + 1, kernel.nr + 1, 3});
    if (isa != isas_to_test().back()) continue;  // threads split C the same way on every ISA
    // Above the parallel threshold on 2 threads: the grid of rectangles covers C exactly once.
    const int64_t k = kSgemmThreadedWork / (96 * 80) + 1;
    check({true, false, 96, 80, k, 2, 1.0f, 0.5f, true, 2});
    check({false, false, 3 * kernel.mr + 1, 7 * kernel.nr + 3, k * 96 * 80 / (3 * kernel.mr * 7 * kernel.nr) + 1,
           0, 1.0f, 0.0f, false, 2});
    // A narrow C (the dot-product path on AVX2 / AVX-512), rows split over 2 threads.
    check({false, true, 999, 16, kSgemmThreadedWork / (999 * 16) + 9, 1, 0.5f, 1.0f, true, 2});
  }
}

// The narrow-C path (A B^T with n <= kSgemmDotMaxN) at every width: the AVX-512 path splits the
// columns into blocks of at most 14, AVX2's into blocks of at most 6, two rows of A at a time;
// odd m leaves a single row, k = 37 a partial vector and k = 3 only one.
TEST(CpuGemm, EveryNarrowWidthOnTheDotPath) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    for (int64_t n = 1; n <= kSgemmDotMaxN; ++n) {
      check({false, true, 5, n, 37, 2, 0.5f, 1.5f, true});
      check({false, true, 4, n, 3});
    }
  }
}

// The epilogue (a fused activation's hook) sees each element of C once, with the block's true
// coordinates, after every depth block is summed: tiles at the edges, three depth blocks, the
// narrow-C path, the grid of 2 threads and k = 0.
TEST(CpuGemm, TheEpilogueSeesEveryElementOnceAfterTheLastDepthBlock) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    const SgemmKernel& kernel = sgemm_kernel(isa);
    const int64_t mr = kernel.mr, nr = kernel.nr, kc = sgemm_blocking(kernel).kc;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        check({bool(ta), bool(tb), 2 * mr + 3, nr + 5, 7, 1, 1.0f, 0.0f, true, 1, true});
        check({bool(ta), bool(tb), mr - 1, 2 * nr - 1, 3 * kc + 5, 0, 0.5f, 0.5f, true, 1, true});
      }
    for (int64_t n : {int64_t(1), int64_t(7), kSgemmDotMaxN}) check({false, true, 9, n, 37, 2, 1.0f, 0.0f, true, 1, true});
    check({false, false, 4, 5, 0, 1, 1.0f, 0.5f, true, 1, true});
    const int64_t k = kSgemmThreadedWork / (96 * 80) + 1;
    check({true, false, 96, 80, k, 2, 1.0f, 0.5f, true, 2, true});
    check({false, true, 999, 16, kSgemmThreadedWork / (999 * 16) + 9, 1, 0.5f, 1.0f, true, 2, true});
  }
}

TEST(CpuGemm, KZeroScalesByBetaAndAddsTheBias) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6}, bias = {10, 20, 30};
  sgemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 2.0f, c.data(), 3, bias.data(), 1);
  EXPECT_EQ(c, (std::vector<float>{12, 24, 36, 18, 30, 42}));
  sgemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.0f, c.data(), 3, nullptr, 1);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

// CpuBackend::gemm in float32 (packed) against the same call in float64 (Eigen, the reference):
// batched with a broadcast A (stride 0), transposes, alpha and beta; linear_forward's fused bias
// and activations, and linear_activation_backward.
TEST(CpuGemm, BackendFloat32MatchesTheFloat64Reference) {
  IsaGuard guard;
  const int64_t m = 19, n = 37, k = 23, batch = 3;
  const std::vector<float> a = random_floats(size_t(m * k), 5), b = random_floats(size_t(batch * k * n), 6);
  const std::vector<float> c_init = random_floats(size_t(batch * m * n), 7);
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        std::vector<float> c = c_init;
        std::vector<double> cd(c_init.begin(), c_init.end());
        cpu_backend().gemm(DType::Float32, ta, tb, m, n, k, 0.75, a.data(), 0, b.data(), k * n, -0.5, c.data(), m * n,
                           batch);
        cpu_backend().gemm(DType::Float64, ta, tb, m, n, k, 0.75, ad.data(), 0, bd.data(), k * n, -0.5, cd.data(),
                           m * n, batch);
        for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], cd[i], 1e-4) << isa_name(isa) << " at " << i;
      }
    // linear_forward with each activation, the affine map kept as pre (float32: the packed GEMM
    // with the activation on each finished tile; float64: gemm, then the unary kernel).
    std::vector<float> bias = random_floats(size_t(n), 8);
    std::vector<double> biasd(bias.begin(), bias.end());
    const TensorView x{const_cast<float*>(a.data()), DType::Float32, {m, k}, {k, 1}};
    const TensorView w{const_cast<float*>(b.data()), DType::Float32, {n, k}, {k, 1}};
    const TensorView xd{const_cast<double*>(ad.data()), DType::Float64, {m, k}, {k, 1}};
    const TensorView wd{const_cast<double*>(bd.data()), DType::Float64, {n, k}, {k, 1}};
    const TensorView bv{bias.data(), DType::Float32, {n}, {1}}, bvd{biasd.data(), DType::Float64, {n}, {1}};
    for (LinearActivation act : {LinearActivation::None, LinearActivation::Relu, LinearActivation::GeluTanh}) {
      std::vector<float> y(size_t(m * n)), pre(y.size());
      std::vector<double> yd(y.size()), pred(y.size());
      const TensorView yv{y.data(), DType::Float32, {m, n}, {n, 1}}, prev{pre.data(), DType::Float32, {m, n}, {n, 1}};
      const TensorView yvd{yd.data(), DType::Float64, {m, n}, {n, 1}}, prevd{pred.data(), DType::Float64, {m, n}, {n, 1}};
      cpu_backend().linear_forward(x, w, &bv, yv, act, &prev);
      cpu_backend().linear_forward(xd, wd, &bvd, yvd, act, &prevd);
      int positive = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], yd[i], 1e-4) << isa_name(isa) << " linear, activation " << int(act) << ", at " << i;
        ASSERT_NEAR(pre[i], pred[i], 1e-4) << isa_name(isa) << " linear's pre-activation at " << i;
        positive += pred[i] > 0;
      }
      ASSERT_GT(positive, 0);  // the activations see both signs
      ASSERT_LT(positive, int(y.size()));
      if (act == LinearActivation::None) continue;
      // Its backward: dz = g act'(z) and db = column sums of dz, against float64.
      const std::vector<float> g = random_floats(y.size(), 9);
      const std::vector<double> gd(g.begin(), g.end());
      std::vector<float> dz(y.size()), db(static_cast<size_t>(n));
      std::vector<double> dzd(y.size()), dbd(static_cast<size_t>(n));
      const TensorView gv{const_cast<float*>(g.data()), DType::Float32, {m, n}, {n, 1}};
      const TensorView gvd{const_cast<double*>(gd.data()), DType::Float64, {m, n}, {n, 1}};
      const TensorView dzv{dz.data(), DType::Float32, {m, n}, {n, 1}}, dbv{db.data(), DType::Float32, {n}, {1}};
      const TensorView dzvd{dzd.data(), DType::Float64, {m, n}, {n, 1}}, dbvd{dbd.data(), DType::Float64, {n}, {1}};
      const bool relu = act == LinearActivation::Relu;
      cpu_backend().linear_activation_backward(act, gv, yv, relu ? nullptr : &prev, dzv, &dbv);
      cpu_backend().linear_activation_backward(act, gvd, yvd, relu ? nullptr : &prevd, dzvd, &dbvd);
      for (size_t i = 0; i < dz.size(); ++i) ASSERT_NEAR(dz[i], dzd[i], 1e-5) << isa_name(isa) << " dz at " << i;
      for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(db[size_t(j)], dbd[size_t(j)], 1e-4) << isa_name(isa) << " db at " << j;
    }
  }
}

// linear_activation_backward on 1 and 2 threads (bands of rows, each summing its columns, added in
// band order): dz the same bits, db within float32 rounding of float64 and the same bits on every
// run at a given thread count; on every ISA (the GELU's AVX-512 and AVX2 forms).
TEST(CpuGemm, LinearActivationBackwardOnOneAndTwoThreads) {
  IsaGuard guard;
  const int64_t rows = 600, cols = 517;  // two bands of rows at 2 threads
  const std::vector<float> g = random_floats(size_t(rows * cols), 10), z = random_floats(g.size(), 11);
  const std::vector<double> gd(g.begin(), g.end()), zd(z.begin(), z.end());
  const int saved = max_threads();
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    for (LinearActivation act : {LinearActivation::Relu, LinearActivation::GeluTanh}) {
      std::vector<float> y(g.size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = act == LinearActivation::Relu ? std::max(z[i], 0.0f) : z[i];
      const std::vector<double> yd(y.begin(), y.end());
      const TensorView gv{const_cast<float*>(g.data()), DType::Float32, {rows, cols}, {cols, 1}};
      const TensorView zv{const_cast<float*>(z.data()), DType::Float32, {rows, cols}, {cols, 1}};
      const TensorView yv{y.data(), DType::Float32, {rows, cols}, {cols, 1}};
      std::vector<float> dz[3], db[3];
      for (int run = 0; run < 3; ++run) {  // 1 thread, then 2 threads twice
        set_max_threads(run == 0 ? 1 : 2);
        dz[run].assign(g.size(), 0.0f);
        db[run].assign(size_t(cols), 0.0f);
        const TensorView dzv{dz[run].data(), DType::Float32, {rows, cols}, {cols, 1}};
        const TensorView dbv{db[run].data(), DType::Float32, {cols}, {1}};
        cpu_backend().linear_activation_backward(act, gv, yv, &zv, dzv, &dbv);
      }
      set_max_threads(saved);
      EXPECT_EQ(dz[0], dz[1]) << isa_name(isa);
      EXPECT_EQ(db[1], db[2]) << isa_name(isa);
      std::vector<double> dzd(g.size()), dbd(static_cast<size_t>(cols));
      const TensorView gvd{const_cast<double*>(gd.data()), DType::Float64, {rows, cols}, {cols, 1}};
      const TensorView zvd{const_cast<double*>(zd.data()), DType::Float64, {rows, cols}, {cols, 1}};
      const TensorView yvd{const_cast<double*>(yd.data()), DType::Float64, {rows, cols}, {cols, 1}};
      const TensorView dzvd{dzd.data(), DType::Float64, {rows, cols}, {cols, 1}};
      const TensorView dbvd{dbd.data(), DType::Float64, {cols}, {1}};
      cpu_backend().linear_activation_backward(act, gvd, yvd, &zvd, dzvd, &dbvd);
      for (size_t i = 0; i < dzd.size(); ++i) ASSERT_NEAR(dz[1][i], dzd[i], 2e-6) << isa_name(isa) << " dz at " << i;
      for (int run = 0; run < 2; ++run)
        for (int64_t j = 0; j < cols; ++j)
          ASSERT_NEAR(db[run][size_t(j)], dbd[size_t(j)], 2e-4) << isa_name(isa) << " db at " << j << ", run " << run;
    }
  }
}

TEST(CpuIsa, NamesParseAndUnknownOrUnrunnableOnesAreConfigErrors) {
  for (CpuIsa isa : runnable_isas()) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(best_isa(), runnable_isas().back());
  try {
    parse_isa("sse9");
    FAIL() << "sse9 was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TANDEM_CPU_ISA='sse9' is not an instruction set"), std::string::npos) << what;
    EXPECT_NE(what.find("use avx512, avx2 or portable"), std::string::npos) << what;
  }
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512})
    if (!cpu_supports(isa)) {
      EXPECT_THROW(parse_isa(isa_name(isa)), ConfigError);
      EXPECT_THROW(set_active_isa(isa), ConfigError);
    }
}

// The float32 softmax rows and the GELU in registers (kernels/cpu/vector_math.h) on every ISA
// against float64: row lengths around the 8- and 16-lane widths and a vocabulary-sized row, the
// backward of log_softmax, and the special values: -inf inputs get exactly 0, a NaN gives NaN,
// inputs far past the exp's clamp stay finite.
TEST(CpuVectorMath, SoftmaxRowsAndTheGeluMatchFloat64OnEveryIsa) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    for (int64_t cols : {int64_t(1), int64_t(7), int64_t(8), int64_t(15), int64_t(16), int64_t(17), int64_t(5003)}) {
      const int64_t rows = 3;
      std::vector<float> x = random_floats(size_t(rows * cols), 20);
      for (float& v : x) v *= 12.0f;  // exps across many binades
      x[0] = -std::numeric_limits<float>::infinity();
      const std::vector<double> xd(x.begin(), x.end());
      for (bool log : {false, true}) {
        std::vector<float> y(x.size());
        std::vector<double> yd(x.size());
        cpu_backend().softmax(TensorView{x.data(), DType::Float32, {rows, cols}, {cols, 1}}, rows, cols,
                              TensorView{y.data(), DType::Float32, {rows, cols}, {cols, 1}}, log);
        cpu_backend().softmax(TensorView{const_cast<double*>(xd.data()), DType::Float64, {rows, cols}, {cols, 1}},
                              rows, cols, TensorView{yd.data(), DType::Float64, {rows, cols}, {cols, 1}}, log);
        for (size_t i = 1; i < y.size(); ++i)
          ASSERT_NEAR(y[i], yd[i], 2e-6 * (1 + std::abs(yd[i]))) << isa_name(isa) << " cols " << cols << " log " << log << " at " << i;
        if (cols > 1) {
          if (log) EXPECT_TRUE(std::isinf(y[0]) && y[0] < 0) << isa_name(isa);
          else EXPECT_EQ(y[0], 0.0f) << isa_name(isa) << ": exp(-inf) is 0";
        }
        if (!log) continue;
        const std::vector<float> g = random_floats(x.size(), 21);
        const std::vector<double> gd(g.begin(), g.end());
        std::vector<float> gx(x.size());
        std::vector<double> gxd(x.size());
        cpu_backend().softmax_backward(TensorView{y.data(), DType::Float32, {rows, cols}, {cols, 1}},
                                       TensorView{const_cast<float*>(g.data()), DType::Float32, {rows, cols}, {cols, 1}},
                                       rows, cols, TensorView{gx.data(), DType::Float32, {rows, cols}, {cols, 1}}, true);
        cpu_backend().softmax_backward(TensorView{yd.data(), DType::Float64, {rows, cols}, {cols, 1}},
                                       TensorView{const_cast<double*>(gd.data()), DType::Float64, {rows, cols}, {cols, 1}},
                                       rows, cols, TensorView{gxd.data(), DType::Float64, {rows, cols}, {cols, 1}}, true);
        for (size_t i = 1; i < gx.size(); ++i)
          ASSERT_NEAR(gx[i], gxd[i], 1e-5 * (1 + std::abs(gxd[i]))) << isa_name(isa) << " backward, cols " << cols << " at " << i;
      }
    }
    std::vector<float> nan_row = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f}, out(3);
    cpu_backend().softmax(TensorView{nan_row.data(), DType::Float32, {1, 3}, {3, 1}}, 1, 3,
                          TensorView{out.data(), DType::Float32, {1, 3}, {3, 1}}, false);
    for (float v : out) EXPECT_TRUE(std::isnan(v)) << isa_name(isa) << ": a NaN in a row makes the row NaN";
    // The GELU and its slope past the clamp (|x| = 30), and a NaN.
    const std::vector<float> xs = {-30.0f, -9.5f, -0.75f, 0.0f, 2.5f, 30.0f};
    std::vector<float> y(xs.size()), gx(xs.size()), ones(xs.size(), 1.0f);
    gelu_tanh_run(xs.data(), y.data(), int64_t(xs.size()));
    gelu_tanh_backward_run(xs.data(), ones.data(), gx.data(), int64_t(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v), s = 1 / (1 + std::exp(-2 * u));
      const double slope = s * (1 + 2 * v * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v) * (1 - s));
      EXPECT_NEAR(y[i], v * s, 1e-6 * (1 + std::abs(v))) << isa_name(isa) << " gelu(" << v << ")";
      EXPECT_NEAR(gx[i], slope, 2e-6) << isa_name(isa) << " gelu'(" << v << ")";
    }
    float nan = std::numeric_limits<float>::quiet_NaN(), r = 0.0f, one = 1.0f;
    gelu_tanh_run(&nan, &r, 1);
    EXPECT_TRUE(std::isnan(r)) << isa_name(isa);
    gelu_tanh_backward_run(&nan, &one, &r, 1);
    EXPECT_TRUE(std::isnan(r)) << isa_name(isa);
  }
}

// Float32 layer-norm rows in registers (vector_math.h: statistics in double lanes) on every ISA
// against float64: row lengths around the 8- and 16-lane widths, with and without gamma and beta,
// forward (output, mean, invstd) and backward (gx).
TEST(CpuVectorMath, LayerNormRowsMatchFloat64OnEveryIsa) {
  IsaGuard guard;
  for (CpuIsa isa : isas_to_test()) {
    set_active_isa(isa);
    for (int64_t cols : {int64_t(1), int64_t(7), int64_t(8), int64_t(9), int64_t(16), int64_t(17), int64_t(128),
                         int64_t(771)}) {
      for (bool affine : {false, true}) {
        const int64_t rows = 5;
        std::vector<float> x = random_floats(size_t(rows * cols), 30), gy = random_floats(x.size(), 31);
        for (float& v : x) v = 3.0f + 2.0f * v;  // a mean away from 0
        const std::vector<float> gamma = random_floats(size_t(cols), 32), beta = random_floats(size_t(cols), 33);
        const std::vector<double> xd(x.begin(), x.end()), gyd(gy.begin(), gy.end()),
            gammad(gamma.begin(), gamma.end()), betad(beta.begin(), beta.end());
        std::vector<float> y(x.size()), mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows)), gx(x.size());
        std::vector<double> yd(x.size()), meand(static_cast<size_t>(rows)), invd(static_cast<size_t>(rows)), gxd(x.size());
        const auto view = [](auto* p, Shape shape) {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
          Shape strides(shape.size(), 1);
          if (shape.size() == 2) strides[0] = shape[1];
          return TensorView{const_cast<T*>(p), std::is_same_v<T, float> ? DType::Float32 : DType::Float64, shape, strides};
        };
        const TensorView g32 = view(gamma.data(), {cols}), b32 = view(beta.data(), {cols});
        const TensorView g64 = view(gammad.data(), {cols}), b64 = view(betad.data(), {cols});
        cpu_backend().layer_norm(view(x.data(), {rows, cols}), rows, cols, affine ? &g32 : nullptr,
                                 affine ? &b32 : nullptr, 1e-5, view(y.data(), {rows, cols}), view(mean.data(), {rows}),
                                 view(inv.data(), {rows}));
        cpu_backend().layer_norm(view(xd.data(), {rows, cols}), rows, cols, affine ? &g64 : nullptr,
                                 affine ? &b64 : nullptr, 1e-5, view(yd.data(), {rows, cols}), view(meand.data(), {rows}),
                                 view(invd.data(), {rows}));
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], yd[i], 2e-6 * (1 + std::abs(yd[i]))) << isa_name(isa) << " cols " << cols << " at " << i;
        for (size_t r = 0; r < mean.size(); ++r) {
          ASSERT_NEAR(mean[r], meand[r], 1e-6 * (1 + std::abs(meand[r]))) << isa_name(isa) << " mean " << r;
          ASSERT_NEAR(inv[r], invd[r], 1e-6 * invd[r]) << isa_name(isa) << " invstd " << r;
        }
        cpu_backend().layer_norm_backward(view(x.data(), {rows, cols}), view(gy.data(), {rows, cols}), rows, cols,
                                          view(mean.data(), {rows}), view(inv.data(), {rows}), affine ? &g32 : nullptr,
                                          view(gx.data(), {rows, cols}), nullptr, nullptr);
        cpu_backend().layer_norm_backward(view(xd.data(), {rows, cols}), view(gyd.data(), {rows, cols}), rows, cols,
                                          view(meand.data(), {rows}), view(invd.data(), {rows}),
                                          affine ? &g64 : nullptr, view(gxd.data(), {rows, cols}), nullptr, nullptr);
        for (size_t i = 0; i < gx.size(); ++i)
          ASSERT_NEAR(gx[i], gxd[i], 2e-5 * (1 + std::abs(gxd[i]))) << isa_name(isa) << " gx, cols " << cols << " at " << i;
      }
    }
  }
}
