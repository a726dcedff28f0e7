// Private to the GEMM family (gemm_cuda.cu, linear_cuda.cu): one cuBLASLt call with the
// cached plans of gemm_cuda.cu, optionally with cuBLASLt's bias epilogue.
#pragma once
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace tandem::gemm_lt {

// cuBLASLt's types for one Tandem dtype: data, scale (alpha/beta), compute, element bytes.
struct DTypeInfo {
  cudaDataType data, scale;
  cublasComputeType_t compute;
  size_t bytes;
};
// float32 (TF32 compute when allow_tf32() is on), float64, float16 and bfloat16 (float
// compute and scale); other dtypes throw DTypeError.
DTypeInfo dtype_info(DType dtype);

enum class Epilogue {
  None,  // C = alpha op(A) op(B) + beta C
  Bias,  // C = alpha op(A) op(B) + bias[j] in every row i of C (beta must be 0)
};

// One cuBLASLt call computing Backend::gemm's row-major product for `batch` (fits int32)
// matrices with the given batch strides; m, n and k are below 2^31 and k > 0.
// With Epilogue::Bias, `bias` holds n elements of the dtype (row-major C's columns are
// cuBLASLt's D rows, which is the dimension its bias vector follows) and batch must be 1.
// Returns true when it queued the product. Returns false, queueing nothing, when cuBLASLt has
// no algorithm for an epilogue problem (that answer is cached per problem, so asking again is
// cheap); the caller then computes it another way. Without an epilogue that case throws
// DeviceError, as does every other cuBLASLt failure.
bool lt_matmul(DType dtype, const DTypeInfo& info, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c,
               int64_t stride_c, int64_t batch, Epilogue epilogue = Epilogue::None, const void* bias = nullptr);

}  // namespace tandem::gemm_lt
