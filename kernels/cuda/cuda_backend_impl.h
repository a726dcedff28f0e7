// The CUDA backend's class: the same kernel methods as the CPU reference (kernels/cpu), each
// family in its own file: memory_cuda.cu (memory, copies, fill), elementwise_cuda.cu (casts,
// unary, binary, where), reduce_cuda.cu, softmax_loss_cuda.cu (softmax, NLL rows),
// gemm_cuda.cu (cuBLASLt), gemm_epilogue_cuda.cu (linear forward with cuBLASLt's bias
// epilogue), conv_pool_cuda.cu (cuDNN conv, pooling), norm_cuda.cu,
// random_embedding_cuda.cu (Philox fill, dropout, embedding), optim_cuda.cu (fused updates),
// compress_min_max_uint8_cuda.cu (8-bit min/max block compression).
// Kernels run on cuda::current_stream() (kernels/cuda/cuda_context.h).
#pragma once
#include "kernels/backend.h"

namespace tandem {

class CudaBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }
  const char* name() const override { return "cuda"; }
  void* allocate(size_t nbytes, int device_index) override;
  void deallocate(void* p, size_t nbytes, int device_index) override;
  void copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_on_host, bool src_on_host,
                  int device_index) override;
  void synchronize(int device_index) override;

  void copy_strided(const TensorView& src, const TensorView& out) override;
  void fill(const TensorView& out, double value) override;
  void unary(UnaryOp op, const TensorView& x, const TensorView& y, const UnaryParams& p) override;
  void unary_backward(UnaryOp op, const TensorView& x, const TensorView& y, const TensorView& gy, const TensorView& gx, const UnaryParams& p) override;
  void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) override;
  void where(const TensorView& cond, const TensorView& a, const TensorView& b, const TensorView& out) override;
  void reduce(ReduceOp op, const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out) override;
  void argmax(const TensorView& x, int64_t outer, int64_t r, int64_t inner, const TensorView& out, bool is_min) override;
  void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t stride_a, const void* b, int64_t stride_b, double beta, void* c, int64_t stride_c, int64_t batch) override;
  void linear_forward(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y) override;
  void softmax(const TensorView& x, int64_t rows, int64_t cols, const TensorView& y, bool log) override;
  void softmax_backward(const TensorView& y, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& gx, bool log) override;
  void conv2d(const TensorView& x, const TensorView& w, const TensorView* bias, const Conv2dParams& p, const TensorView& y) override;
  void conv2d_backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p, const TensorView* gx, const TensorView* gw, const TensorView* gb) override;
  void max_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y, const TensorView& indices) override;
  void max_pool2d_backward(const TensorView& gy, const TensorView& indices, const TensorView& gx) override;
  void avg_pool2d(const TensorView& x, const Pool2dParams& p, const TensorView& y) override;
  void avg_pool2d_backward(const TensorView& gy, const Pool2dParams& p, const TensorView& gx) override;
  void batch_norm_train(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) override;
  void batch_norm_apply(const TensorView& x, int64_t outer, int64_t c, int64_t inner, const TensorView& mean, const TensorView& invstd, const TensorView* gamma, const TensorView* beta, const TensorView& y) override;
  void batch_norm_backward(const TensorView& x, const TensorView& gy, int64_t outer, int64_t c, int64_t inner, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) override;
  void layer_norm(const TensorView& x, int64_t rows, int64_t cols, const TensorView* gamma, const TensorView* beta, double eps, const TensorView& y, const TensorView& save_mean, const TensorView& save_invstd) override;
  void layer_norm_backward(const TensorView& x, const TensorView& gy, int64_t rows, int64_t cols, const TensorView& save_mean, const TensorView& save_invstd, const TensorView* gamma, const TensorView& gx, const TensorView* ggamma, const TensorView* gbeta) override;
  void random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal, double a, double b) override;
  void dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset, const TensorView& y, const TensorView& mask) override;
  void embedding(const TensorView& weight, const TensorView& idx, const TensorView& y) override;
  void embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw) override;
  void nll_rows(const TensorView& logp, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& loss, const TensorView& valid) override;
  void nll_rows_backward(const TensorView& gloss, const TensorView& target, int64_t ignore_index, double label_smoothing, const TensorView& glogp) override;
  void sgd_step(const TensorView& param, const TensorView& grad, const TensorView* momentum_buf, double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) override;
  void adam_step(const TensorView& param, const TensorView& grad, const TensorView& exp_avg, const TensorView& exp_avg_sq, double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override;
  void sgd_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads, const std::vector<TensorView>& momentum_bufs, double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) override;
  void adam_step_multi(const std::vector<TensorView>& params, const std::vector<TensorView>& grads, const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs, double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override;
  void compress_min_max_uint8(const TensorView& x, int64_t block, const TensorView& packed) override;
  void decompress_min_max_uint8(const TensorView& packed, int64_t block, const TensorView& out) override;

  // attention (kernels/cuda/attention_cuda.cu)
  void attention_forward(const TensorView& q, const TensorView& k, const TensorView& v, const AttentionParams& p, const TensorView& out, const TensorView& lse) override;
  void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out, const TensorView& gout, const TensorView& lse, const AttentionParams& p, const TensorView& gq, const TensorView& gk, const TensorView& gv) override;
};

}  // namespace tandem
