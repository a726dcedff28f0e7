// Scaled-dot-product attention on the CPU, flash-attention style: for each (batch, head) and
// tile of kTile query rows, the key/value tiles stream through an online softmax (running row
// max m, running sum l, output rescaled by exp(m_old - m_new)), so the only score storage is one
// kTile x kTile tile per thread; the logsumexp m + log(l) of each row is saved for the backward.
// The backward recomputes each probability tile from q, k and that logsumexp (P = exp(S - lse))
// and uses Delta_i = rowsum(dO_i * O_i) for the softmax gradient: dS = P * (dP - Delta).
//
// The tile products run cpu::gemm_serial (kernels/cpu/gemm_serial.h: the packed GEMM for float32)
// on the operands' rows in place (the D dim has stride 1; rows may have any stride, so q/k/v
// views of a fused qkv projection are read as they are); exp runs vectorized over whole tile rows
// (float32: in AVX-512 or AVX2 registers, vector_math.h). kTile = 64: a 64 x 64 score tile and
// the 64 x D q, k, v, o tiles (D <= 128) stay within L2 (float: 16 KB per 64 x 64 tile).
//
// Threads: the forward hands (batch, head, query tile) items to the thread pool
// (kernels/cpu/thread_pool.h), the backward (batch, head) pairs (a head's dQ is accumulated over
// its key tiles by one thread, so no reduction across threads). Below kParallelWork
// multiply-adds one thread runs everything, since waking the pool costs more than small work.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/philox.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/gemm_serial.h"
#include "kernels/cpu/vector_math.h"

namespace tandem {

namespace {

constexpr int64_t kTile = 64;
constexpr int64_t kParallelWork = int64_t(1) << 20;  // B * H * Tq * Tk * D

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstRows = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using Rows = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;

// Sizes of one call and the mask rule.
struct Geometry {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  // Keys query row i sees: [0, visible(i)).
  int64_t visible(int64_t i) const { return causal ? std::min(Tk, i + (Tk - Tq) + 1) : Tk; }
};

Geometry geometry_of(const TensorView& q, const TensorView& k, bool causal) {
  return {q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], causal};
}

// One operand's [T, D] matrix of head (b, h).
template <typename T>
struct HeadMatrix {
  T* data;
  int64_t row_stride;
  T* row(int64_t i) const { return data + i * row_stride; }
  ConstRows<T> rows(int64_t first, int64_t count, int64_t D) const {
    return ConstRows<T>(data + first * row_stride, count, D, Eigen::OuterStride<>(row_stride));
  }
  Rows<T> rows_mut(int64_t first, int64_t count, int64_t D) const {
    return Rows<T>(data + first * row_stride, count, D, Eigen::OuterStride<>(row_stride));
  }
};

template <typename T>
HeadMatrix<T> head(const TensorView& x, int64_t b, int64_t h) {
  return {x.ptr<T>() + b * x.strides[0] + h * x.strides[1], x.strides[2]};
}

// The dropout factors (0 or 1/(1-p)) of `count` consecutive mask elements starting at flat
// index `first`: the Philox draw of element i is lane i % 4 of block offset + i / 4, one block
// evaluated per 4 elements (philox::bits, batched).
template <typename T>
void dropout_factors(const AttentionParams& p, uint64_t first, int64_t count, T* out) {
  const float drop = float(p.dropout_p);
  const T keep_scale = p.dropout_p < 1.0 ? T(1.0 / (1.0 - p.dropout_p)) : T(0);
  int64_t c = 0;
  while (c < count) {
    const uint64_t i = first + uint64_t(c), block = p.offset + i / 4;
    const philox::U32x4 r = philox::philox4x32_10({{uint32_t(block), uint32_t(block >> 32), 0u, 0u}},
                                                  uint32_t(p.seed), uint32_t(p.seed >> 32));
    for (uint64_t lane = i % 4; lane < 4 && c < count; ++lane, ++c)
      out[c] = philox::uniform01(r.v[lane]) >= drop ? keep_scale : T(0);
  }
}

// Factors for the rows x cols tile at query i0, key j0 of head bh.
template <typename T>
void dropout_tile(const Geometry& g, const AttentionParams& p, int64_t bh, int64_t i0, int64_t j0, int64_t rows,
                  int64_t cols, RowMat<T>& factors) {
  for (int64_t r = 0; r < rows; ++r)
    dropout_factors<T>(p, uint64_t((bh * g.Tq + i0 + r) * g.Tk + j0), cols, factors.row(r).data());
}

// Per-thread tiles, kept by each thread between calls (resized when D changes; delta only grows).
// row[0, n) = exp(row - shift) in place; returns their sum. Float32 in AVX-512 or AVX2 registers
// where active_isa() says so (kernels/cpu/vector_math.h), else Eigen's exp at the baseline width.
template <typename T>
T exp_shifted_row(T* row, int64_t n, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    const cpu::CpuIsa isa = cpu::active_isa();
    if (isa == cpu::CpuIsa::Avx512) return T(cpu::exp_shifted_sum_avx512(row, row, n, shift));
    if (isa == cpu::CpuIsa::Avx2) return T(cpu::exp_shifted_sum_avx2(row, row, n, shift));
  }
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> r(row, n);
  r = (r - shift).exp();
  return r.sum();
}

template <typename T>
struct Workspace {
  RowMat<T> scores, factors, grad_scores, acc_a, acc_b;
  Eigen::Array<T, Eigen::Dynamic, 1> row_max, row_sum;
  std::vector<T> delta;  // the backward's rowsum(gout * out) of one head, [Tq]
};

template <typename T>
Workspace<T>& thread_workspace(int64_t D, int64_t Tq) {
  thread_local Workspace<T> w;
  if (w.acc_a.cols() != D) {  // the tiles are used at exactly D columns
    w.scores.resize(kTile, kTile);
    w.factors.resize(kTile, kTile);
    w.grad_scores.resize(kTile, kTile);
    w.acc_a.resize(kTile, D);
    w.acc_b.resize(kTile, D);
    w.row_max.resize(kTile);
    w.row_sum.resize(kTile);
  }
  if (int64_t(w.delta.size()) < Tq) w.delta.resize(size_t(Tq));
  return w;
}

// Forward of query rows [i0, i0 + rows) of one head: out rows and their logsumexp.
template <typename T>
void forward_tile(const Geometry& g, const AttentionParams& p, int64_t bh, const HeadMatrix<T>& q,
                  const HeadMatrix<T>& k, const HeadMatrix<T>& v, const HeadMatrix<T>& out, T* lse, int64_t i0,
                  int64_t rows, Workspace<T>& w) {
  const int64_t D = g.D;
  auto O = w.acc_a.topRows(rows);
  O.setZero();
  auto m = w.row_max.head(rows);
  auto l = w.row_sum.head(rows);
  m.setConstant(-std::numeric_limits<T>::infinity());
  l.setZero();
  const int64_t keys = g.visible(i0 + rows - 1);  // the tile's last row sees the most
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    const int64_t cols = std::min(kTile, keys - j0);
    auto S = w.scores.topLeftCorner(rows, cols);
    cpu::gemm_serial(false, true, rows, cols, D, T(p.scale), q.row(i0), q.row_stride, k.row(j0), k.row_stride, T(0),
                     S.data(), kTile);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t seen = std::clamp<int64_t>(g.visible(i0 + r) - j0, 0, cols);
      // Key tiles run in order from 0 and row r sees key 0, so m(r) is finite after tile 0.
      const T tile_max = seen > 0 ? S.row(r).head(seen).maxCoeff() : -std::numeric_limits<T>::infinity();
      const T m_new = std::max(m(r), tile_max);
      const T rescale = std::exp(m(r) - m_new);
      l(r) = l(r) * rescale + exp_shifted_row(&S(r, 0), seen, m_new);
      S.row(r).tail(cols - seen).setZero();
      O.row(r) *= rescale;
      m(r) = m_new;
    }
    if (p.dropout_p > 0.0) {
      dropout_tile<T>(g, p, bh, i0, j0, rows, cols, w.factors);
      S.array() *= w.factors.topLeftCorner(rows, cols).array();
    }
    cpu::gemm_serial(false, false, rows, D, cols, T(1), S.data(), kTile, v.row(j0), v.row_stride, T(1), O.data(), D);
  }
  out.rows_mut(i0, rows, D) = O.array().colwise() / l;
  for (int64_t r = 0; r < rows; ++r) lse[i0 + r] = m(r) + std::log(l(r));
}

template <typename T>
void forward(const TensorView& qv, const TensorView& kv, const TensorView& vv, const AttentionParams& p,
             const TensorView& outv, const TensorView& lsev) {
  const Geometry g = geometry_of(qv, kv, p.causal);
  const int64_t tiles = (g.Tq + kTile - 1) / kTile, items = g.B * g.H * tiles;
  auto run = [&](int64_t item) {
    const int64_t bh = item / tiles, b = bh / g.H, h = bh % g.H, i0 = (item % tiles) * kTile;
    forward_tile<T>(g, p, bh, head<T>(qv, b, h), head<T>(kv, b, h), head<T>(vv, b, h), head<T>(outv, b, h),
                    lsev.ptr<T>() + bh * g.Tq, i0, std::min(kTile, g.Tq - i0), thread_workspace<T>(g.D, 0));
  };
  if (g.B * g.H * g.Tq * g.Tk * g.D >= kParallelWork)
    cpu::parallel_tasks(items, run);  // items claimed one at a time: causal tiles differ in work
  else
    for (int64_t item = 0; item < items; ++item) run(item);
}

// The operands of one head's backward.
template <typename T>
struct HeadGrads {
  HeadMatrix<T> q, k, v, out, gout, gq, gk, gv;
  const T* lse;
  T* delta;  // [Tq] scratch: rowsum(gout * out)
};

// Query rows [i0, i0 + rows) against key rows [j0, j0 + cols): adds to gq's rows and to the
// key tile's gk (w.acc_a) and gv (w.acc_b) accumulators.
template <typename T>
void backward_tile(const Geometry& g, const AttentionParams& p, int64_t bh, const HeadGrads<T>& hg, int64_t i0,
                   int64_t rows, int64_t j0, int64_t cols, Workspace<T>& w) {
  const int64_t D = g.D;
  const T *Q = hg.q.row(i0), *K = hg.k.row(j0), *dO = hg.gout.row(i0);
  const int64_t ldq = hg.q.row_stride, ldk = hg.k.row_stride, ldo = hg.gout.row_stride;
  auto P = w.scores.topLeftCorner(rows, cols);
  cpu::gemm_serial(false, true, rows, cols, D, T(p.scale), Q, ldq, K, ldk, T(0), P.data(), kTile);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seen = std::clamp<int64_t>(g.visible(i0 + r) - j0, 0, cols);
    exp_shifted_row(&P(r, 0), seen, hg.lse[i0 + r]);
    P.row(r).tail(cols - seen).setZero();
  }
  auto dP = w.grad_scores.topLeftCorner(rows, cols);
  cpu::gemm_serial(false, true, rows, cols, D, T(1), dO, ldo, hg.v.row(j0), hg.v.row_stride, T(0), dP.data(), kTile);
  const T* dropped_p = P.data();  // the probabilities after dropout, for gv
  if (p.dropout_p > 0.0) {
    dropout_tile<T>(g, p, bh, i0, j0, rows, cols, w.factors);
    auto F = w.factors.topLeftCorner(rows, cols);
    dP.array() *= F.array();
    F.array() *= P.array();
    dropped_p = F.data();
  }
  cpu::gemm_serial(true, false, cols, D, rows, T(1), dropped_p, kTile, dO, ldo, T(1), w.acc_b.data(), D);
  const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> delta(hg.delta + i0, rows);
  dP.array() = P.array() * (dP.array().colwise() - delta);  // dS, in dP's storage
  cpu::gemm_serial(false, false, rows, D, cols, T(p.scale), dP.data(), kTile, K, ldk, T(1), hg.gq.row(i0),
                   hg.gq.row_stride);
  cpu::gemm_serial(true, false, cols, D, rows, T(p.scale), dP.data(), kTile, Q, ldq, T(1), w.acc_a.data(), D);
}

template <typename T>
void backward_head(const Geometry& g, const AttentionParams& p, int64_t bh, const HeadGrads<T>& hg, Workspace<T>& w) {
  const int64_t D = g.D;
  for (int64_t i = 0; i < g.Tq; ++i)
    hg.delta[i] = hg.gout.rows(i, 1, D).cwiseProduct(hg.out.rows(i, 1, D)).sum();
  hg.gq.rows_mut(0, g.Tq, D).setZero();
  for (int64_t j0 = 0; j0 < g.Tk; j0 += kTile) {
    const int64_t cols = std::min(kTile, g.Tk - j0);
    w.acc_a.topRows(cols).setZero();
    w.acc_b.topRows(cols).setZero();
    // The first query row that sees key j0, rounded down to its query tile.
    const int64_t first = g.causal ? std::max<int64_t>(0, j0 - (g.Tk - g.Tq)) : 0;
    for (int64_t i0 = first / kTile * kTile; i0 < g.Tq; i0 += kTile)
      backward_tile<T>(g, p, bh, hg, i0, std::min(kTile, g.Tq - i0), j0, cols, w);
    hg.gk.rows_mut(j0, cols, D) = w.acc_a.topRows(cols);
    hg.gv.rows_mut(j0, cols, D) = w.acc_b.topRows(cols);
  }
}

template <typename T>
void backward(const TensorView& qv, const TensorView& kv, const TensorView& vv, const TensorView& outv,
              const TensorView& goutv, const TensorView& lsev, const AttentionParams& p, const TensorView& gqv,
              const TensorView& gkv, const TensorView& gvv) {
  const Geometry g = geometry_of(qv, kv, p.causal);
  const int64_t heads = g.B * g.H;
  auto run = [&](int64_t bh) {
    Workspace<T>& w = thread_workspace<T>(g.D, g.Tq);
    const int64_t b = bh / g.H, h = bh % g.H;
    const HeadGrads<T> hg{head<T>(qv, b, h),    head<T>(kv, b, h),  head<T>(vv, b, h),  head<T>(outv, b, h),
                          head<T>(goutv, b, h), head<T>(gqv, b, h), head<T>(gkv, b, h), head<T>(gvv, b, h),
                          lsev.ptr<T>() + bh * g.Tq, w.delta.data()};
    backward_head<T>(g, p, bh, hg, w);
  };
  if (heads * g.Tq * g.Tk * g.D >= kParallelWork)
    cpu::parallel_tasks(heads, run);
  else
    for (int64_t bh = 0; bh < heads; ++bh) run(bh);
}

}  // namespace

void CpuBackend::attention_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                                   const AttentionParams& p, const TensorView& out, const TensorView& lse) {
  cpu::dispatch_float(q.dtype, "attention_forward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    if (std::is_same_v<T, float>) cpu::active_isa();  // a bad TANDEM_CPU_ISA throws here, not in a task
    forward<T>(q, k, v, p, out, lse);
  });
}

void CpuBackend::attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const TensorView& out, const TensorView& gout, const TensorView& lse,
                                    const AttentionParams& p, const TensorView& gq, const TensorView& gk,
                                    const TensorView& gv) {
  cpu::dispatch_float(q.dtype, "attention_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    if (std::is_same_v<T, float>) cpu::active_isa();  // a bad TANDEM_CPU_ISA throws here, not in a task
    backward<T>(q, k, v, out, gout, lse, p, gq, gk, gv);
  });
}

}  // namespace tandem
