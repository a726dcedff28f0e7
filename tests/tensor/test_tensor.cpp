// Tensor basics: dtypes and half conversions, Philox known answers, views without copies,
// device handling, factories.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/philox.h"
#include "kernels/backend.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

namespace tandem {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
  EXPECT_STREQ(dtype_name(DType::Float16), "float16");
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BFloat16);
  EXPECT_THROW(parse_dtype("float8"), ConfigError);
}

TEST(DType, HalfConversionsKnownBitPatterns) {
  // IEEE binary16 reference values.
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);   // largest finite half
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);   // rounds to inf
  EXPECT_EQ(float_to_half(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);       // tie rounds to even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);       // tie rounds to even (up)
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.33325195f);
  EXPECT_FLOAT_EQ(half_to_float(0x0001), 5.960464477539063e-08f);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  // bfloat16 keeps float32's exponent: 1/3 -> 0x3eab (round to nearest even).
  EXPECT_EQ(float_to_bf16(1.0f / 3.0f), 0x3eab);
  EXPECT_FLOAT_EQ(bf16_to_float(0x3f80), 1.0f);
  for (float f : {0.1f, -3.5f, 1e-3f, 12345.0f})
    EXPECT_NEAR(half_to_float(float_to_half(f)), f, std::abs(f) * 1e-3);
}

TEST(DType, CastsThroughTensors) {
  Tensor x = Tensor::from_vector<float>({1.5f, -2.25f, 3.0f, 0.1f}, {4});
  EXPECT_EQ(x.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 0}));
  EXPECT_EQ(x.to(DType::Float16).to(DType::Float32).to_vector<float>()[1], -2.25f);
  EXPECT_EQ(x.to(DType::BFloat16).dtype(), DType::BFloat16);
  EXPECT_EQ(x.to(DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(Tensor::from_vector<int64_t>({5000000000LL}, {1}).to(DType::Int64).to_vector<int64_t>()[0], 5000000000LL);
}

TEST(DType, EveryDtypeCastsToEveryOther) {
  // Values every dtype holds exactly (bool keeps only "nonzero").
  const std::vector<double> v = {0, 1, 2, 5, 100, 0};
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                  DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};
  for (DType from : all) {
    Tensor src = Tensor::from_vector(v, {2, 3}).to(from);
    ASSERT_EQ(src.dtype(), from);
    for (DType to : all) {
      Tensor dst = src.to(to);
      ASSERT_EQ(dst.dtype(), to);
      ASSERT_EQ(dst.shape(), (Shape{2, 3}));
      const bool either_bool = from == DType::Bool || to == DType::Bool;
      std::vector<double> got = dst.to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i)
        EXPECT_EQ(got[i], either_bool ? double(v[i] != 0) : v[i])
            << dtype_name(from) << " -> " << dtype_name(to) << " element " << i;
    }
  }
  // A strided (transposed) source casts element by element, in its logical order.
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).t().to(DType::BFloat16);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  // Floats to integers truncate toward zero, as PyTorch's casts.
  EXPECT_EQ(Tensor::from_vector<float>({-1.5f, 2.7f}, {2}).to(DType::Int32).to_vector<int32_t>(),
            (std::vector<int32_t>{-1, 2}));
}

TEST(Philox, KnownAnswerVectors) {
  // Philox4x32-10 known-answer tests published with Random123.
  philox::U32x4 zero = philox::philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  philox::U32x4 ones = philox::philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  philox::U32x4 pi = philox::philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(Philox, TensorsAreACounterFunctionOfSeedAndOffset) {
  manual_seed(42);
  Tensor a = Tensor::rand({10});
  Tensor b = Tensor::rand({6});
  EXPECT_EQ(default_generator().offset, 3u + 2u);  // ceil(10/4) + ceil(6/4) blocks
  manual_seed(42);
  Tensor whole = Tensor::rand({10});
  EXPECT_EQ(a.to_vector<float>(), whole.to_vector<float>());
  // The second draw starts at block ceil(10/4) = 3: element i is bits(seed, 3, i).
  auto vb = b.to_vector<float>();
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(vb[i], philox::uniform01(philox::bits(42, 3, i)));
}

TEST(Philox, RandnAndDropoutMasksAreTheCounterFunctionAtTheGeneratorOffset) {
  // What lets the CUDA backend (and any world size) reproduce the CPU's draws: each element is
  // a pure function of (seed, offset of the draw, element index).
  manual_seed(1234);
  Tensor::rand({9});  // advances the stream by ceil(9/4) = 3 blocks
  ASSERT_EQ(default_generator().offset, 3u);
  auto normal = Tensor::randn({7}).to_vector<float>();
  for (uint64_t i = 0; i < normal.size(); ++i) EXPECT_EQ(normal[i], philox::normal(1234, 3, i)) << i;
  ASSERT_EQ(default_generator().offset, 5u);
  const double p = 0.35;
  Tensor x = Tensor::ones({3, 5}, DType::Float64);
  auto y = dropout(x, p, true).to_vector<double>();
  ASSERT_EQ(default_generator().offset, 9u);  // 15 elements: 4 blocks
  for (uint64_t i = 0; i < y.size(); ++i) {
    const bool keep = philox::uniform01(philox::bits(1234, 5, i)) >= float(p);
    EXPECT_EQ(y[i], keep ? 1.0 / (1.0 - p) : 0.0) << i;
  }
  // float64 draws are the float32 draw widened: the same numbers in either dtype.
  manual_seed(5);
  auto u32 = Tensor::rand({6}).to_vector<float>();
  manual_seed(5);
  auto u64 = Tensor::rand({6}, DType::Float64).to_vector<double>();
  for (size_t i = 0; i < u32.size(); ++i) EXPECT_EQ(double(u32[i]), u64[i]);
}

TEST(Philox, NormalStatistics) {
  manual_seed(7);
  auto v = Tensor::randn({100000}, DType::Float64).to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x / v.size();
  for (double x : v) s += (x - m) * (x - m) / v.size();
  EXPECT_NEAR(m, 0.0, 0.01);  // sd of the mean: 0.0032
  EXPECT_NEAR(s, 1.0, 0.02);
  auto u = Tensor::rand({100000}).to_vector<float>();
  for (float x : u) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
}

TEST(Views, ShareStorageWithoutCopies) {
  Tensor x = Tensor::arange(24, DType::Float32).reshape({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.raw_data(), x.raw_data());
  Tensor n = x.narrow(2, 1, 2);
  EXPECT_EQ(n.offset(), 1);
  EXPECT_EQ(n.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  n.fill_(-1);  // writes through the view
  EXPECT_EQ(x.to_vector<float>()[1], -1.0f);
  EXPECT_EQ(x.to_vector<float>()[3], 3.0f);
  Tensor e = Tensor::from_vector<float>({1, 2, 3}, {3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.contiguous().to_vector<float>()[5], 2.0f);
  auto parts = x.split(2, 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].raw_data(), static_cast<float*>(x.raw_data()) + 2);
  auto chunks = Tensor::arange(7).chunk(3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[2].to_vector<int64_t>(), (std::vector<int64_t>{6}));
  EXPECT_EQ(x.select(1, 2).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.slice(2, 0, 4, 3).shape(), (Shape{2, 3, 2}));  // elements 0 and 3
  EXPECT_EQ(x.view({6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.permute({1, 2, 0}).reshape({12, 2}).shape(), (Shape{12, 2}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_THROW(Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), ShapeError);
}

TEST(Views, SplitAndChunkAlongEveryDimShareStorage) {
  // Data parallelism scatters a batch with split/chunk along any dim: every piece must be a
  // view into the same storage, with the values of the matching slice.
  Tensor x = Tensor::arange(2 * 5 * 3 * 7, DType::Float64).reshape({2, 5, 3, 7});
  const auto all = x.to_vector<double>();
  const Shape st = x.strides();
  for (int d = 0; d < 4; ++d) {
    const int64_t n = x.size(d);
    for (int64_t pieces : {int64_t(1), int64_t(2), int64_t(3), n}) {
      for (bool use_chunk : {false, true}) {
        const int64_t size = (n + pieces - 1) / pieces;
        auto parts = use_chunk ? x.chunk(pieces, d) : x.split(size, d);
        int64_t start = 0;
        for (const Tensor& part : parts) {
          SCOPED_TRACE("dim " + std::to_string(d) + (use_chunk ? " chunk " : " split ") + std::to_string(pieces));
          ASSERT_EQ(part.impl().storage, x.impl().storage);  // no copy
          EXPECT_EQ(part.strides(), st);
          EXPECT_EQ(part.offset(), start * st[size_t(d)]);
          EXPECT_EQ(part.size(d), std::min(size, n - start));
          // Values: element (i0, i1, i2, i3) of the piece is element start + i_d along d of x.
          auto got = part.contiguous().to_vector<double>();
          size_t k = 0;
          for (int64_t i0 = 0; i0 < part.size(0); ++i0)
            for (int64_t i1 = 0; i1 < part.size(1); ++i1)
              for (int64_t i2 = 0; i2 < part.size(2); ++i2)
                for (int64_t i3 = 0; i3 < part.size(3); ++i3) {
                  int64_t idx[4] = {i0, i1, i2, i3};
                  idx[d] += start;
                  const int64_t flat = idx[0] * st[0] + idx[1] * st[1] + idx[2] * st[2] + idx[3] * st[3];
                  ASSERT_EQ(got[k++], all[size_t(flat)]);
                }
          start += part.size(d);
        }
        EXPECT_EQ(start, n);
      }
    }
  }
  // Writes through a piece land in the whole.
  x.chunk(3, 1)[2].fill_(-1.0);
  EXPECT_EQ(x.select(1, 4).contiguous().to_vector<double>(), std::vector<double>(2 * 3 * 7, -1.0));
  EXPECT_EQ(x.select(1, 3).contiguous().to_vector<double>()[0], all[size_t(3 * st[1])]);
}

TEST(Views, GradientsOfSplitPiecesLandInTheirSlices) {
  Tensor x = Tensor::zeros({4, 6}, DType::Float64).requires_grad_();
  auto cols = x.chunk(3, 1);  // three [4, 2] views
  (sum(cols[0]) + sum(cols[2] * 3.0)).backward();
  auto g = x.grad().to_vector<double>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(g[size_t(r * 6 + c)], c < 2 ? 1.0 : c < 4 ? 0.0 : 3.0) << r << "," << c;
}

TEST(Views, NoViewHasMoreThanEightDims) {
  Tensor x = Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 2});
  EXPECT_THROW(x.unsqueeze(0), ShapeError);
  EXPECT_THROW(x.view({1, 1, 1, 1, 1, 1, 1, 1, 2}), ShapeError);
  EXPECT_THROW(x.reshape({1, 1, 1, 1, 1, 1, 1, 2, 1}), ShapeError);
  EXPECT_THROW(x.expand({3, 1, 1, 1, 1, 1, 1, 1, 2}), ShapeError);
  EXPECT_EQ(x.squeeze(0).unsqueeze(0).dim(), 8);
}

TEST(Devices, TypeAsAndMixingErrors) {
  Tensor a = Tensor::ones({2}), b = Tensor::ones({2}, DType::Float64);
  EXPECT_EQ(a.type_as(b).dtype(), DType::Float64);
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cpu").str(), "cpu");
  EXPECT_THROW(Device::parse("gpu:x"), ConfigError);
  EXPECT_EQ(a.to(Device::cpu()).raw_data(), a.raw_data());  // no-op move
  if (!cuda_compiled()) {
    try {
      Tensor::ones({2}, DType::Float32, Device::cuda(0));
      ADD_FAILURE() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos);
    }
  }
}

TEST(Factories, ValuesAndShapes) {
  EXPECT_EQ(Tensor::full({2, 2}, 3.5).to_vector<float>(), (std::vector<float>{3.5, 3.5, 3.5, 3.5}));
  EXPECT_EQ(Tensor::arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::scalar(2.0).dim(), 0);
  EXPECT_DOUBLE_EQ(Tensor::scalar(2.0).item(), 2.0);
  EXPECT_THROW(Tensor::ones({2}).item(), ShapeError);
  EXPECT_THROW(Tensor::from_vector<float>({1, 2}, {3}), ShapeError);
  EXPECT_EQ(Tensor::zeros({0, 3}).numel(), 0);
  EXPECT_EQ(sum(Tensor::zeros({0, 3})).item(), 0.0);
}

}  // namespace
}  // namespace tandem
