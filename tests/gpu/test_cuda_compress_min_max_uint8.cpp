// 8-bit min/max block compression (Backend::compress_min_max_uint8, Bagua's MinMaxUInt8) on CUDA
// against the CPU reference: the same packed bytes (headers and codes) and the same decoded
// float bits, on random data of several scales with block sizes around a warp and the kernel's
// 256 threads, more blocks than the kernel's grid, blocks holding NaN, +-inf, signed zeros, float32's extremes (a range that
// overflows float32) and subnormals; empty, one-element and odd-length inputs; a packed form
// decoded on the other device; and the tensor front end (bagua::compress_min_max_uint8) keeping a
// CUDA tensor's work on the device, with its typed errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <random>
#include <vector>

#include "base/error.h"
#include "cuda_family_test_util.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "kernels/min_max_uint8_layout.h"

namespace tandem::testing {
namespace {

Tensor compress_on(Device device, const Tensor& host_values, int64_t block) {
  const Tensor x = host_values.to(device);
  Tensor packed = Tensor::empty({min_max_uint8_bytes(x.numel(), block)}, DType::UInt8, device);
  backend_for(device).compress_min_max_uint8(x.view_desc(), block, packed.view_desc());
  return packed;
}

Tensor decompress_on(Device device, const Tensor& packed, int64_t n, int64_t block) {
  const Tensor codes = packed.to(device);
  Tensor out = Tensor::empty({n}, DType::Float32, device);
  backend_for(device).decompress_min_max_uint8(codes.view_desc(), block, out.view_desc());
  return out;
}

// Both devices compress and decompress `values`; bytes and decoded bits must agree, and each
// device must decode the other's packed form to the same bits.
void expect_twins_agree(const std::vector<float>& values, int64_t block, const std::string& what) {
  const int64_t n = int64_t(values.size());
  const Tensor host = Tensor::from_vector(values, {n});
  const Tensor gpu_packed = compress_on(kGpu, host, block), cpu_packed = compress_on(Device::cpu(), host, block);
  ASSERT_EQ(gpu_packed.to_vector<uint8_t>(), cpu_packed.to_vector<uint8_t>()) << what << ": packed bytes differ";
  const Tensor cpu_decoded = decompress_on(Device::cpu(), cpu_packed, n, block);
  expect_bit_identical<float>(decompress_on(kGpu, gpu_packed, n, block), cpu_decoded, what + ": decoded on the GPU");
  expect_bit_identical<float>(decompress_on(kGpu, cpu_packed, n, block), cpu_decoded,
                              what + ": CPU codes decoded on the GPU");
}

TEST(CudaCompress, RandomDataGivesTheCpusBytesAndDecodedBits) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (int64_t n : {1, 2, 7, 33, 257, 1000, 4099}) {
    for (int64_t block : {1, 2, 7, 32, 33, 256, 257, 1024, 5000}) {
      if (n * 32 / block > 20000) continue;  // keeps the emulated run short: at most ~20k CUDA threads
      for (double scale : {1e-3, 1.0, 3e4}) {
        std::normal_distribution<float> normal(float(0.25 * scale), float(scale));
        std::vector<float> values(static_cast<size_t>(n));
        for (float& v : values) v = normal(rng);
        expect_twins_agree(values, block, "n=" + std::to_string(n) + " block=" + std::to_string(block) +
                                              " scale=" + std::to_string(scale));
      }
    }
  }
}

// The compressor's grid stops at 132 x 16 blocks; more compression blocks than that are taken
// by a grid-stride loop (the same CUDA block compresses several).
TEST(CudaCompress, MoreCompressionBlocksThanTheGrid) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t block = 3, n = 132 * 16 * block + 7;  // 2115 blocks, the last of one element
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  expect_twins_agree(values, block, "2115 blocks of 3");
}

TEST(CudaCompress, SpecialValuesAreHandledAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t block : {5, 64, 300}) {
    const int64_t n = 4 * block + 3;  // four full blocks and a short one
    for (float special : {nan, inf, -inf, -nan}) {
      for (int64_t at : {int64_t(0), block / 2, 2 * block - 1, n - 1}) {
        std::vector<float> values(static_cast<size_t>(n));
        for (float& v : values) v = normal(rng);
        values[size_t(at)] = special;
        expect_twins_agree(values, block, "block=" + std::to_string(block) + " special at " + std::to_string(at));
      }
    }
    std::vector<float> edges(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = i / block;
      edges[size_t(i)] = b == 0 ? (i % 2 ? big : -big)           // max - min overflows float32
                       : b == 1 ? float(i % 3) * tiny            // subnormals
                       : b == 2 ? 0.75f                          // a constant block decodes exactly
                       : b == 3 ? (i % 5 == 1 ? -0.0f : 0.0f)    // only signed zeros
                                : normal(rng);
    }
    expect_twins_agree(edges, block, "edges, block=" + std::to_string(block));
  }
}

// The header stores the first of equal extremes in index order, whichever thread held it: the
// kernel's reduction tree must not pick the other zero (pairs in one warp and in two).
TEST(CudaCompress, SignedZerosKeepTheFirstInIndexOrder) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 256;
  for (auto [first, second] : {std::pair<int64_t, int64_t>{3, 5}, {31, 32}, {7, 200}, {40, 255}}) {
    for (bool negative_first : {true, false}) {
      std::vector<float> values(size_t(n), 1.0f);
      values[size_t(first)] = negative_first ? -0.0f : 0.0f;
      values[size_t(second)] = negative_first ? 0.0f : -0.0f;
      const std::string what = "zeros at " + std::to_string(first) + " and " + std::to_string(second);
      const std::vector<uint8_t> bytes = compress_on(kGpu, Tensor::from_vector(values, {n}), n).to_vector<uint8_t>();
      float lo;
      std::memcpy(&lo, bytes.data(), sizeof lo);
      EXPECT_EQ(lo, 0.0f) << what;
      EXPECT_EQ(std::signbit(lo), negative_first) << what;
      expect_twins_agree(values, n, what);
    }
  }
}

// A range of 255 makes each value its own code: halfway values round to the even code (rint,
// like the CPU's nearbyint), so 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 253.5 -> 254.
TEST(CudaCompress, HalfwayCodesRoundToEven) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> values = {0.0f, 255.0f, 0.5f, 1.5f, 2.5f, 253.5f, 254.5f};
  const std::vector<uint8_t> bytes = compress_on(kGpu, Tensor::from_vector(values, {7}), 7).to_vector<uint8_t>();
  ASSERT_EQ(bytes.size(), 8u + 7u);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 8, bytes.end()), (std::vector<uint8_t>{0, 255, 0, 2, 2, 254, 254}));
  expect_twins_agree(values, 7, "halfway codes");
}

TEST(CudaCompress, EmptyAndOneElementInputs) {
  SKIP_WITHOUT_GPU();
  expect_twins_agree({}, 16, "empty");
  expect_twins_agree({-0.625f}, 16, "one element");
  const Tensor packed = compress_on(kGpu, Tensor::from_vector<float>({-0.625f}, {1}), 16);
  EXPECT_EQ(packed.numel(), 9);
  EXPECT_EQ(decompress_on(kGpu, packed, 1, 16).to_vector<float>()[0], -0.625f);
}

TEST(CudaCompress, TensorFormsStayOnTheDeviceAndRefuseBadInput) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const Tensor host = randn_host({3, 7}, rng).to(DType::Float64);  // float64, 2-D, through float32
  const Tensor packed = bagua::compress_min_max_uint8(host.to(kGpu), 4);
  EXPECT_TRUE(packed.device().is_cuda());
  EXPECT_EQ(packed.to_vector<uint8_t>(), bagua::compress_min_max_uint8(host, 4).to_vector<uint8_t>());
  Tensor gpu_out = Tensor::zeros({3, 7}, DType::Float64, kGpu), cpu_out = Tensor::zeros({3, 7}, DType::Float64);
  bagua::decompress_min_max_uint8(packed, gpu_out, 4);
  bagua::decompress_min_max_uint8(packed, cpu_out, 4);  // codes from the GPU decoded on the CPU
  expect_bit_identical<double>(gpu_out, cpu_out, "float64 round trip");
  // A contiguous float32 slice is decoded in place (the path compressed_group_average takes).
  Tensor wide = Tensor::zeros({30}, DType::Float32, kGpu);
  Tensor slice = wide.narrow(0, 5, 21);
  bagua::decompress_min_max_uint8(packed, slice, 4);
  expect_bit_identical<float>(slice, cpu_out.flatten().to(DType::Float32), "decoded into a slice");
  EXPECT_EQ(wide.to_vector<float>()[4], 0.0f);
  EXPECT_EQ(wide.to_vector<float>()[26], 0.0f);

  EXPECT_THROW(bagua::compress_min_max_uint8(Tensor::zeros({3}, DType::Int32, kGpu), 4), DTypeError);
  Tensor wrong = Tensor::zeros({5}, DType::Float32, kGpu);
  EXPECT_THROW(bagua::decompress_min_max_uint8(packed, wrong, 4), ValueError);
  EXPECT_THROW(bagua::compress_min_max_uint8(host.to(kGpu), 0), ValueError);
}

}  // namespace
}  // namespace tandem::testing
