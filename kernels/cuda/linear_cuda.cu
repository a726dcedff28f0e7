// The linear family on CUDA. linear_forward: y[rows, out] = act(x[rows, in] w[out, in]^T + bias[out]);
// the affine map as one cuBLASLt GEMM with the bias epilogue (one library launch), instead of
// linear_forward_by_gemm's bias copy into y followed by a GEMM with beta = 1 (which writes y
// once more and makes the GEMM read it back). linear_weight_grad: dw = g^T x and db = column
// sums of g by linear_weight_grad_by_gemm (one gemm launch, one reduce_cuda.cu launch). An
// activation (ReLU, the tanh GELU) is the unary kernel after the GEMM, its backward
// linear_activation_backward_by_kernels (unary_backward, then reduce for db).
//
// Layout. y[rows, out] = x[rows, in] w[out, in]^T is Backend::gemm with trans_a = false,
// trans_b = true, m = rows, n = out, k = in. gemm_cuda.cu hands cuBLASLt the column-major
// problem D [out, rows] = op(w) op(x) (D is y's bytes, ld = out). cublasLt.h says of
// CUBLASLT_EPILOGUE_BIAS that the bias vector's length must match D's rows, that it is packed
// (stride 1) and is broadcast to all of D's columns: D's rows are the out features, so bias[j]
// is added to y[i][j] for every row i, as linear needs, with no transposed copy of anything.
// The bias's element type defaults to D's type (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: other
// defaults only for integer and fp8 outputs), the dtype every operand of linear has;
// float16/bfloat16 products accumulate in float and y is rounded once.
//
// When the unfused linear_forward_by_gemm runs instead:
//  - no bias (nothing to fuse), or the test hook (linear_epilogue.h) turned the epilogue off;
//  - in or out features below 2: PyTorch's addmm keeps its bias epilogue to mat2 dims > 1,
//    noting that cuBLASLt's heuristic answered "invalid value" for a one-row or one-column
//    operand (rows of 1 stay fused, as there with CUDA >= 12.1);
//  - a dimension of 2^31 or more (gemm's own limit; it then throws the ShapeError);
//  - a bias pointer not 16-byte aligned (a slice of a larger tensor): cublasLt.h says the
//    heuristic reads the bias pointer for its alignment, but PyTorch (pull request 194497,
//    sm_75) and Marian (src/tensors/gpu/prod.cpp, A100) both report kernels that assume a
//    16-byte aligned bias and fault with "misaligned address", which ends the CUDA context;
//  - cuBLASLt has no algorithm for the problem, a dtype without a bias epilogue for instance
//    (gemm_lt::lt_matmul returns false; the answer is cached per problem, never thrown).
// Both paths are run-to-run deterministic: the GEMM is the same cuBLASLt GEMM and the bias is
// an elementwise add.
//
// Backward: linear_weight_grad is linear_weight_grad_by_gemm (gemm for dw, the reduce kernel for db).
// cuBLASLt's BGRADB epilogue could compute db (the column sums of g, a sum over the GEMM's k =
// rows) inside the dw GEMM, but its documentation says nothing about how that sum is ordered:
// cublasLt.h describes BGRADA/BGRADB with no word on determinism, and the cuBLAS guide's
// "Results reproducibility" section is only the library-wide statement (same toolkit,
// architecture and SM count), the one that also covers the in-place split-K reduction that
// gemm_cuda.cu refuses on other users' reports. Training must give identical gradients run to
// run, so db stays on reduce_cuda.cu's fixed-order reduction.
#include <atomic>
#include <climits>
#include <cstdint>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gemm_lt.cuh"
#include "kernels/cuda/linear_epilogue.h"

namespace tandem {

namespace {

std::atomic<bool> g_bias_epilogue_enabled{true};
std::atomic<int64_t> g_fused_calls{0}, g_unfused_calls{0};

constexpr int64_t kMaxLtDim = INT32_MAX;
constexpr uintptr_t kMinBiasAlignment = 16;  // bytes; see the fallback list above

bool bias_epilogue_applies(int64_t rows, int64_t in_f, int64_t out_f, const void* bias) {
  return g_bias_epilogue_enabled.load(std::memory_order_relaxed) && rows >= 1 && in_f > 1 && out_f > 1 &&
         rows <= kMaxLtDim && in_f <= kMaxLtDim && out_f <= kMaxLtDim &&
         reinterpret_cast<uintptr_t>(bias) % kMinBiasAlignment == 0;
}

// out = x w^T + bias as one cuBLASLt GEMM with the bias epilogue where it applies (counted);
// false where the caller must run the unfused path (counted when there is a bias).
bool affine_by_bias_epilogue(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& out) {
  if (bias == nullptr) return false;  // y = x w^T: one plain GEMM, nothing to fuse
  const int64_t rows = x.shape[0], in_f = x.shape[1], out_f = w.shape[0];
  if (bias_epilogue_applies(rows, in_f, out_f, bias->data)) {
    const gemm_lt::DTypeInfo info = gemm_lt::dtype_info(x.dtype);
    if (gemm_lt::lt_matmul(x.dtype, info, /*trans_a=*/false, /*trans_b=*/true, rows, out_f, in_f, 1.0, x.data, 0,
                           w.data, 0, /*beta=*/0.0, out.data, 0, /*batch=*/1, gemm_lt::Epilogue::Bias, bias->data)) {
      g_fused_calls.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  g_unfused_calls.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace

void cuda::set_linear_bias_epilogue_enabled(bool enabled) { g_bias_epilogue_enabled.store(enabled); }
bool cuda::linear_bias_epilogue_enabled() { return g_bias_epilogue_enabled.load(); }
cuda::LinearBiasPathCounts cuda::linear_bias_path_counts() { return {g_fused_calls.load(), g_unfused_calls.load()}; }

// The affine map into pre (or y), then the activation as one elementwise launch (unary). cuBLASLt
// has ReLU and GELU epilogues that would fold that launch into the GEMM; they have not run on a
// GPU of ours yet, so the activation stays the unary kernel the op table compares with the CPU.
void CudaBackend::linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                                 LinearActivation act, const TensorView* pre) {
  const TensorView& affine = pre ? *pre : y;
  if (!affine_by_bias_epilogue(x, w, bias, affine))
    linear_forward_by_gemm(*this, x, w, bias, affine, LinearActivation::None, nullptr);
  if (act != LinearActivation::None) unary(unary_op_of(act), affine, y, UnaryParams{});
}

// dz by unary_backward, db by reduce_cuda.cu's fixed-order column sums (see Backward above).
void CudaBackend::linear_activation_backward(LinearActivation act, const TensorView& g, const TensorView& y,
                                             const TensorView* pre, const TensorView& dz, const TensorView* db) {
  linear_activation_backward_by_kernels(*this, act, g, y, pre, dz, db);
}

void CudaBackend::linear_weight_grad(const TensorView& g, const TensorView& x, const TensorView& dw,
                                     const TensorView* db) {
  linear_weight_grad_by_gemm(*this, g, x, dw, db);
}

}  // namespace tandem
