// CUDA Philox random fills, dropout and embedding against the CPU reference: the random
// streams are bit-identical for float32 and float64 at any (seed, offset), for sizes that are
// not multiples of the Philox block of 4 and for unaligned views; the embedding backward sums
// repeated indices in the CPU's order, so its float32 result is bit-identical too.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_family_test_util.h"
#include "tensor/generator.h"

namespace tandem::testing {
namespace {

Tensor random_fill_on(Device device, int64_t n, DType dtype, uint64_t seed, uint64_t offset, bool normal, double a,
                      double b) {
  Tensor t = Tensor::empty({n}, dtype, device);
  backend_for(device).random_fill(t.view_desc(), seed, offset, normal, a, b);
  return t;
}

const std::vector<int64_t> kSizes = {1, 2, 3, 5, 6, 1001, 4099, (int64_t(1) << 20) + 3};
const std::vector<uint64_t> kSeeds = {0, 0xDEADBEEFCAFEF00Dull};
// The last offset needs the high word of the 64-bit Philox counter.
const std::vector<uint64_t> kOffsets = {0, 7, (uint64_t(1) << 32) - 2};

TEST(CudaRandom, UniformAndNormalAreBitIdenticalToTheCpu) {
  SKIP_WITHOUT_GPU();
  for (int64_t n : kSizes)
    for (uint64_t seed : kSeeds)
      for (uint64_t offset : kOffsets)
        for (bool normal : {false, true}) {
          const std::string what = std::string(normal ? "normal" : "uniform") + " n=" + std::to_string(n) +
                                   " seed=" + std::to_string(seed) + " offset=" + std::to_string(offset);
          expect_bit_identical<float>(random_fill_on(kGpu, n, DType::Float32, seed, offset, normal, 0, 1),
                                      random_fill_on(Device::cpu(), n, DType::Float32, seed, offset, normal, 0, 1),
                                      "float32 " + what);
          if (n <= 4099)
            expect_bit_identical<double>(random_fill_on(kGpu, n, DType::Float64, seed, offset, normal, 0, 1),
                                         random_fill_on(Device::cpu(), n, DType::Float64, seed, offset, normal, 0, 1),
                                         "float64 " + what);
        }
}

// Other ranges: a + (b - a) u and a + b z are one fused multiply-add on the GPU; the CPU's
// float64 expression may or may not be fused by the host compiler, so allow one float ulp.
TEST(CudaRandom, ShiftedAndScaledDrawsAgreeToOneUlp) {
  SKIP_WITHOUT_GPU();
  for (bool normal : {false, true}) {
    const double a = normal ? 1.5 : -2.0, b = normal ? 0.25 : 3.0;
    Tensor g = random_fill_on(kGpu, 10007, DType::Float32, 99, 3, normal, a, b);
    Tensor c = random_fill_on(Device::cpu(), 10007, DType::Float32, 99, 3, normal, a, b);
    expect_close(g, c, 0, 1.2e-7, normal ? "normal(1.5, 0.25)" : "uniform[-2, 3)");
  }
}

// Half types: the float32 draw rounded once (what the CPU's float32 draw cast to dt gives).
TEST(CudaRandom, HalfTypesAreTheFloat32DrawRounded) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (bool normal : {false, true}) {
      Tensor g = random_fill_on(kGpu, 4099, dt, 5, 11, normal, 0, 1);
      Tensor c = random_fill_on(Device::cpu(), 4099, DType::Float32, 5, 11, normal, 0, 1).to(dt);
      expect_close(g, c, 0, 0, std::string(dtype_name(dt)) + (normal ? " normal" : " uniform"));
    }
}

TEST(CudaRandom, PublicRandnAndRandFollowTheGenerator) {
  SKIP_WITHOUT_GPU();
  manual_seed(2024);
  Tensor::rand({9});
  Tensor g = Tensor::randn({1001}, DType::Float32, kGpu);
  Tensor gu = Tensor::rand({13}, DType::Float64, kGpu);
  manual_seed(2024);
  Tensor::rand({9});
  Tensor c = Tensor::randn({1001});
  Tensor cu = Tensor::rand({13}, DType::Float64);
  expect_bit_identical<float>(g, c, "randn");
  expect_bit_identical<double>(gu, cu, "rand float64");
  EXPECT_EQ(Tensor::empty({0}, DType::Float32, kGpu).numel(), 0);
  Tensor none = random_fill_on(kGpu, 0, DType::Float32, 1, 0, true, 0, 1);  // launches nothing
  EXPECT_EQ(none.numel(), 0);
}

void dropout_on(Device device, const Tensor& x, double p, uint64_t seed, uint64_t offset, Tensor& y, Tensor& mask) {
  y = Tensor::empty(x.shape(), x.dtype(), device);
  mask = Tensor::empty(x.shape(), DType::UInt8, device);
  backend_for(device).dropout(x.view_desc(), p, seed, offset, y.view_desc(), mask.view_desc());
}

TEST(CudaRandom, DropoutMasksAndValuesAreBitIdenticalToTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  for (int64_t n : kSizes)
    for (double p : {0.0, 0.35, 0.9})
      for (uint64_t offset : kOffsets) {
        const std::string what = "n=" + std::to_string(n) + " p=" + std::to_string(p) + " offset=" +
                                 std::to_string(offset);
        Tensor x = randn_host({n}, rng);
        Tensor yg, mg, yc, mc;
        dropout_on(kGpu, x.to(kGpu), p, 0xDEADBEEFCAFEF00Dull, offset, yg, mg);
        dropout_on(Device::cpu(), x, p, 0xDEADBEEFCAFEF00Dull, offset, yc, mc);
        expect_bit_identical<uint8_t>(mg, mc, "mask " + what);
        expect_bit_identical<float>(yg, yc, "y " + what);
        if (n <= 4099) {
          Tensor x64 = x.to(DType::Float64);
          dropout_on(kGpu, x64.to(kGpu), p, 77, offset, yg, mg);
          dropout_on(Device::cpu(), x64, p, 77, offset, yc, mc);
          expect_bit_identical<uint8_t>(mg, mc, "float64 mask " + what);
          expect_bit_identical<double>(yg, yc, "float64 y " + what);
        }
      }
}

TEST(CudaRandom, DropoutOnUnalignedViewsAndHalfTypes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(32);
  const int64_t n = 4099;
  Tensor big = randn_host({n + 1}, rng);
  Tensor view = big.to(kGpu).narrow(0, 1, n);  // 4 bytes past the allocation's alignment
  Tensor yg, mg, yc, mc;
  dropout_on(kGpu, view, 0.5, 3, 9, yg, mg);
  dropout_on(Device::cpu(), big.narrow(0, 1, n).contiguous(), 0.5, 3, 9, yc, mc);
  expect_bit_identical<uint8_t>(mg, mc, "mask, unaligned x");
  expect_bit_identical<float>(yg, yc, "y, unaligned x");
  // Half types: the same mask; y = x * (1 / (1 - p)) in float32, rounded once.
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = big.narrow(0, 0, n).contiguous();
    dropout_on(kGpu, x.to(dt).to(kGpu), 0.25, 3, 9, yg, mg);
    dropout_on(Device::cpu(), rounded_to(x, dt), 0.25, 3, 9, yc, mc);
    expect_bit_identical<uint8_t>(mg, mc, std::string(dtype_name(dt)) + " mask");
    expect_close(yg, yc.to(dt), 0, 0, std::string(dtype_name(dt)) + " y");
  }
}

// ---------------------------------------------------------------- embedding
Tensor random_indices(int64_t n, int64_t num_rows, std::mt19937& rng, bool skewed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> any(0, num_rows - 1), few(0, std::min<int64_t>(num_rows, 50) - 1);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = skewed ? (i % 3 == 0 ? 7 : few(rng)) : any(rng);
  return Tensor::from_vector(idx, {n});
}

TEST(CudaEmbedding, ForwardCopiesRowsForEveryRowWidthAndDtype) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  struct Case { int64_t rows, dim; DType dtype; };
  for (Case cs : {Case{1000, 37, DType::Float32}, Case{1000, 64, DType::Float32}, Case{300, 3, DType::Float16},
                  Case{300, 5, DType::Float64}, Case{10, 1, DType::BFloat16}}) {
    Tensor w = randn_host({cs.rows, cs.dim}, rng).to(cs.dtype);
    Tensor idx = random_indices(5003, cs.rows, rng, false);
    Tensor yg = Tensor::empty({5003, cs.dim}, cs.dtype, kGpu), yc = Tensor::empty({5003, cs.dim}, cs.dtype);
    Tensor wg = w.to(kGpu), ig = idx.to(kGpu);
    gpu_backend().embedding(wg.view_desc(), ig.view_desc(), yg.view_desc());
    cpu_backend().embedding(w.view_desc(), idx.view_desc(), yc.view_desc());
    expect_close(yg, yc, 0, 0, std::string("embedding ") + dtype_name(cs.dtype) + " dim " + std::to_string(cs.dim));
  }
}

Tensor embedding_backward_on(Device device, const Tensor& gy, const Tensor& idx, int64_t rows) {
  Tensor gw = Tensor::empty({rows, gy.size(1)}, gy.dtype(), device);
  Tensor gyd = gy.to(device), id = idx.to(device);
  backend_for(device).embedding_backward(gyd.view_desc(), id.view_desc(), gw.view_desc());
  return gw;
}

// Repeated indices (a third of all positions name row 7): float32 and float64 sums equal the
// CPU's bit for bit, because each row adds its occurrences in increasing position order from
// 0, as the CPU does. Rows no index names are zero.
TEST(CudaEmbedding, BackwardSumsRepeatedIndicesInTheCpusOrder) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  struct Case { int64_t n, rows, dim; bool skewed; };
  for (Case cs : {Case{20000, 1000, 37, true}, Case{3001, 70000, 8, false}, Case{2000, 100, 300, true},
                  Case{1, 5, 4, false}}) {
    const std::string what = "n=" + std::to_string(cs.n) + " rows=" + std::to_string(cs.rows) + " dim=" +
                             std::to_string(cs.dim);
    Tensor idx = random_indices(cs.n, cs.rows, rng, cs.skewed);
    Tensor gy = randn_host({cs.n, cs.dim}, rng);
    expect_bit_identical<float>(embedding_backward_on(kGpu, gy, idx, cs.rows),
                                embedding_backward_on(Device::cpu(), gy, idx, cs.rows), "float32 " + what);
    Tensor gy64 = gy.to(DType::Float64);
    expect_bit_identical<double>(embedding_backward_on(kGpu, gy64, idx, cs.rows),
                                 embedding_backward_on(Device::cpu(), gy64, idx, cs.rows), "float64 " + what);
    // Half types accumulate in float32 in the same order and round once: the CPU's float32
    // sum of the rounded inputs, rounded.
    for (DType dt : {DType::Float16, DType::BFloat16})
      expect_close(embedding_backward_on(kGpu, gy.to(dt), idx, cs.rows),
                   embedding_backward_on(Device::cpu(), rounded_to(gy, dt), idx, cs.rows).to(dt), 0, 0,
                   std::string(dtype_name(dt)) + " " + what);
  }
  // No indices: the gradient is all zeros.
  Tensor gw = embedding_backward_on(kGpu, Tensor::zeros({0, 6}), Tensor::zeros({0}, DType::Int64), 4);
  for (double v : host_values(gw)) EXPECT_EQ(v, 0.0);
}

}  // namespace
}  // namespace tandem::testing
