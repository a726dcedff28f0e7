// conv2d forward and backward on CUDA: the convolution itself through the library seam
// conv_library.h (cuDNN on a GPU; the CPU backend in the emulation build), plus our own bias
// kernels and the empty cases. Pooling lives in conv_pool_pooling_cuda.cu.
//
// x [N,C,H,W], w [OC,C,KH,KW], y [N,OC,OH,OW], all contiguous.
//
// Bias: y += b[oc] after the convolution, and gb[oc] = sum over n, h, w of gy, one block per
// channel summing in double in a fixed order (deterministic).
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
    cuda::launch<add_channel_bias_kernel<T>>(cuda::grid_for(total), cuda::kThreads, 0, cuda::current_stream(),
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

}  // namespace tandem
