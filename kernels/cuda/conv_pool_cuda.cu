// The conv_pool family on CUDA, NCHW, all contiguous.
//
// conv2d forward and backward: x [N,C,H,W], w [OC,C,KH,KW], y [N,OC,OH,OW]. The convolution
// itself goes through the library seam conv_library.h (cuDNN on a GPU; the CPU backend in the
// emulation build), plus our own bias kernels and the empty cases. Bias: y += b[oc] after the
// convolution (one thread per element, grid-stride), and gb[oc] = sum over n, h, w of gy, one
// block per channel summing in double in a fixed order (deterministic).
//
// Max and average pooling, matching kernels/cpu/conv_pool_cpu.cpp element for element: the same
// window scan order, tie and NaN rules, padding and divisors. x [N,C,H,W] -> y [N,C,OH,OW]; a
// "plane" is one (n, c) image of H*W (or OH*OW) elements. Forward kernels use one thread per
// output element. The backward kernels must not add into gx with float atomics (the order of the
// adds would change run to run):
//   - avg pool backward gathers: one thread per input element sums the shares of the outputs
//     whose windows cover it, visiting them in the CPU's (oh, ow) order;
//   - max pool backward has only the argmax indices (no window geometry), so it scatters, one
//     warp per plane: the warp takes the plane's outputs 32 at a time, lanes pointing at the same
//     input are grouped with __match_any_sync and the group's lowest lane adds the group's
//     gradients in output order, so every input receives its gradients in the CPU's order.
#include <string>

#include "kernels/cuda/conv_library.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace tandem {
namespace {

// ---------------------------------------------------------------- bias kernels
// y[n, o, p] += b[o] over y [N, OC, OHW] (contiguous, `total` = N*OC*OHW elements).
template <typename T>
__global__ void add_channel_bias_kernel(T* y, const T* bias, int64_t channels, int64_t plane, int64_t total) {
  using A = cuda::acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = cuda::from_acc<T>(cuda::to_acc(y[i]) + cuda::to_acc(bias[(i / plane) % channels]));
}

// gb[o] = sum over n < N, p < OHW of gy[n, o, p]; block o sums channel o. Thread t visits the
// flat positions t, t + blockDim, ... of the channel's N*OHW elements (image n, pixel p tracked
// incrementally, no division per element), then the block sums the threads' partials in a fixed
// tree: the result does not depend on timing.
template <typename T>
__global__ void channel_sum_kernel(const T* gy, T* gb, int64_t images, int64_t channels, int64_t plane) {
  __shared__ double scratch[32];
  const int64_t o = blockIdx.x;
  const int64_t step = blockDim.x, step_n = step / plane, step_p = step % plane;
  int64_t n = threadIdx.x / plane, p = threadIdx.x % plane;
  double s = 0;
  while (n < images) {
    s += double(cuda::to_acc(gy[(n * channels + o) * plane + p]));
    n += step_n;
    p += step_p;
    if (p >= plane) {
      p -= plane;
      ++n;
    }
  }
  s = cuda::block_sum(s, scratch);
  if (threadIdx.x == 0) gb[o] = cuda::from_acc<T>(cuda::acc_t<T>(s));
}

void add_bias(const TensorView& y, const TensorView& bias) {
  const int64_t total = y.numel();
  if (total == 0) return;
  cuda::dispatch_float(y.dtype, "conv2d bias", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    cuda::launch<add_channel_bias_kernel<T>>(cuda::grid_for(total), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                             y.ptr<T>(), bias.ptr<T>(), y.shape[1], y.shape[2] * y.shape[3], total);
    TANDEM_CUDA_CHECK_LAUNCH("conv2d bias");
  });
}

void zero_fill(const TensorView& t) {
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype);
  if (bytes) TANDEM_CUDA_CHECK(cudaMemsetAsync(t.data, 0, bytes, cuda::current_stream()));  // +0.0 in every float dtype
}

// An empty output plane (OH * OW == 0) or no image: every channel's sum is empty, so 0; the
// kernel would divide by the plane size.
void bias_grad(const TensorView& gy, const TensorView& gb) {
  const int64_t channels = gy.shape[1];
  if (channels == 0) return;
  if (gy.numel() == 0) {
    zero_fill(gb);
    return;
  }
  cuda::dispatch_float(gy.dtype, "conv2d_backward bias", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    constexpr int kSumThreads = 512;
    cuda::launch<channel_sum_kernel<T>>(unsigned(channels), kSumThreads, 0, cuda::current_stream(), gy.ptr<T>(),
                                        gb.ptr<T>(), gy.shape[0], channels, gy.shape[2] * gy.shape[3]);
    TANDEM_CUDA_CHECK_LAUNCH("conv2d_backward bias");
  });
}

}  // namespace

void CudaBackend::conv2d(const TensorView& x, const TensorView& w, const TensorView* bias, const Conv2dParams& p,
                         const TensorView& y) {
  conv_library::check_dtype(x.dtype);  // dtype check first
  if (y.numel() == 0) return;
  // No input element (C == 0, or H/W == 0 with enough padding for a non-empty output): every
  // window sums nothing, y = bias (or 0), as on the CPU. cuDNN rejects zero-sized dims.
  if (x.numel() == 0) {
    zero_fill(y);
  } else {
    conv_library::forward(x, w, p, y);
  }
  if (bias) add_bias(y, *bias);
}

void CudaBackend::conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy,
                                  const Conv2dParams& p, const TensorView* gx, const TensorView* gw,
                                  const TensorView* gb) {
  conv_library::check_dtype(x.dtype);
  if (gb) bias_grad(gy, *gb);  // N = 0 gives zeros
  const bool empty_sum = gy.numel() == 0 || x.numel() == 0;  // no image, or no channel on one side
  const bool want_gx = gx && gx->numel() > 0, want_gw = gw && gw->numel() > 0;
  if (empty_sum) {
    if (want_gx) zero_fill(*gx);
    if (want_gw) zero_fill(*gw);
    return;
  }
  if (want_gx || want_gw) conv_library::backward(x, w, gy, p, want_gx ? gx : nullptr, want_gw ? gw : nullptr);
}

namespace {

// ---------------------------------------------------------------- max pooling
// Per output: scan the window row by row (rows and columns outside the input are skipped); the
// first element seen, then any larger one, wins; a NaN wins and ends the scan of its row (the
// CPU breaks out of the inner loop only, so a NaN in a later row takes over).
template <typename T>
__global__ void max_pool_kernel(const T* x, T* y, int64_t* indices, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                int64_t OW, Pool2dParams p) {
  using A = cuda::acc_t<T>;
  const int64_t total = planes * OH * OW;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    const T* in = x + pl * H * W;
    A best = A(-INFINITY);
    int64_t arg = -1;
    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
      const int64_t ih = oh * p.stride_h - p.pad_h + kh;
      if (ih < 0 || ih >= H) continue;
      for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
        const int64_t iw = ow * p.stride_w - p.pad_w + kw;
        if (iw < 0 || iw >= W) continue;
        const A v = cuda::to_acc(in[ih * W + iw]);
        if (arg < 0 || v > best || v != v) {
          best = v;
          arg = ih * W + iw;
          if (v != v) break;
        }
      }
    }
    y[i] = cuda::from_acc<T>(best);
    indices[i] = arg;
  }
}

// gx[pl, t] = sum of gy[pl, o] over the outputs o with indices[pl, o] == t, added in ascending
// o. One warp per plane (warp-uniform loops, so every __match_any_sync/__syncwarp sees all 32
// lanes); `slots` holds each warp's 32 gradients of the current chunk.
template <typename T>
__global__ void max_pool_backward_kernel(const T* gy, const int64_t* indices, T* gx, int64_t planes, int64_t in_plane,
                                         int64_t out_plane) {
  using A = cuda::acc_t<T>;
  __shared__ A slots[cuda::kElementwiseThreads];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t warps_per_block = blockDim.x >> 5, all_warps = int64_t(gridDim.x) * warps_per_block;
  A* my_slots = slots + warp * 32;
  for (int64_t pl = blockIdx.x * warps_per_block + warp; pl < planes; pl += all_warps) {
    T* dst = gx + pl * in_plane;
    const T* g = gy + pl * out_plane;
    const int64_t* idx = indices + pl * out_plane;
    for (int64_t j = lane; j < in_plane; j += 32) dst[j] = cuda::from_acc<T>(A(0));
    __syncwarp();  // zeros visible to the lanes that add below
    for (int64_t base = 0; base < out_plane; base += 32) {
      const int64_t o = base + lane;
      int64_t target = o < out_plane ? idx[o] : -1;
      if (target >= in_plane) target = -1;  // -1: nothing to add (past the end, or a window with no input)
      my_slots[lane] = o < out_plane ? cuda::to_acc(g[o]) : A(0);
      const unsigned peers = __match_any_sync(0xffffffffu, target);
      __syncwarp();  // slots written
      if (target >= 0 && (peers & ((1u << lane) - 1u)) == 0u) {  // lowest lane of its group
        A sum = cuda::to_acc(dst[target]);
        for (unsigned rest = peers; rest != 0u; rest &= rest - 1u) sum += my_slots[__ffs(rest) - 1];
        dst[target] = cuda::from_acc<T>(sum);
      }
      __syncwarp();  // adds visible, slots free for the next chunk
    }
  }
}

// ---------------------------------------------------------------- average pooling
// The window of output (oh, ow), clipped to the input, and its divisor (the CPU's avg_window).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
__device__ __forceinline__ AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = min(h0 + p.kernel_h, H + p.pad_h), w1 = min(w0 + p.kernel_w, W + p.pad_w);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = max(h0, int64_t(0));
  w0 = max(w0, int64_t(0));
  h1 = min(h1, H);
  w1 = min(w1, W);
  return {h0, h1, w0, w1, p.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

// y = (sum of the window, in double, row by row) / divisor, rounded once to T.
template <typename T>
__global__ void avg_pool_kernel(const T* x, T* y, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                Pool2dParams p) {
  const int64_t total = planes * OH * OW;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    const T* in = x + pl * H * W;
    const AvgWindow win = avg_window(oh, ow, H, W, p);
    double s = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) s += double(cuda::to_acc(in[ih * W + iw]));
    y[i] = cuda::from_acc<T>(s / double(win.divisor));
  }
}

// First output index whose window (start o*stride - pad, length k) reaches input position i.
__device__ __forceinline__ int64_t first_covering(int64_t i, int64_t k, int64_t stride, int64_t pad) {
  return i + pad < k ? 0 : (i + pad - k) / stride + 1;
}

// gx[ih, iw] = sum over outputs (oh, ow) whose window covers (ih, iw), in ascending (oh, ow), of
// the output's share gy / divisor (rounded to T first, like the CPU). Output oh covers ih when
// oh*sh - ph <= ih < oh*sh - ph + kh (the window's clipped end H + ph never cuts off an ih < H).
template <typename T>
__global__ void avg_pool_backward_kernel(const T* gy, T* gx, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                         int64_t OW, Pool2dParams p) {
  using A = cuda::acc_t<T>;
  const int64_t total = planes * H * W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t iw = i % W, ih = (i / W) % H, pl = i / (W * H);
    const T* g = gy + pl * OH * OW;
    const int64_t oh0 = first_covering(ih, p.kernel_h, p.stride_h, p.pad_h);
    const int64_t oh1 = min((ih + p.pad_h) / p.stride_h, OH - 1);
    const int64_t ow0 = first_covering(iw, p.kernel_w, p.stride_w, p.pad_w);
    const int64_t ow1 = min((iw + p.pad_w) / p.stride_w, OW - 1);
    A sum = A(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const A divisor = A(avg_window(oh, ow, H, W, p).divisor);
        const T share = cuda::from_acc<T>(cuda::to_acc(g[oh * OW + ow]) / divisor);
        sum += cuda::to_acc(share);
      }
    gx[i] = cuda::from_acc<T>(sum);
  }
}

}  // namespace

void CudaBackend::max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y,
                             const TensorView& indices) {
  cuda::dispatch_float(x.dtype, "max_pool2d", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t total = y.numel();
    if (total == 0) return;
    cuda::launch<max_pool_kernel<T>>(cuda::grid_for(total), cuda::kElementwiseThreads, 0, cuda::current_stream(), x.ptr<T>(),
                                     y.ptr<T>(), indices.ptr<int64_t>(), x.shape[0] * x.shape[1], x.shape[2],
                                     x.shape[3], y.shape[2], y.shape[3], p);
    TANDEM_CUDA_CHECK_LAUNCH("max_pool2d");
  });
}

void CudaBackend::max_pool2d_backward(const TensorView& gy, const TensorView& indices, const TensorView& gx) {
  cuda::dispatch_float(gy.dtype, "max_pool2d_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t planes = gx.shape[0] * gx.shape[1];
    if (gx.numel() == 0) return;
    cuda::launch<max_pool_backward_kernel<T>>(cuda::grid_for(planes * 32), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                              gy.ptr<T>(), indices.ptr<int64_t>(), gx.ptr<T>(), planes,
                                              gx.shape[2] * gx.shape[3], gy.shape[2] * gy.shape[3]);
    TANDEM_CUDA_CHECK_LAUNCH("max_pool2d_backward");
  });
}

void CudaBackend::avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y) {
  cuda::dispatch_float(x.dtype, "avg_pool2d", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t total = y.numel();
    if (total == 0) return;
    cuda::launch<avg_pool_kernel<T>>(cuda::grid_for(total), cuda::kElementwiseThreads, 0, cuda::current_stream(), x.ptr<T>(),
                                     y.ptr<T>(), x.shape[0] * x.shape[1], x.shape[2], x.shape[3], y.shape[2],
                                     y.shape[3], p);
    TANDEM_CUDA_CHECK_LAUNCH("avg_pool2d");
  });
}

void CudaBackend::avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx) {
  cuda::dispatch_float(gy.dtype, "avg_pool2d_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    const int64_t total = gx.numel();
    if (total == 0) return;
    cuda::launch<avg_pool_backward_kernel<T>>(cuda::grid_for(total), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                              gy.ptr<T>(), gx.ptr<T>(), gx.shape[0] * gx.shape[1], gx.shape[2],
                                              gx.shape[3], gy.shape[2], gy.shape[3], p);
    TANDEM_CUDA_CHECK_LAUNCH("avg_pool2d_backward");
  });
}

}  // namespace tandem
