// CUDA casts and copies (CudaBackend::copy_strided, which .to(dtype), .contiguous(), clone and
// copy_ run) against the CPU reference, bit for bit: every ordered pair of the eight dtypes over
// edge-case sources (all 65536 float16 and bfloat16 bit patterns, every rounding tie into both
// half types, NaN payloads, subnormals, integer limits), strided and broadcast layouts,
// same-dtype copies, odd and large sizes, more than 2^31 elements, and empty tensors.
#include <cfloat>
#include <limits>

#include "gpu_test_skip.h"
#include "elementwise_test_util.h"

namespace tandem::testing::elementwise {
namespace {

const DType kAllDTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                            DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double double_from_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Floats at, just below and just above the midpoint of every pair of neighbouring finite
// values of a half type (both signs): the round-to-nearest-even ties and their neighbours.
void push_half_ties(std::vector<float>& v, float (*to_float)(uint16_t), uint16_t inf_bits) {
  for (uint32_t h = 0; h + 1 <= inf_bits; ++h) {
    const float lo = to_float(uint16_t(h)), hi = to_float(uint16_t(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: the half types have at most 11 significant bits
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      v.push_back(m);
      v.push_back(-m);
    }
  }
}

// Source values for casts from `dtype` (a 1-D CPU tensor).
Tensor cast_sources(DType dtype) {
  std::mt19937 rng(1234);
  switch (dtype) {
    case DType::Float16:
    case DType::BFloat16: {  // every bit pattern
      std::vector<uint16_t> bits(65536);
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i);
      return from_bytes(bits.data(), dtype, {65536});
    }
    case DType::Float32: {
      std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 2.5f, -2.5f, 65504.0f, 65519.0f, 65520.0f,
                              65536.0f, 1e10f, -1e10f, 2147483520.0f, 2147483648.0f, -2147483648.0f, 3e38f,
                              FLT_MAX, -FLT_MAX, FLT_MIN, INFINITY, -INFINITY, 255.0f, 256.0f, -129.5f,
                              300.7f, -300.7f, 5.96e-8f, 2.98e-8f, 1e-40f, -1e-45f};
      for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fc12345u, 0xff812345u, 0x00000001u,
                            0x007fffffu, 0x80400000u, 0x33000000u, 0x33000001u, 0x387fe000u, 0x477ff000u})
        v.push_back(float_from_bits(bits));
      push_half_ties(v, half_to_float, 0x7c00);
      push_half_ties(v, bf16_to_float, 0x7f80);
      std::normal_distribution<float> normal(0.0f, 100.0f);
      for (int i = 0; i < 50000; ++i) v.push_back(float_from_bits(uint32_t(rng())));
      for (int i = 0; i < 50000; ++i) v.push_back(normal(rng));
      for (int i = -1200; i <= 1200; ++i) v.push_back(float(i) * 0.25f);
      return Tensor::from_vector(v, {int64_t(v.size())});
    }
    case DType::Float64: {
      std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 2.5, 1e300, -1e300, DBL_MAX, 4.9e-324, 3.4028235677973366e38,
                               INFINITY, -INFINITY, 9223372036854775808.0, -9223372036854775808.0, 9.2e18,
                               9007199254740994.0, 2147483647.9, -2147483648.9, 2147483648.0, -2147483649.0,
                               255.9, 256.0, -1.5, 1e-30};
      for (uint64_t bits : {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                            0x7ff8deadbeef1234ull, 0xfff0000000000abcull})
        v.push_back(double_from_bits(bits));
      // Double rounding: just off a float16 midpoint the double rounds to the midpoint in float
      // first (as the CPU's store_double does), then ties to even.
      std::vector<float> ties;
      push_half_ties(ties, half_to_float, 0x7c00);
      for (size_t i = 0; i < ties.size(); i += 3) {
        const double m = ties[i];
        v.push_back(m * (1 + 0x1p-40));
        v.push_back(m * (1 - 0x1p-40));
      }
      // Midpoints between neighbouring floats and values just off them.
      std::normal_distribution<float> normal(0.0f, 1000.0f);
      for (int i = 0; i < 20000; ++i) {
        const float f = normal(rng);
        const double mid = (double(f) + double(std::nextafter(f, INFINITY))) / 2;
        v.push_back(mid);
        v.push_back(std::nextafter(mid, 0.0));
      }
      for (int i = 0; i < 50000; ++i) v.push_back(double_from_bits((uint64_t(rng()) << 32) | rng()));
      std::normal_distribution<double> wide(0.0, 1e6);
      for (int i = 0; i < 50000; ++i) v.push_back(wide(rng));
      return Tensor::from_vector(v, {int64_t(v.size())});
    }
    case DType::Int32: {
      std::vector<int32_t> v = {0, 1, -1, INT32_MAX, INT32_MIN, 16777217, -16777217, 255, 256, -129, 300, -300};
      for (int i = 0; i < 20000; ++i) v.push_back(int32_t(rng()));
      for (int i = 0; i < 2000; ++i) v.push_back(int32_t(rng() % 601) - 300);
      return Tensor::from_vector(v, {int64_t(v.size())});
    }
    case DType::Int64: {
      std::vector<int64_t> v = {0,           1,           -1,           INT64_MAX,           INT64_MIN,
                                (1ll << 53) + 1, -(1ll << 53) - 1, 1ll << 31, (1ll << 31) - 1, -(1ll << 31) - 1,
                                (1ll << 32) + 5, -(1ll << 40) - 3, 300,       -300,                INT64_MAX - 1023};
      for (int i = 0; i < 20000; ++i) v.push_back(int64_t((uint64_t(rng()) << 32) | rng()));
      for (int i = 0; i < 2000; ++i) v.push_back(int64_t(rng() % 601) - 300);
      return Tensor::from_vector(v, {int64_t(v.size())});
    }
    case DType::UInt8: {
      std::vector<uint8_t> v(256);
      for (int i = 0; i < 256; ++i) v[size_t(i)] = uint8_t(i);
      return Tensor::from_vector(v, {256});
    }
    case DType::Bool: {
      std::vector<bool> v;
      for (int i = 0; i < 97; ++i) v.push_back(i % 3 == 1);
      return Tensor::from_vector(v, {97});
    }
  }
  return Tensor();
}

// Whether the CPU reference's conversion of each source element to `to` is defined C++: a
// float-to-integer conversion of NaN or of a value outside the (int32 or int64) range is not.
std::vector<bool> defined_elements(const Tensor& src, DType to) {
  std::vector<bool> ok(size_t(src.numel()), true);
  const bool to_int = to == DType::Int32 || to == DType::Int64 || to == DType::UInt8;
  if (!to_int || (src.dtype() == DType::Int64 && to == DType::Int32)) return ok;
  const std::vector<double> v = src.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i)
    ok[i] = to == DType::Int32 ? (v[i] > -2147483649.0 && v[i] < 2147483648.0)
                               : (v[i] >= -9223372036854775808.0 && v[i] < 9223372036854775808.0);
  return ok;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = n; i-- > 0;) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

// Compares two tensors of one dtype byte for byte, element by element, where `check` allows;
// reports the first few differences with the source value.
void expect_same_bytes(const Tensor& expected, const Tensor& got, const Tensor& src, const std::vector<bool>& check,
                       const std::string& what) {
  ASSERT_EQ(expected.shape(), got.shape()) << what;
  ASSERT_EQ(expected.dtype(), got.dtype()) << what;
  const std::vector<uint8_t> e = bytes_of(expected), g = bytes_of(got);
  const size_t w = dtype_size(expected.dtype());
  std::vector<double> source;
  int reported = 0;
  int64_t mismatches = 0;
  for (size_t i = 0; i * w < e.size(); ++i) {
    if (!check.empty() && !check[i]) continue;
    if (std::memcmp(&e[i * w], &g[i * w], w) == 0) continue;
    ++mismatches;
    if (reported++ < 5) {
      if (source.empty()) source = src.to_vector<double>();
      ADD_FAILURE() << what << ": element " << i << " (source " << source[i] << ") expected "
                    << hex(&e[i * w], w) << ", got " << hex(&g[i * w], w);
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST(CudaElementwiseCast, EveryDtypePairMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (DType from : kAllDTypes) {
    const Tensor src = cast_sources(from);
    const Tensor dev = src.to(gpu());
    for (DType to : kAllDTypes) {
      if (to == from) continue;
      const std::string what = std::string(dtype_name(from)) + " -> " + dtype_name(to);
      expect_same_bytes(src.to(to), dev.to(to), src, defined_elements(src, to), what);
    }
  }
}

#if defined(__x86_64__)
// NaN and out-of-range floats converted to integers are undefined in C++; the CPU reference
// compiles to cvttsd2si, which returns the integer minimum, and the CUDA kernels reproduce it.
TEST(CudaElementwiseCast, OutOfRangeFloatsToIntegersGiveWhatTheX86ReferenceGives) {
  SKIP_WITHOUT_GPU();
  for (DType from : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor src = cast_sources(from);
    const Tensor dev = src.to(gpu());
    for (DType to : {DType::Int32, DType::Int64, DType::UInt8})
      expect_same_bytes(src.to(to), dev.to(to), src, {}, std::string(dtype_name(from)) + " -> " + dtype_name(to));
  }
}
#endif

TEST(CudaElementwiseCast, StridedSourcesAndDestinationsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (Shape shape : {Shape{37, 61}, Shape{16, 64}, Shape{3, 5, 8}}) {
    const Tensor values = random_values(shape, rng, false, 300.0);
    for (Layout layout : {Layout::Transposed, Layout::Strided, Layout::Misaligned}) {
      const LaidOut x = lay_out(values, layout, gpu());
      for (DType to : kAllDTypes) {
        const std::string what = std::string("float32 -> ") + dtype_name(to) + ", " + layout_name(layout) + " " +
                                 values.shape_str();
        expect_same_bytes(x.cpu.to(to), x.dev.to(to), x.cpu, defined_elements(x.cpu, to), what);
      }
    }
  }
  // Casting into strided destinations, the source broadcast over rows or columns; the
  // destination's skipped elements must stay untouched.
  for (DType to : {DType::BFloat16, DType::Float16, DType::Float64, DType::Int32}) {
    const Tensor row = random_values({61}, rng, false, 100.0), column = random_values({37, 1}, rng, false, 100.0);
    for (const Tensor& src : {row, column}) {
      Tensor base_cpu = Tensor::zeros({37, 122}, to), base_dev = Tensor::zeros({37, 122}, to, gpu());
      base_cpu.slice(1, 0, 122, 2).copy_(src);
      base_dev.slice(1, 0, 122, 2).copy_(src.to(gpu()));
      expect_same_bytes(base_cpu, base_dev, base_cpu, {}, std::string("broadcast copy_ into strided ") + dtype_name(to));
    }
  }
}

TEST(CudaElementwiseCast, SameDtypeCopiesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (DType dt : kAllDTypes) {
    const Tensor values = random_values({129, 67}, rng, false, 50.0).to(dt);
    const Tensor dev = values.to(gpu());
    const std::string name = dtype_name(dt);
    expect_same_bytes(values.t().contiguous(), dev.t().contiguous(), values, {}, name + " transposed contiguous()");
    expect_same_bytes(values.clone(), dev.clone(), values, {}, name + " clone");
    expect_same_bytes(values.slice(1, 1, 67, 3).contiguous(), dev.slice(1, 1, 67, 3).contiguous(), values, {},
                      name + " stepped slice");
    const Tensor row = values.select(0, 5);  // [67] broadcast over 40 rows
    Tensor out_cpu = Tensor::empty({40, 67}, dt), out_dev = Tensor::empty({40, 67}, dt, gpu());
    out_cpu.copy_(row);
    out_dev.copy_(row.to(gpu()));
    expect_same_bytes(out_cpu, out_dev, out_cpu, {}, name + " broadcast row copy_");
    const Tensor col = values.narrow(1, 2, 1);  // [129, 1] broadcast over 64 columns (vector path)
    Tensor wide_cpu = Tensor::empty({129, 64}, dt), wide_dev = Tensor::empty({129, 64}, dt, gpu());
    wide_cpu.copy_(col);
    wide_dev.copy_(col.to(gpu()));
    expect_same_bytes(wide_cpu, wide_dev, wide_cpu, {}, name + " broadcast column copy_");
  }
}

TEST(CudaElementwiseCast, OddAndLargeSizes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (int64_t n : {1, 2, 3, 5, 7, 9, 15, 17, 31, 33, 1000, 1023, (1 << 20) + 7}) {
    const Tensor values = random_values({n}, rng, false, 1000.0);
    for (Layout layout : {Layout::Contiguous, Layout::Misaligned}) {
      const LaidOut x = lay_out(values, layout, gpu());
      for (DType to : {DType::BFloat16, DType::Float16, DType::Float64, DType::Int64, DType::UInt8, DType::Bool}) {
        const std::string what = std::string("float32 -> ") + dtype_name(to) + " n=" + std::to_string(n) + " " +
                                 layout_name(layout);
        expect_same_bytes(x.cpu.to(to), x.dev.to(to), x.cpu, defined_elements(x.cpu, to), what);
        // and back, from the half/other type to float32
        const Tensor back = x.cpu.to(to);
        expect_same_bytes(back.to(DType::Float32), back.to(gpu()).to(DType::Float32), back, {},
                          what + " and back to float32");
      }
    }
  }
  // More than 65535 rows, transposed.
  const Tensor tall = random_values({3, 70001}, rng);
  expect_same_bytes(tall.t().to(DType::BFloat16), tall.to(gpu()).t().to(DType::BFloat16), tall, {},
                    "[70001, 3] transposed -> bfloat16");
  expect_same_bytes(tall.t().contiguous(), tall.to(gpu()).t().contiguous(), tall, {}, "[70001, 3] transposed copy");
}

TEST(CudaElementwiseCast, EmptyTensors) {
  SKIP_WITHOUT_GPU();
  for (Shape shape : {Shape{0}, Shape{3, 0}, Shape{0, 5}}) {
    const Tensor dev = Tensor::zeros(shape, DType::Float32, gpu());
    for (DType to : kAllDTypes) {
      Tensor y = dev.to(to);
      EXPECT_EQ(y.shape(), shape);
      EXPECT_EQ(y.dtype(), to);
      EXPECT_EQ(y.numel(), 0);
    }
    EXPECT_EQ(dev.clone().shape(), shape);
    if (shape.size() == 2) {
      EXPECT_EQ(dev.t().contiguous().numel(), 0);
    }
    Tensor out = Tensor::empty(shape, DType::BFloat16, gpu());
    out.copy_(dev);
    EXPECT_EQ(bytes_of(out).size(), 0u);
  }
}

// Maps of 2^31 or more elements are cut into launches of fewer (32-bit index math). Needs
// about 7 GB of device memory; skipped on smaller devices.
TEST(CudaElementwiseCast, MoreThan2To31ElementsRunInChunks) {
  SKIP_WITHOUT_REAL_GPU("2^31 + 48 elements (8 GiB) take the emulator minutes");
  if (cuda::query_device_memory(0).free_bytes < (size_t(8) << 30)) GTEST_SKIP() << "needs 8 GB of free device memory";
  const int64_t cols = (int64_t(1) << 30) + 24, n = 2 * cols;  // 2^31 + 48 elements
  auto pattern = [](int64_t i) { return uint8_t((i * 7 + (i >> 20)) % 251); };
  std::vector<uint8_t> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[size_t(i)] = pattern(i);
  const Tensor x = Tensor::from_vector(host, {2, cols}, gpu());
  {
    // Transposed copy: two merged dims, the outer one cut into row runs.
    const std::vector<uint8_t> y = x.t().contiguous().to_vector<uint8_t>();
    ASSERT_EQ(int64_t(y.size()), n);
    int64_t bad = 0;
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < 2; ++j) bad += y[size_t(2 * i + j)] != pattern(j * cols + i);
    EXPECT_EQ(bad, 0);
  }
  {
    // Contiguous cast: one merged dim cut into runs of a multiple of 16 elements.
    const std::vector<uint8_t> b = bytes_of(x.to(DType::Bool));
    ASSERT_EQ(int64_t(b.size()), n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += b[size_t(i)] != uint8_t(pattern(i) != 0);
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace tandem::testing::elementwise
