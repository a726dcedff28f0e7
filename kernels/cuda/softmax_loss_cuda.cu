// STUB: forwards to Backend's default (DeviceError "not implemented") until this family's kernels land.
#include "kernels/cuda/cuda_backend_impl.h"

namespace tandem {

void CudaBackend::softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log) { Backend::softmax(x, rows, cols, y, log); }
void CudaBackend::softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& gx, bool log) { Backend::softmax_backward(y, gy, rows, cols, gx, log); }
void CudaBackend::nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& loss, const TensorView& valid) { Backend::nll_rows(logp, target, ignore_index, label_smoothing, loss, valid); }
void CudaBackend::nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& glogp) { Backend::nll_rows_backward(gloss, target, ignore_index, label_smoothing, glogp); }

}  // namespace tandem
