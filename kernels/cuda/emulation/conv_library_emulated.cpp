// conv_library.h in the emulation build: the convolutions cuDNN would compute, by the CPU
// backend (im2col + GEMM) on the same memory; half tensors go through float32 copies and are
// rounded once (see library_on_cpu.h).
#include <string>

#include "engine/core/error.h"
#include "kernels/cuda/conv_library.h"
#include "kernels/cuda/emulation/library_on_cpu.h"

namespace tandem {

void conv_library::check_dtype(DType dtype) {
  if (dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 || dtype == DType::BFloat16) return;
  throw DTypeError(std::string("conv2d on CUDA supports float32, float64, float16 and bfloat16, got ") +
                   dtype_name(dtype));
}

void conv_library::forward(const TensorView& x, const TensorView& w, const Conv2dParams& p, const TensorView& y) {
  emu::FloatOperand fx(x.data, x.dtype, x.numel()), fw(w.data, w.dtype, w.numel()), fy(y.data, y.dtype, y.numel());
  cpu_backend().conv2d(fx.shaped(x.shape), fw.shaped(w.shape), nullptr, p, fy.shaped(y.shape));
  fy.store();
}

void conv_library::backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p,
                            const TensorView* gx, const TensorView* gw) {
  emu::FloatOperand fx(x.data, x.dtype, x.numel()), fw(w.data, w.dtype, w.numel());
  emu::FloatOperand fgy(gy.data, gy.dtype, gy.numel());
  emu::FloatOperand fgx(gx ? gx->data : nullptr, x.dtype, gx ? gx->numel() : 0);
  emu::FloatOperand fgw(gw ? gw->data : nullptr, w.dtype, gw ? gw->numel() : 0);
  const TensorView gx_view = gx ? fgx.shaped(gx->shape) : TensorView{};
  const TensorView gw_view = gw ? fgw.shaped(gw->shape) : TensorView{};
  cpu_backend().conv2d_backward(fx.shaped(x.shape), fw.shaped(w.shape), fgy.shaped(gy.shape), p, gx ? &gx_view : nullptr,
                                gw ? &gw_view : nullptr, nullptr);
  if (gx) fgx.store();
  if (gw) fgw.store();
}

}  // namespace tandem
