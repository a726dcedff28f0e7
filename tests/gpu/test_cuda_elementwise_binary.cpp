// CUDA binary ops (CudaBackend::binary through the public ops) against the CPU reference, for
// every BinaryOp with broadcasting through transposed, strided and misaligned operands, odd
// sizes, more than 65535 rows and more than 2^20 elements:
//   - float16/bfloat16: the GPU computes in float and rounds once, so its result is exactly the
//     CPU's float32 result on the same (widened) inputs rounded to the half type; pow, whose
//     double-precision libraries differ, may be 1 ulp off;
//   - float32/float64: bit for bit (IEEE operations), pow within an ulp;
//   - int32/int64/uint8 (and bool for the ops masks use): bit for bit, wrap-around included;
//     div on integers is a DTypeError as on the CPU.
// Comparisons write Bool; maximum/minimum propagate NaN from either side. where: every dtype
// with broadcast, transposed, strided and misaligned operands, bit for bit.
#include <limits>

#include "gpu_test_skip.h"
#include "elementwise_test_util.h"

namespace tandem::testing::elementwise {
namespace {

const BinaryOp kAllBinaryOps[] = {BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,     BinaryOp::Div, BinaryOp::Pow,
                                  BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Eq, BinaryOp::Ne,  BinaryOp::Lt,
                                  BinaryOp::Le,  BinaryOp::Gt,      BinaryOp::Ge};

const char* op_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  return names[int(op)];
}

Tensor apply(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return add(a, b);
    case BinaryOp::Sub: return sub(a, b);
    case BinaryOp::Mul: return mul(a, b);
    case BinaryOp::Div: return div(a, b);
    case BinaryOp::Pow: return pow(a, b);
    case BinaryOp::Maximum: return maximum(a, b);
    case BinaryOp::Minimum: return minimum(a, b);
    case BinaryOp::Eq: return eq(a, b);
    case BinaryOp::Ne: return ne(a, b);
    case BinaryOp::Lt: return lt(a, b);
    case BinaryOp::Le: return le(a, b);
    case BinaryOp::Gt: return gt(a, b);
    case BinaryOp::Ge: return ge(a, b);
  }
  return Tensor();
}

bool compares(BinaryOp op) { return op >= BinaryOp::Eq; }
bool selects(BinaryOp op) { return op == BinaryOp::Maximum || op == BinaryOp::Minimum || compares(op); }

// Shapes of a and b and the layouts each is tried in.
struct Config {
  Shape a, b;
  std::vector<std::pair<Layout, Layout>> layouts;
};

std::vector<Config> configs() {
  const std::vector<std::pair<Layout, Layout>> all = {
      {Layout::Contiguous, Layout::Contiguous}, {Layout::Transposed, Layout::Contiguous},
      {Layout::Contiguous, Layout::Transposed}, {Layout::Strided, Layout::Strided},
      {Layout::Misaligned, Layout::Contiguous}, {Layout::Contiguous, Layout::Misaligned},
      {Layout::Transposed, Layout::Strided},    {Layout::Misaligned, Layout::Misaligned}};
  const std::vector<std::pair<Layout, Layout>> few = {{Layout::Contiguous, Layout::Contiguous},
                                                      {Layout::Misaligned, Layout::Contiguous},
                                                      {Layout::Transposed, Layout::Contiguous}};
  const int64_t big = (1 << 20) + 3;
  return {
      {{37, 61}, {37, 61}, all},  // same shape, odd sizes
      {{16, 64}, {64}, all},      // bias row, vector path
      {{37, 61}, {61}, all},      // bias row, odd row length
      {{37, 61}, {37, 1}, all},   // column broadcast
      {{4, 6, 8}, {6, 1}, all},   // per-channel
      {{2, 3, 4, 5}, {3, 1, 5}, all},
      {{}, {5, 7}, all},  // 0-dim scalar
      {{5, 7}, {}, all},
      {{3}, {3}, all},
      {{70000, 3}, {3}, few},  // more than 65535 rows
      {{big}, {big}, few},
      {{1024, 1024}, {1024}, {{Layout::Contiguous, Layout::Contiguous}}},
      {{big}, {}, {{Layout::Contiguous, Layout::Contiguous}}},
  };
}

// Inputs for op in float32: normal(0, 2) for arithmetic; for comparisons, maximum and minimum,
// multiples of 0.5 in [-3, 3] (so a == b is common) with a NaN at every 13th element.
Tensor float_inputs(const Shape& shape, BinaryOp op, std::mt19937& rng) {
  if (!selects(op)) return random_values(shape, rng);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 13 == 12 ? std::numeric_limits<float>::quiet_NaN() : float(int(rng() % 13) - 6) * 0.5f;
  return Tensor::from_vector(v, shape);
}

// got (dtype dt, GPU) against ref (CPU, float32 for the half types, else dt): bytes for
// comparisons and exact ops, ulps for pow.
void expect_binary_matches(BinaryOp op, DType dt, const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  ASSERT_EQ(got.dtype(), compares(op) ? DType::Bool : dt) << what;
  if (compares(op)) {
    EXPECT_TRUE(bytes_of(got) == bytes_of(ref)) << what;
    return;
  }
  const int64_t allowed_ulps = op == BinaryOp::Pow ? 1 : 0;
  if (dt == DType::Float16 || dt == DType::BFloat16) {
    const std::vector<uint8_t> g = bytes_of(got), r = bytes_of(ref.to(dt));
    int64_t bad = 0;
    for (size_t i = 0; i + 1 < g.size(); i += 2) {
      uint16_t gb, rb;
      std::memcpy(&gb, &g[i], 2);
      std::memcpy(&rb, &r[i], 2);
      const bool ok = ulp_distance16(gb, rb, dt) <= allowed_ulps;
      if (!ok && bad < 5) ADD_FAILURE() << what << ": element " << i / 2 << " got bits " << gb << ", expected " << rb;
      bad += !ok;
    }
    EXPECT_EQ(bad, 0) << what;
    return;
  }
  if (allowed_ulps == 0) {
    EXPECT_TRUE(bytes_of(got) == bytes_of(ref)) << what;
    return;
  }
  const double eps = dt == DType::Float32 ? 0x1p-23 : 0x1p-51;
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(r[i])) || g[i] == r[i] || std::fabs(g[i] - r[i]) <= eps * std::fabs(r[i]);
    if (!ok && bad < 5) ADD_FAILURE() << what << ": element " << i << " got " << g[i] << ", expected " << r[i];
    bad += !ok;
  }
  EXPECT_EQ(bad, 0) << what;
}

std::string describe(BinaryOp op, DType dt, const LaidOut& a, const LaidOut& b, Layout la, Layout lb) {
  return std::string(op_name(op)) + " " + dtype_name(dt) + " a " + a.cpu.shape_str() + " " + layout_name(la) +
         ", b " + b.cpu.shape_str() + " " + layout_name(lb);
}

// On the shapes past 2^20 elements (the grid-stride loop) one op of each kind: arithmetic, pow
// (ulps), a NaN-propagating select and a comparison (Bool output); every op on the small shapes.
bool runs_on(BinaryOp op, const Config& c) {
  const bool large = shape_numel(c.a) > 100000 || shape_numel(c.b) > 100000;
  return !large || op == BinaryOp::Add || op == BinaryOp::Pow || op == BinaryOp::Maximum || op == BinaryOp::Lt;
}

void check_float_dtype(DType dt, uint32_t seed) {
  std::mt19937 rng(seed);
  const DType ct = dt == DType::Float64 ? DType::Float64 : DType::Float32;
  for (const Config& c : configs())
    for (const auto& [la, lb] : c.layouts)
      for (BinaryOp op : kAllBinaryOps) {
        if (!runs_on(op, c)) continue;
        const LaidOut a = lay_out(float_inputs(c.a, op, rng).to(dt), la, gpu());
        const LaidOut b = lay_out(float_inputs(c.b, op, rng).to(dt), lb, gpu());
        const Tensor got = apply(op, a.dev, b.dev), ref = apply(op, a.cpu.to(ct), b.cpu.to(ct));
        expect_binary_matches(op, dt, got, ref, describe(op, dt, a, b, la, lb));
      }
}

TEST(CudaElementwiseBinary, Float16RoundsTheFloat32ResultOnce) {
  SKIP_WITHOUT_GPU();
  check_float_dtype(DType::Float16, 41);
}

TEST(CudaElementwiseBinary, BFloat16RoundsTheFloat32ResultOnce) {
  SKIP_WITHOUT_GPU();
  check_float_dtype(DType::BFloat16, 42);
}

TEST(CudaElementwiseBinary, Float32MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  check_float_dtype(DType::Float32, 43);
}

TEST(CudaElementwiseBinary, Float64MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  check_float_dtype(DType::Float64, 44);
}

// Integer inputs: small values (products and powers stay in range), all of uint8's range,
// and for pow a nonzero base with exponents -3..5 (0..3 for uint8).
Tensor integer_inputs(const Shape& shape, DType dt, BinaryOp op, bool exponent, std::mt19937& rng) {
  std::vector<int64_t> v(size_t(shape_numel(shape)));
  for (int64_t& x : v) {
    if (op == BinaryOp::Pow) {
      if (dt == DType::UInt8) x = exponent ? int64_t(rng() % 4) : int64_t(rng() % 7);
      else x = exponent ? int64_t(rng() % 9) - 3 : (rng() % 2 ? 1 : -1) * int64_t(1 + rng() % 6);
    } else {
      x = dt == DType::UInt8 ? int64_t(rng() % 256) : int64_t(rng() % 101) - 50;
    }
  }
  return Tensor::from_vector(v, shape).to(dt);
}

TEST(CudaElementwiseBinary, IntegerDtypesMatchTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(45);
  for (DType dt : {DType::Int32, DType::Int64, DType::UInt8})
    for (const Config& c : configs()) {
      if (shape_numel(c.a) > 100000 || shape_numel(c.b) > 100000) continue;  // small shapes suffice here
      for (const auto& [la, lb] : c.layouts)
        for (BinaryOp op : kAllBinaryOps) {
          const LaidOut a = lay_out(integer_inputs(c.a, dt, op, false, rng), la, gpu());
          const LaidOut b = lay_out(integer_inputs(c.b, dt, op, true, rng), lb, gpu());
          const std::string what = describe(op, dt, a, b, la, lb);
          if (op == BinaryOp::Div) {
            EXPECT_THROW(apply(op, a.dev, b.dev), DTypeError) << what;
            continue;
          }
          const Tensor got = apply(op, a.dev, b.dev), ref = apply(op, a.cpu, b.cpu);
          ASSERT_EQ(got.dtype(), ref.dtype()) << what;
          EXPECT_TRUE(bytes_of(got) == bytes_of(ref)) << what;
        }
    }
}

TEST(CudaElementwiseBinary, BoolMasksCompareAndCombine) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(46);
  for (const Config& c : configs()) {
    if (shape_numel(c.a) > 100000) continue;
    for (const auto& [la, lb] : c.layouts)
      for (BinaryOp op : {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum}) {
        std::vector<bool> va(size_t(shape_numel(c.a))), vb(size_t(shape_numel(c.b)));
        for (size_t i = 0; i < va.size(); ++i) va[i] = rng() % 2;
        for (size_t i = 0; i < vb.size(); ++i) vb[i] = rng() % 2;
        const LaidOut a = lay_out(Tensor::from_vector(va, c.a), la, gpu());
        const LaidOut b = lay_out(Tensor::from_vector(vb, c.b), lb, gpu());
        const Tensor got = apply(op, a.dev, b.dev), ref = apply(op, a.cpu, b.cpu);
        EXPECT_TRUE(bytes_of(got) == bytes_of(ref)) << describe(op, DType::Bool, a, b, la, lb);
      }
  }
}

// where: the reference is the CPU's where in the same dtype, or for the half types (which the
// CPU's where does not take) its float32 where on the exactly widened values, narrowed back.
Tensor cpu_where(const Tensor& c, const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Float16 || a.dtype() == DType::BFloat16)
    return where(c, a.to(DType::Float32), b.to(DType::Float32)).to(a.dtype());
  return where(c, a, b);
}

TEST(CudaElementwiseWhere, EveryDtypeBroadcastAndStrided) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                          DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};
  struct Shapes {
    Shape cond, a, b;
  };
  const Shapes shapes[] = {{{37, 61}, {37, 61}, {37, 61}}, {{37, 1}, {37, 61}, {61}}, {{16, 64}, {64}, {}},
                           {{1, 64}, {16, 64}, {16, 1}},    {{70000, 3}, {3}, {70000, 3}},
                           {{(1 << 20) + 5}, {(1 << 20) + 5}, {(1 << 20) + 5}}};
  const Layout layouts[][3] = {{Layout::Contiguous, Layout::Contiguous, Layout::Contiguous},
                               {Layout::Transposed, Layout::Strided, Layout::Contiguous},
                               {Layout::Contiguous, Layout::Misaligned, Layout::Transposed},
                               {Layout::Strided, Layout::Contiguous, Layout::Misaligned}};
  for (DType dt : dtypes)
    for (const Shapes& s : shapes)
      for (const auto& lay : layouts) {
        // Past 2^20 elements: all contiguous, and all misaligned or strided (the last layout).
        if (shape_numel(s.a) > 100000 && &lay != &layouts[0] && &lay != &layouts[3]) continue;
        std::vector<bool> cv(size_t(shape_numel(s.cond)));
        for (size_t i = 0; i < cv.size(); ++i) cv[i] = rng() % 3 == 0;
        const LaidOut c = lay_out(Tensor::from_vector(cv, s.cond), lay[0], gpu());
        const LaidOut a = lay_out(random_values(s.a, rng, false, 20.0).to(dt), lay[1], gpu());
        const LaidOut b = lay_out(random_values(s.b, rng, false, 20.0).to(dt), lay[2], gpu());
        const Tensor got = where(c.dev, a.dev, b.dev), ref = cpu_where(c.cpu, a.cpu, b.cpu);
        const std::string what = std::string("where ") + dtype_name(dt) + " cond " + c.cpu.shape_str() + " " +
                                 layout_name(lay[0]) + ", a " + a.cpu.shape_str() + " " + layout_name(lay[1]) +
                                 ", b " + b.cpu.shape_str() + " " + layout_name(lay[2]);
        ASSERT_EQ(got.shape(), ref.shape()) << what;
        EXPECT_TRUE(bytes_of(got) == bytes_of(ref)) << what;
      }
}

}  // namespace
}  // namespace tandem::testing::elementwise
