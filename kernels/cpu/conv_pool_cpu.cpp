// conv2d (NCHW, groups = 1) as im2col + GEMM per image (kernels/cpu/gemm_serial.h on one thread
// per image: the packed GEMM for float32, Eigen for float64), and 2-D max/avg pooling.
// x [N,C,H,W], w [OC,C,KH,KW], y [N,OC,OH,OW], OH = (H + 2ph - dh(KH-1) - 1)/sh + 1.
// Images are spread over the thread pool's tasks, each thread with its own column buffer; weight
// gradients are summed per task and then across tasks in task order (deterministic for a fixed
// thread count).
#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/cpu_isa.h"
#include "kernels/cpu/gemm_serial.h"

namespace tandem {

namespace {

struct ConvGeom {
  int64_t N, C, H, W, OC, KH, KW, OH, OW;
  int64_t ck() const { return C * KH * KW; }
  int64_t ohw() const { return OH * OW; }
};

ConvGeom geometry(const TensorView& x, const TensorView& w, const TensorView& y) {
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3], y.shape[2], y.shape[3]};
}

// The output columns [lo, hi) whose input column iw = ow * stride + offset lies in [0, W): the rest
// of a row of col reads the zero padding.
struct ValidColumns {
  int64_t lo, hi;
};
ValidColumns valid_columns(int64_t OW, int64_t W, int64_t stride, int64_t offset) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  const int64_t lo = std::clamp<int64_t>(ceil_div(-offset, stride), 0, OW);
  return {lo, std::clamp<int64_t>(ceil_div(W - offset, stride), lo, OW)};
}

// col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 outside).
// Each row of col is zeros, a run read from one row of x (a plain copy at stride 1), zeros: no
// bounds test per element (a test per element made this 14% of the CNN step, `perf`).
template <typename T>
void im2col(const T* x, const ConvGeom& g, const Conv2dParams& p, T* col) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* dst = col + ((c * g.KH + kh) * g.KW + kw) * g.ohw();
        const int64_t offset = kw * p.dil_w - p.pad_w;
        const ValidColumns v = valid_columns(g.OW, g.W, p.stride_w, offset);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
          T* row = dst + oh * g.OW;
          if (ih < 0 || ih >= g.H) {
            std::fill(row, row + g.OW, T(0));
            continue;
          }
          const T* src = x + (c * g.H + ih) * g.W;
          std::fill(row, row + v.lo, T(0));
          if (p.stride_w == 1) {
            if (v.hi > v.lo) std::copy(src + v.lo + offset, src + v.hi + offset, row + v.lo);
          } else {
            for (int64_t ow = v.lo; ow < v.hi; ++ow) row[ow] = src[ow * p.stride_w + offset];
          }
          std::fill(row + v.hi, row + g.OW, T(0));
        }
      }
}

// The adjoint of im2col: x[c, ih, iw] += col[...] for every window position that read it.
template <typename T>
void col2im(const T* col, const ConvGeom& g, const Conv2dParams& p, T* x) {
  std::fill(x, x + g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* src = col + ((c * g.KH + kh) * g.KW + kw) * g.ohw();
        const int64_t offset = kw * p.dil_w - p.pad_w;
        const ValidColumns v = valid_columns(g.OW, g.W, p.stride_w, offset);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
          if (ih < 0 || ih >= g.H) continue;
          T* dst = x + (c * g.H + ih) * g.W;
          const T* row = src + oh * g.OW;
          for (int64_t ow = v.lo; ow < v.hi; ++ow) dst[ow * p.stride_w + offset] += row[ow];
        }
      }
}

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MapC = Eigen::Map<const RowMat<T>>;
template <typename T>
using MapM = Eigen::Map<RowMat<T>>;

// The calling thread's im2col buffer of at least `elements`, kept between calls (it only grows).
template <typename T>
T* column_buffer(int64_t elements) {
  thread_local std::vector<T> col;
  if (int64_t(col.size()) < elements) col.resize(size_t(elements));
  return col.data();
}

// C[m,n] = op(A) op(B) + beta C on the calling thread, all operands contiguous row-major
// (A [m,k] or [k,m] when ta, B [k,n] or [n,k] when tb).
template <typename T>
void gemm_contiguous(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T beta, T* c) {
  cpu::gemm_serial(ta, tb, m, n, k, T(1), a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

// Max pooling with 2 x 2 windows at stride 2, no padding (every window whole): the CNN's pooling.
// The generic loop's compare and branch per element mispredicted on about half of them (22% of
// the CNN step, `perf`); here each window is four selects. Same result and argmax as the generic
// loop: in each window row the first NaN ends the row, a later row's NaN replaces an earlier one,
// ties keep the first.
template <typename T>
void max_pool_2x2(const T* in, int64_t W, int64_t OH, int64_t OW, T* out, int64_t* arg_out) {
  int32_t which[64];  // the window element each output took: 0, 1 (row 0), 2, 3 (row 1)
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = in + 2 * oh * W;
    const T* r1 = r0 + W;
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 64) {
      const int64_t n = std::min<int64_t>(64, OW - ow0);
      T* o = out + oh * OW + ow0;
      // Values and choices first (float compares and int32 selects of one width, which the
      // compiler vectorizes), then the int64 indices from the choices.
      for (int64_t j = 0; j < n; ++j) {
        const int64_t ow = ow0 + j;
        const T a0 = r0[2 * ow], a1 = r0[2 * ow + 1], b0 = r1[2 * ow], b1 = r1[2 * ow + 1];
        T best = a0;
        int32_t w = 0;
        const bool take_a1 = a0 == a0 && (a1 > best || a1 != a1);
        best = take_a1 ? a1 : best;
        w = take_a1 ? 1 : w;
        const bool take_b0 = b0 > best || b0 != b0;
        best = take_b0 ? b0 : best;
        w = take_b0 ? 2 : w;
        const bool take_b1 = b0 == b0 && (b1 > best || b1 != b1);
        best = take_b1 ? b1 : best;
        w = take_b1 ? 3 : w;
        o[j] = best;
        which[j] = w;
      }
      int64_t* ia = arg_out + oh * OW + ow0;
      const int64_t base = 2 * oh * W + 2 * ow0;
      for (int64_t j = 0; j < n; ++j) ia[j] = base + 2 * j + (which[j] >> 1) * W + (which[j] & 1);
    }
  }
}

}  // namespace

void CpuBackend::conv2d(const TensorView& x, const TensorView& w, const TensorView* bias, const Conv2dParams& p,
                        const TensorView& y) {
  cpu::dispatch_float(x.dtype, "conv2d", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const ConvGeom g = geometry(x, w, y);
    const T* xp = x.ptr<T>();
    const T* bp = bias ? bias->ptr<T>() : nullptr;
    T* yp = y.ptr<T>();
    const T* wp = w.ptr<T>();
    if (std::is_same_v<T, float>) cpu::active_isa();  // a bad TANDEM_CPU_ISA throws here, not in the region
    cpu::parallel_for(g.N, 1, [&](int64_t n0, int64_t n1) {
      T* col = column_buffer<T>(g.ck() * g.ohw());
      for (int64_t n = n0; n < n1; ++n) {
        im2col(xp + n * g.C * g.H * g.W, g, p, col);
        MapM<T> Y(yp + n * g.OC * g.ohw(), g.OC, g.ohw());
        gemm_contiguous(false, false, g.OC, g.ohw(), g.ck(), wp, col, T(0), Y.data());
        if (bp)
          for (int64_t o = 0; o < g.OC; ++o) Y.row(o).array() += bp[o];
      }
    });
  });
}

void CpuBackend::conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy,
                                 const Conv2dParams& p, const TensorView* gx, const TensorView* gw,
                                 const TensorView* gb) {
  cpu::dispatch_float(x.dtype, "conv2d_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const ConvGeom g = geometry(x, w, gy);
    const T* xp = x.ptr<T>();
    const T* gyp = gy.ptr<T>();
    const T* wp = w.ptr<T>();
    // Images [N*t/threads, N*(t+1)/threads) go to task t, whose sums land in part t.
    const int threads = int(std::min<int64_t>(g.N, cpu::in_parallel_region() ? 1 : cpu::max_threads()));
    if (std::is_same_v<T, float>) cpu::active_isa();  // a bad TANDEM_CPU_ISA throws here, not in a task
    std::vector<RowMat<T>> gw_part(static_cast<size_t>(threads));
    std::vector<std::vector<double>> gb_part(static_cast<size_t>(threads));
    cpu::parallel_tasks(threads, [&](int64_t t) {
      T* col = column_buffer<T>(g.ck() * g.ohw());
      if (gw) gw_part[size_t(t)] = RowMat<T>::Zero(g.OC, g.ck());
      if (gb) gb_part[size_t(t)].assign(size_t(g.OC), 0.0);
      for (int64_t n = g.N * t / threads; n < g.N * (t + 1) / threads; ++n) {
        MapC<T> GY(gyp + n * g.OC * g.ohw(), g.OC, g.ohw());
        if (gw) {
          im2col(xp + n * g.C * g.H * g.W, g, p, col);
          gemm_contiguous(false, true, g.OC, g.ck(), g.ohw(), GY.data(), col, T(1), gw_part[size_t(t)].data());
        }
        if (gb)
          for (int64_t o = 0; o < g.OC; ++o) gb_part[size_t(t)][size_t(o)] += double(GY.row(o).sum());
        if (gx) {
          gemm_contiguous(true, false, g.ck(), g.ohw(), g.OC, wp, GY.data(), T(0), col);
          col2im(col, g, p, gx->ptr<T>() + n * g.C * g.H * g.W);
        }
      }
    });
    if (gw) {
      MapM<T> GW(gw->ptr<T>(), g.OC, g.ck());
      GW.setZero();
      for (int t = 0; t < threads; ++t)
        if (gw_part[size_t(t)].size()) GW += gw_part[size_t(t)];
    }
    if (gb)
      for (int64_t o = 0; o < g.OC; ++o) {
        double s = 0;
        for (int t = 0; t < threads; ++t)
          if (!gb_part[size_t(t)].empty()) s += gb_part[size_t(t)][size_t(o)];
        gb->ptr<T>()[o] = T(s);
      }
  });
}

void CpuBackend::max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y,
                            const TensorView& indices) {
  cpu::dispatch_float(x.dtype, "max_pool2d", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t planes = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t OH = y.shape[2], OW = y.shape[3];
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    int64_t* ip = indices.ptr<int64_t>();
    const bool pairs =
        p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 && p.pad_w == 0;
    cpu::parallel_loop(planes, planes * H * W >= cpu::kParallelGrain, [&](int64_t pl) {
      const T* in = xp + pl * H * W;
      if (pairs) {
        max_pool_2x2(in, W, OH, OW, yp + pl * OH * OW, ip + pl * OH * OW);
        return;
      }
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t arg = -1;
          for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
            const int64_t ih = oh * p.stride_h - p.pad_h + kh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
              const int64_t iw = ow * p.stride_w - p.pad_w + kw;
              if (iw < 0 || iw >= W) continue;
              const T v = in[ih * W + iw];
              if (arg < 0 || v > best || v != v) {
                best = v;
                arg = ih * W + iw;
                if (v != v) break;
              }
            }
          }
          yp[(pl * OH + oh) * OW + ow] = best;
          ip[(pl * OH + oh) * OW + ow] = arg;
        }
    });
  });
}

void CpuBackend::max_pool2d_backward(const TensorView& gy, const TensorView& indices, const TensorView& gx) {
  cpu::dispatch_float(gy.dtype, "max_pool2d_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t planes = gx.shape[0] * gx.shape[1], HW = gx.shape[2] * gx.shape[3];
    const int64_t OHW = gy.shape[2] * gy.shape[3];
    const T* g = gy.ptr<T>();
    const int64_t* ip = indices.ptr<int64_t>();
    T* o = gx.ptr<T>();
    cpu::parallel_loop(planes, planes * HW >= cpu::kParallelGrain, [&](int64_t pl) {
      T* dst = o + pl * HW;
      std::fill(dst, dst + HW, T(0));
      for (int64_t i = 0; i < OHW; ++i) dst[ip[pl * OHW + i]] += g[pl * OHW + i];
    });
  });
}

namespace {
// The window of output (oh, ow) in avg pooling, clipped as PyTorch does, and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
inline AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = std::min(h0 + p.kernel_h, H + p.pad_h), w1 = std::min(w0 + p.kernel_w, W + p.pad_w);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, H);
  w1 = std::min(w1, W);
  return {h0, h1, w0, w1, p.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}
}  // namespace

void CpuBackend::avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y) {
  cpu::dispatch_float(x.dtype, "avg_pool2d", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t planes = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t OH = y.shape[2], OW = y.shape[3];
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    cpu::parallel_loop(planes, planes * H * W >= cpu::kParallelGrain, [&](int64_t pl) {
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const AvgWindow win = avg_window(oh, ow, H, W, p);
          double s = 0;
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) s += xp[(pl * H + ih) * W + iw];
          yp[(pl * OH + oh) * OW + ow] = T(s / double(win.divisor));
        }
    });
  });
}

void CpuBackend::avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx) {
  cpu::dispatch_float(gy.dtype, "avg_pool2d_backward", [&](auto tag_) { using T = TANDEM_TYPE(tag_);
    const int64_t planes = gx.shape[0] * gx.shape[1], H = gx.shape[2], W = gx.shape[3];
    const int64_t OH = gy.shape[2], OW = gy.shape[3];
    const T* g = gy.ptr<T>();
    T* o = gx.ptr<T>();
    cpu::parallel_loop(planes, planes * H * W >= cpu::kParallelGrain, [&](int64_t pl) {
      T* dst = o + pl * H * W;
      std::fill(dst, dst + H * W, T(0));
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const AvgWindow win = avg_window(oh, ow, H, W, p);
          const T share = g[(pl * OH + oh) * OW + ow] / T(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) dst[ih * W + iw] += share;
        }
    });
  });
}

}  // namespace tandem
