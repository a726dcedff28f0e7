// conv_library.h in the emulation build: the convolutions cuDNN would compute, by the CPU
// backend (im2col + GEMM) on the same memory; half tensors go through float32 copies and are
// rounded once (see library_on_cpu.h).
#include <string>

#include "base/error.h"
#include "kernels/cuda/conv_library.h"
#include "kernels/cuda/emulation/library_on_cpu.h"

namespace tandem {

void conv_library::check_dtype(DType dtype) {
  if (dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 || dtype == DType::BFloat16) return;
  throw DTypeError(std::string("conv2d on CUDA supports float32, float64, float16 and bfloat16, got ") +
                   dtype_name(dtype));
}

void conv_library::forward(const TensorView& x, const TensorView& w, const Conv2dParams& p, const TensorView& y) {
  emu::on_compute_stream("cudnnConvolutionForward", [=] {
    emu::FloatOperand fx(x.data, x.dtype, x.numel()), fw(w.data, w.dtype, w.numel()), fy(y.data, y.dtype, y.numel());
    cpu_backend().conv2d(fx.shaped(x.shape), fw.shaped(w.shape), nullptr, p, fy.shaped(y.shape));
    fy.store();
  });
}

void conv_library::backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p,
                            const TensorView* gx, const TensorView* gw) {
  const bool want_gx = gx != nullptr, want_gw = gw != nullptr;
  const TensorView gx_out = want_gx ? *gx : TensorView{}, gw_out = want_gw ? *gw : TensorView{};
  emu::on_compute_stream("cudnnConvolutionBackward", [=] {
    emu::FloatOperand fx(x.data, x.dtype, x.numel()), fw(w.data, w.dtype, w.numel());
    emu::FloatOperand fgy(gy.data, gy.dtype, gy.numel());
    emu::FloatOperand fgx(want_gx ? gx_out.data : nullptr, x.dtype, want_gx ? gx_out.numel() : 0);
    emu::FloatOperand fgw(want_gw ? gw_out.data : nullptr, w.dtype, want_gw ? gw_out.numel() : 0);
    const TensorView gx_view = want_gx ? fgx.shaped(gx_out.shape) : TensorView{};
    const TensorView gw_view = want_gw ? fgw.shaped(gw_out.shape) : TensorView{};
    cpu_backend().conv2d_backward(fx.shaped(x.shape), fw.shaped(w.shape), fgy.shaped(gy.shape), p,
                                  want_gx ? &gx_view : nullptr, want_gw ? &gw_view : nullptr, nullptr);
    if (want_gx) fgx.store();
    if (want_gw) fgw.store();
  });
}

}  // namespace tandem
