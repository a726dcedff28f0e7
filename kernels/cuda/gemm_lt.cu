// gemm_lt.cuh on the GPU: cuBLASLt plans and the one cuBLASLt call of the GEMM family. The
// emulation build replaces this file with kernels/cuda/emulation/gemm_lt_emulated.cpp, which
// computes the same products with the CPU backend on the same memory.
//
// Per device: one cuBLASLt handle (created on first use) and one 32 MiB workspace from
// cuda_backend().allocate, both kept for the life of the process (destroying them at exit could
// run after the CUDA context is gone). Each distinct problem (dtype, compute type, flags, sizes,
// batch strides, operand alignments) gets a plan: the matmul descriptor, the three layouts and
// the heuristic's first algorithm, cached so a training loop's repeated shapes query the
// heuristic once. cuBLASLt is deterministic for a fixed algorithm and workspace.
//
// Precision: float32 computes in float32 (CUBLAS_COMPUTE_32F) unless tandem::allow_tf32() is on
// (CUBLAS_COMPUTE_32F_FAST_TF32); float64 in float64; float16/bfloat16 read and write the half
// type and accumulate in float (scale type float), and split-K partial sums are kept in float
// (reduction schemes that round partials to the half type are excluded) so a result is rounded
// to the half type once. Split-K never reduces in place (see make_plan), for reproducibility.
//
// Epilogues (gemm_lt.cuh, used by linear_cuda.cu): a plan may carry cuBLASLt's bias
// epilogue. Its bias vector follows cuBLASLt's D rows, which are our C's columns (n of them),
// so row-major C[i][j] += bias[j]. When the heuristic has no algorithm for an epilogue problem,
// the plan records that and lt_matmul returns false, so the caller falls back to unfused work.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gemm_lt.cuh"
#include "kernels/cuda/kernel_utils.cuh"

namespace tandem {

using gemm_lt::DTypeInfo;
using gemm_lt::Epilogue;

namespace {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    cuda::throw_call_failed(call, file, line,
                            std::string(cublasLtGetStatusName(status)) + ": " + cublasLtGetStatusString(status));
}
#define TANDEM_CUBLAS_CHECK(call) check_cublas((call), #call, __FILE__, __LINE__)

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kMaxPlans = 512;  // past this many shapes the cache starts over
constexpr int kMaxDevices = 64;

// Everything that decides a cuBLASLt plan. epilogue is a cublasLtEpilogue_t; align_bias is 0
// without a bias (cuBLASLt's heuristic reads the bias pointer's value for its alignment).
struct GemmKey {
  int dtype, compute;
  bool trans_a, trans_b;
  int64_t m, n, k, stride_a, stride_b, stride_c, batch;
  uint32_t align_a, align_b, align_c;
  int epilogue;
  uint32_t align_bias;
  auto tied() const {
    return std::tie(dtype, compute, trans_a, trans_b, m, n, k, stride_a, stride_b, stride_c, batch, align_a, align_b,
                    align_c, epilogue, align_bias);
  }
  bool operator<(const GemmKey& o) const { return tied() < o.tied(); }
};

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool has_algo = true;  // false: cuBLASLt has no algorithm for this epilogue problem (nothing else set)
};

void destroy_plan(GemmPlan& p) {  // best effort: only called while dropping the cache
  if (p.lt_c) cublasLtMatrixLayoutDestroy(p.lt_c);
  if (p.lt_b) cublasLtMatrixLayoutDestroy(p.lt_b);
  if (p.lt_a) cublasLtMatrixLayoutDestroy(p.lt_a);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = GemmPlan{};
}

struct DeviceGemmState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<GemmKey, GemmPlan> plans;
};

std::mutex g_gemm_mutex;  // guards g_gemm_states and every state's plan map
std::array<std::unique_ptr<DeviceGemmState>, kMaxDevices> g_gemm_states;

DeviceGemmState& gemm_state(int device) {  // call with g_gemm_mutex held
  if (device < 0 || device >= kMaxDevices) throw DeviceError("gemm: cuda:" + std::to_string(device) + " is out of range");
  auto& slot = g_gemm_states[size_t(device)];
  if (!slot) {
    auto state = std::make_unique<DeviceGemmState>();
    TANDEM_CUBLAS_CHECK(cublasLtCreate(&state->handle));
    state->workspace = cuda_backend().allocate(kWorkspaceBytes, device);
    slot = std::move(state);
  }
  return *slot;
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the byte
// address of every batch's matrix: the base pointer and, when batches differ, the batch stride.
uint32_t alignment_of(const void* p, int64_t stride, int64_t batch, size_t elem_bytes) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (batch > 1 && stride != 0) bits |= uint64_t(stride) * elem_bytes;
  uint32_t align = 1;
  while (align < 256 && bits % (uint64_t(align) * 2) == 0) align *= 2;
  return align;
}

template <typename V>
void set_layout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, V value) {
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)));
}

// A column-major layout of rows x cols with leading dimension ld, `batch` matrices `stride` apart.
cublasLtMatrixLayout_t make_layout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t(batch));
    set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t(stride));  // 0: one shared matrix
  }
  return layout;
}

void set_bias_pointer(cublasLtMatmulDesc_t desc, const void* bias) {
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
}

// `bias` (epilogue plans only) is the pointer of the call that builds the plan: the heuristic
// reads its alignment, which the key records.
GemmPlan make_plan(DeviceGemmState& st, const GemmKey& key, cudaDataType data_type, cudaDataType scale_type,
                   const void* bias) {
  GemmPlan p;
  try {
    const auto compute = cublasComputeType_t(key.compute);
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, scale_type));
    // cuBLASLt computes D [n,m] = op_a(our B) op_b(our A) in column-major terms.
    const int32_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    const bool fused = key.epilogue != CUBLASLT_EPILOGUE_DEFAULT;
    if (fused) {
      // The bias's element type is left at its default, the type of D (our C) for every dtype
      // here (cuBLASLt documents other defaults only for integer and fp8 outputs), which is
      // the bias tensor's dtype: linear checks that bias, x and w share one dtype.
      const uint32_t epilogue = uint32_t(key.epilogue);
      TANDEM_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      set_bias_pointer(p.desc, bias);
    }
    // Our B as stored: row-major [k,n] = column-major [n,k] (ld n), or row-major [n,k] = column-major [k,n] (ld k).
    p.lt_a = key.trans_b ? make_layout(data_type, key.k, key.n, key.k, key.batch, key.stride_b)
                         : make_layout(data_type, key.n, key.k, key.n, key.batch, key.stride_b);
    // Our A as stored: row-major [m,k] = column-major [k,m] (ld k), or row-major [k,m] = column-major [m,k] (ld m).
    p.lt_b = key.trans_a ? make_layout(data_type, key.m, key.k, key.m, key.batch, key.stride_a)
                         : make_layout(data_type, key.k, key.m, key.k, key.batch, key.stride_a);
    p.lt_c = make_layout(data_type, key.n, key.m, key.n, key.batch, key.stride_c);

    cublasLtMatmulPreference_t pref = nullptr;
    TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
      if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
    };
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(kWorkspaceBytes));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);  // cuBLASLt's A is our B
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    // Split-K: no in-place reduction (partial sums added into D as the pieces finish), which
    // other users of cuBLASLt report as not reproducible; half types keep partials in float.
    const bool half = data_type == CUDA_R_16F || data_type == CUDA_R_16BF;
    set_pref(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             uint32_t(half ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                           : CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_INPLACE));
    if (status != CUBLAS_STATUS_SUCCESS) {  // a preference attribute was refused: a real error
      cublasLtMatmulPreferenceDestroy(pref);
      TANDEM_CUBLAS_CHECK(status);
    }
    status = cublasLtMatmulAlgoGetHeuristic(st.handle, p.desc, p.lt_a, p.lt_b, p.lt_c, p.lt_c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    // An epilogue problem without an algorithm is an answer, not an error: "not supported", no
    // result, or "invalid value" (which PyTorch's addmm notes the heuristic answering for a
    // bias epilogue with a one-row or one-column operand; linear_cuda.cu does not ask
    // for those shapes either).
    const bool no_algo = status == CUBLAS_STATUS_NOT_SUPPORTED ||
                         (status == CUBLAS_STATUS_SUCCESS && (found < 1 || result.state != CUBLAS_STATUS_SUCCESS));
    if (fused && (no_algo || status == CUBLAS_STATUS_INVALID_VALUE)) {
      destroy_plan(p);
      p.has_algo = false;
      return p;
    }
    TANDEM_CUBLAS_CHECK(status);
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      throw DeviceError("gemm: cuBLASLt has no algorithm for " + std::string(dtype_name(DType(key.dtype))) + " m=" +
                        std::to_string(key.m) + " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k) +
                        " batch=" + std::to_string(key.batch) + " trans_a=" + std::to_string(key.trans_a) +
                        " trans_b=" + std::to_string(key.trans_b) + " (operand alignments " +
                        std::to_string(key.align_a) + "/" + std::to_string(key.align_b) + "/" +
                        std::to_string(key.align_c) + " bytes)");
    p.algo = result.algo;
    p.workspace = result.workspaceSize;
    return p;
  } catch (...) {
    destroy_plan(p);
    throw;
  }
}

}  // namespace

bool gemm_lt::lt_matmul(DType dtype, const DTypeInfo& info, bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b,
                        double beta, void* c, int64_t stride_c, int64_t batch, Epilogue epilogue, const void* bias) {
  const bool fused = epilogue != Epilogue::None;
  if (fused && (bias == nullptr || batch != 1 || beta != 0))
    throw DeviceError("gemm: the bias epilogue takes one product, a bias pointer and beta = 0");
  const int device = cuda::current_device();
  GemmKey key{int(dtype), int(info.compute), trans_a, trans_b, m, n, k,
              batch > 1 ? stride_a : 0, batch > 1 ? stride_b : 0, batch > 1 ? stride_c : 0, batch,
              alignment_of(a, stride_a, batch, info.bytes), alignment_of(b, stride_b, batch, info.bytes),
              alignment_of(c, stride_c, batch, info.bytes),
              fused ? int(CUBLASLT_EPILOGUE_BIAS) : int(CUBLASLT_EPILOGUE_DEFAULT),
              fused ? alignment_of(bias, 0, 1, info.bytes) : 0};
  std::lock_guard<std::mutex> lock(g_gemm_mutex);
  DeviceGemmState& st = gemm_state(device);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    if (st.plans.size() >= kMaxPlans) {
      for (auto& [k_, plan] : st.plans) destroy_plan(plan);
      st.plans.clear();
    }
    it = st.plans.emplace(key, make_plan(st, key, info.data, info.scale, bias)).first;
  }
  GemmPlan& p = it->second;
  if (!p.has_algo) return false;
  if (fused) set_bias_pointer(p.desc, bias);  // this call's bias (the plan keeps the first one's)
  const float alpha_f = float(alpha), beta_f = float(beta);
  const void* alpha_p = info.scale == CUDA_R_64F ? static_cast<const void*>(&alpha) : &alpha_f;
  const void* beta_p = info.scale == CUDA_R_64F ? static_cast<const void*>(&beta) : &beta_f;
  const cublasStatus_t status = cublasLtMatmul(st.handle, p.desc, alpha_p, b, p.lt_a, a, p.lt_b, beta_p, c, p.lt_c, c,
                                               p.lt_c, &p.algo, st.workspace, p.workspace, cuda::current_stream());
  if (fused && status == CUBLAS_STATUS_NOT_SUPPORTED) {  // refused before launching: remember, fall back
    destroy_plan(p);
    p.has_algo = false;
    return false;
  }
  TANDEM_CUBLAS_CHECK(status);
  return true;
}

}  // namespace tandem
