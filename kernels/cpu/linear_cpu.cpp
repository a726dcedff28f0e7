// The linear family on the CPU.
// - linear_forward: y[rows, out] = act(x[rows, in] w[out, in]^T + bias). In float32 one packed
//   GEMM (kernels/cpu/gemm) adds the bias as it stores each tile and, with an activation, runs it
//   on each finished cache block while the block is in L2 (an SgemmEpilogue): no pass that copies
//   the bias into y first and no second pass over memory for ReLU or the GELU. Float64 composes
//   the gemm and unary kernels (linear_forward_by_gemm).
// - linear_activation_backward: dz = g * act'(z) and db = column sums of dz in one pass over g
//   (each thread's band of rows sums its columns while its rows of dz are in cache), in place of
//   unary_backward's pass and then reduce's pass over dz. Float64 composes them.
// - linear_weight_grad: dw = g^T x and db = sum of g's rows, composed from the gemm and reduce
//   kernels (linear_weight_grad_by_gemm in kernels/backend.cpp).
#include <algorithm>
#include <vector>

#include "kernels/cpu/activation_cpu.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm/sgemm_packed.h"

namespace tandem {

namespace {

// The fused activation of one linear_forward: applied to each finished block of the GEMM's
// output (the affine map), written in place (ReLU) or into y beside it (the GELU, which keeps
// its input for the backward). y has the GEMM output's shape and row stride.
struct ActivationEpilogue {
  LinearActivation act;
  float* y;  // [rows, out]; may be the GEMM's output itself
};

void run_activation(const void* context, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
  const auto& e = *static_cast<const ActivationEpilogue*>(context);
  for (int64_t i = 0; i < rows; ++i) {
    const float* z = c + i * ldc;
    float* y = e.y + (i0 + i) * ldc + j0;
    if (e.act == LinearActivation::Relu) cpu::relu_run(z, y, cols);
    else cpu::gelu_tanh_run(z, y, cols);
  }
}

}  // namespace

void CpuBackend::linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                                LinearActivation act, const TensorView* pre) {
  if (x.dtype != DType::Float32) {
    linear_forward_by_gemm(*this, x, w, bias, y, act, pre);
    return;
  }
  const int64_t rows = x.shape[0], in_f = x.shape[1], out_f = w.shape[0];
  float* affine = (pre ? *pre : y).ptr<float>();
  const ActivationEpilogue activation{act, y.ptr<float>()};
  const cpu::SgemmEpilogue epilogue{run_activation, &activation};
  cpu::sgemm(false, true, rows, out_f, in_f, 1.0f, x.ptr<float>(), in_f, w.ptr<float>(), in_f, 0.0f, affine, out_f,
             bias ? bias->ptr<float>() : nullptr, cpu::max_threads(),
             act == LinearActivation::None ? nullptr : &epilogue);
}

void CpuBackend::linear_activation_backward(LinearActivation act, const TensorView& g, const TensorView& y,
                                            const TensorView* pre, const TensorView& dz, const TensorView* db) {
  if (g.dtype != DType::Float32) {
    linear_activation_backward_by_kernels(*this, act, g, y, pre, dz, db);
    return;
  }
  const int64_t rows = g.shape[0], out_f = g.shape[1];
  const float* gp = g.ptr<float>();
  const float* xp = act == LinearActivation::Relu ? y.ptr<float>() : pre->ptr<float>();
  float* dzp = dz.ptr<float>();
  // Bands of whole rows, one per thread, as the elementwise kernels cut their work: split by
  // columns instead, the bands' rows read g and z in strides the prefetchers did not follow, and
  // the AVX-512 GELU backward stalled on its loads (docs/PERFORMANCE.md, 2026-11-28).
  const int64_t grain = std::max<int64_t>(1, cpu::kParallelGrain / 2 / std::max<int64_t>(1, out_f));
  const int64_t bands = std::max<int64_t>(1, std::min<int64_t>(cpu::max_threads(), rows / grain));
  // Each band's column sums, added in band order after: a fixed order for a fixed thread count.
  thread_local std::vector<float> band_sums;  // grows once; no allocation in the steady state
  if (db) band_sums.resize(size_t(std::max(bands * out_f, int64_t(band_sums.size()))));
  float* sums = band_sums.data();
  cpu::parallel_tasks(bands, [&](int64_t t) {
    const int64_t r0 = rows * t / bands, r1 = rows * (t + 1) / bands;
    const int64_t at = r0 * out_f, n = (r1 - r0) * out_f;
    if (act == LinearActivation::Relu) cpu::relu_backward_run(xp + at, gp + at, dzp + at, n);
    else cpu::gelu_tanh_backward_run(xp + at, gp + at, dzp + at, n);
    if (!db) return;
    float* band = sums + t * out_f;
    std::fill_n(band, out_f, 0.0f);
    for (int64_t i = r0; i < r1; ++i) {
      const float* row = dzp + i * out_f;
      for (int64_t j = 0; j < out_f; ++j) band[j] += row[j];
    }
  });
  if (!db) return;
  float* dbp = db->ptr<float>();
  std::copy_n(sums, out_f, dbp);
  for (int64_t t = 1; t < bands; ++t)
    for (int64_t j = 0; j < out_f; ++j) dbp[j] += sums[t * out_f + j];
}

void CpuBackend::linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw,
                                    const TensorView* db) {
  linear_weight_grad_by_gemm(*this, g, x, dw, db);
}

}  // namespace tandem
