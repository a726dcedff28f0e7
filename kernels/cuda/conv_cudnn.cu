// conv_library.h through cuDNN's convolution API (cudnnConvolutionForward, BackwardData,
// BackwardFilter; NCHW, groups = 1, cross-correlation like the CPU's im2col).
//
// Algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7) rank the algorithms for a problem; we
// take the first one that succeeded, is deterministic (some backward algorithms sum with
// atomics, so their results vary run to run), runs in the math mode we allow and needs at most
// kMaxWorkspaceBytes of workspace. The choice and its workspace size are cached per problem.
// Math modes: float32 uses FMA math (plain float32) unless allow_tf32() is on (default math,
// which lets cuDNN use TF32 tensor cores); float16/bfloat16 use tensor-op math and accumulate in
// float; float64 uses default math.
//
// Built without cuDNN (TANDEM_WITH_CUDNN=0), every entry throws DeviceError saying how to get it.
#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/conv_library.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/kernel_utils.cuh"

#if TANDEM_WITH_CUDNN
#include <cudnn.h>
#endif

namespace tandem {

#if TANDEM_WITH_CUDNN

namespace {

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) cuda::throw_call_failed(call, file, line, cudnnGetErrorString(status));
}
#define TANDEM_CUDNN_CHECK(call) check_cudnn((call), #call, __FILE__, __LINE__)

constexpr size_t kMaxWorkspaceBytes = size_t(512) << 20;
constexpr int kMaxDevices = 64;

// ---------------------------------------------------------------- cuDNN handle and descriptors
std::mutex g_conv_mutex;  // guards the handles and the algorithm cache
std::array<cudnnHandle_t, kMaxDevices> g_handles{};

cudnnHandle_t cudnn_handle(int device) {  // call with g_conv_mutex held
  if (device < 0 || device >= kMaxDevices) throw DeviceError("conv2d: cuda:" + std::to_string(device) + " is out of range");
  cudnnHandle_t& h = g_handles[size_t(device)];
  if (!h) {
    cudnnHandle_t created = nullptr;
    TANDEM_CUDNN_CHECK(cudnnCreate(&created));
    const cudnnStatus_t bound = cudnnSetStream(created, cuda::compute_stream(device));
    if (bound != CUDNN_STATUS_SUCCESS) cudnnDestroy(created);
    TANDEM_CUDNN_CHECK(bound);
    h = created;  // kept for the process: destroying at exit could run after the context is gone
  }
  return h;
}

int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw ShapeError(std::string("conv2d on CUDA: ") + what + " = " + std::to_string(v) + " does not fit cuDNN's int");
  return int(v);
}

struct ConvProblem {
  DType dtype;
  bool tf32;
  int64_t N, C, H, W, OC, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
  auto tied() const { return std::tie(dtype, tf32, N, C, H, W, OC, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw); }
};

ConvProblem problem_of(const TensorView& x, const TensorView& w, const TensorView& y, const Conv2dParams& p) {
  return {x.dtype, x.dtype == DType::Float32 && allow_tf32(),
          x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2], w.shape[3], y.shape[2], y.shape[3],
          p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w};
}

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  throw DTypeError(std::string("conv2d on CUDA supports float32, float64, float16 and bfloat16, got ") + dtype_name(t));
}

// The math mode the descriptor starts with, and whether an algorithm's reported mode is allowed.
cudnnMathType_t requested_math(const ConvProblem& pr) {
  switch (pr.dtype) {
    case DType::Float32: return pr.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    case DType::Float16:
    case DType::BFloat16: return CUDNN_TENSOR_OP_MATH;
    default: return CUDNN_DEFAULT_MATH;
  }
}
bool math_allowed(const ConvProblem& pr, cudnnMathType_t m) {
  if (pr.dtype != DType::Float32) return true;
  if (!pr.tf32) return m == CUDNN_FMA_MATH;        // no tensor cores: float32 products and sums
  return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;  // TF32 yes, down-conversion to float16 no
}

// The four cuDNN descriptors of one problem, destroyed with the object.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  explicit ConvDescriptors(const ConvProblem& pr) {
    try {
      const cudnnDataType_t t = cudnn_type(pr.dtype);
      const cudnnDataType_t compute = pr.dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
      TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
      TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
      TANDEM_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
      TANDEM_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
      TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, t, checked_int(pr.N, "N"),
                                                    checked_int(pr.C, "C"), checked_int(pr.H, "H"),
                                                    checked_int(pr.W, "W")));
      TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t, checked_int(pr.N, "N"),
                                                    checked_int(pr.OC, "out channels"), checked_int(pr.OH, "OH"),
                                                    checked_int(pr.OW, "OW")));
      TANDEM_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NCHW, checked_int(pr.OC, "out channels"),
                                                    checked_int(pr.C, "C"), checked_int(pr.KH, "KH"),
                                                    checked_int(pr.KW, "KW")));
      TANDEM_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          conv, checked_int(pr.ph, "pad_h"), checked_int(pr.pw, "pad_w"), checked_int(pr.sh, "stride_h"),
          checked_int(pr.sw, "stride_w"), checked_int(pr.dh, "dilation_h"), checked_int(pr.dw, "dilation_w"),
          CUDNN_CROSS_CORRELATION, compute));
      TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, requested_math(pr)));
    } catch (...) {
      release();
      throw;
    }
  }
  ~ConvDescriptors() { release(); }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

 private:
  void release() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
    conv = nullptr, w = nullptr, y = nullptr, x = nullptr;
  }
};

// ---------------------------------------------------------------- algorithm choice
enum class ConvPass { Forward, BackwardData, BackwardFilter };
const char* pass_name(ConvPass pass) {
  return pass == ConvPass::Forward ? "forward" : pass == ConvPass::BackwardData ? "backward data" : "backward filter";
}

struct ConvChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

struct ChoiceKey {
  ConvPass pass;
  int device;
  ConvProblem problem;
  bool operator<(const ChoiceKey& o) const {
    return std::tie(pass, device) < std::tie(o.pass, o.device) ||
           (std::tie(pass, device) == std::tie(o.pass, o.device) && problem.tied() < o.problem.tied());
  }
};
std::map<ChoiceKey, ConvChoice> g_choices;  // guarded by g_conv_mutex

// Index of the algorithm to use among cuDNN's ranked results: the first that succeeded, is
// deterministic, has an allowed math mode and fits the workspace cap; failing the cap, the
// smallest such workspace. -1 when none qualifies.
template <typename Perf>
int pick(const std::vector<Perf>& perf, int count, const ConvProblem& pr) {
  int smallest = -1;
  for (int i = 0; i < count; ++i) {
    const Perf& r = perf[size_t(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.determinism != CUDNN_DETERMINISTIC || !math_allowed(pr, r.mathType))
      continue;
    if (r.memory <= kMaxWorkspaceBytes) return i;
    if (smallest < 0 || r.memory < perf[size_t(smallest)].memory) smallest = i;
  }
  return smallest;
}

// Ranks the algorithms of `pass` (cached) and leaves d.conv in the chosen math mode.
ConvChoice choose(cudnnHandle_t h, ConvPass pass, const ConvProblem& pr, int device, const ConvDescriptors& d) {
  const ChoiceKey key{pass, device, pr};
  auto it = g_choices.find(key);
  if (it == g_choices.end()) {
    int max_count = 0, count = 0, best = -1;
    ConvChoice c;
    // Rank under the problem's requested math mode: `d` may still carry the mode another pass
    // chose (backward data before backward filter), which would make this pass's cached choice
    // depend on the order the passes first ran.
    TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, requested_math(pr)));
    if (pass == ConvPass::Forward) {
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, max_count, &count, perf.data()));
      if ((best = pick(perf, count, pr)) >= 0) c = {int(perf[size_t(best)].algo), perf[size_t(best)].mathType, 0};
    } else if (pass == ConvPass::BackwardData) {
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
      TANDEM_CUDNN_CHECK(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, max_count, &count, perf.data()));
      if ((best = pick(perf, count, pr)) >= 0) c = {int(perf[size_t(best)].algo), perf[size_t(best)].mathType, 0};
    } else {
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
      TANDEM_CUDNN_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, max_count, &count, perf.data()));
      if ((best = pick(perf, count, pr)) >= 0) c = {int(perf[size_t(best)].algo), perf[size_t(best)].mathType, 0};
    }
    if (best < 0)
      throw DeviceError(std::string("conv2d ") + pass_name(pass) + ": cuDNN offers no deterministic algorithm for " +
                        dtype_name(pr.dtype) + " x [" + std::to_string(pr.N) + "," + std::to_string(pr.C) + "," +
                        std::to_string(pr.H) + "," + std::to_string(pr.W) + "], w [" + std::to_string(pr.OC) + "," +
                        std::to_string(pr.C) + "," + std::to_string(pr.KH) + "," + std::to_string(pr.KW) + "] (" +
                        std::to_string(count) + " candidates)");
    TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
    if (pass == ConvPass::Forward)
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                                 cudnnConvolutionFwdAlgo_t(c.algo), &c.workspace));
    else if (pass == ConvPass::BackwardData)
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, d.w, d.y, d.conv, d.x, cudnnConvolutionBwdDataAlgo_t(c.algo), &c.workspace));
    else
      TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, d.x, d.y, d.conv, d.w, cudnnConvolutionBwdFilterAlgo_t(c.algo), &c.workspace));
    it = g_choices.emplace(key, c).first;
  }
  TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, it->second.math));
  return it->second;
}

// Device scratch for one cuDNN call, returned to the allocator once the call is queued (the
// allocator hands it out again only to work queued later on the same stream).
class Workspace {
 public:
  Workspace(size_t bytes, int device) : bytes_(bytes), device_(device) {
    if (bytes_) ptr_ = cuda_backend().allocate(bytes_, device_);
  }
  ~Workspace() {
    if (ptr_) cuda_backend().deallocate(ptr_, bytes_, device_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }

 private:
  size_t bytes_;
  int device_;
  void* ptr_ = nullptr;
};

// alpha = 1, beta = 0 in the scaling type cuDNN wants (double for float64 data, else float).
struct Scales {
  float f1 = 1.f, f0 = 0.f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scales(DType t) : dbl(t == DType::Float64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

}  // namespace

void conv_library::check_dtype(DType dtype) { cudnn_type(dtype); }

void conv_library::forward(const TensorView& x, const TensorView& w, const Conv2dParams& p, const TensorView& y) {
  const ConvProblem pr = problem_of(x, w, y, p);
  const int device = cuda::current_device();
  ConvDescriptors d(pr);
  const Scales s(x.dtype);
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  cudnnHandle_t h = cudnn_handle(device);
  const ConvChoice c = choose(h, ConvPass::Forward, pr, device, d);
  Workspace ws(c.workspace, device);
  TANDEM_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(), d.x, x.data, d.w, w.data, d.conv,
                                             cudnnConvolutionFwdAlgo_t(c.algo), ws.get(), c.workspace, s.zero(), d.y,
                                             y.data));
}

void conv_library::backward(const TensorView& x, const TensorView& w, const TensorView& gy, const Conv2dParams& p,
                            const TensorView* gx, const TensorView* gw) {
  const ConvProblem pr = problem_of(x, w, gy, p);
  const int device = cuda::current_device();
  ConvDescriptors d(pr);
  const Scales s(x.dtype);
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  cudnnHandle_t h = cudnn_handle(device);
  if (gx) {
    const ConvChoice c = choose(h, ConvPass::BackwardData, pr, device, d);
    Workspace ws(c.workspace, device);
    TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(), d.w, w.data, d.y, gy.data, d.conv,
                                                    cudnnConvolutionBwdDataAlgo_t(c.algo), ws.get(), c.workspace,
                                                    s.zero(), d.x, gx->data));
  }
  if (gw) {
    const ConvChoice c = choose(h, ConvPass::BackwardFilter, pr, device, d);
    Workspace ws(c.workspace, device);
    TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, s.one(), d.x, x.data, d.y, gy.data, d.conv,
                                                      cudnnConvolutionBwdFilterAlgo_t(c.algo), ws.get(), c.workspace,
                                                      s.zero(), d.w, gw->data));
  }
}

#else  // built without cuDNN

namespace {
[[noreturn]] void no_cudnn() {
  throw DeviceError(
      "conv2d on CUDA needs cuDNN, but Tandem was built without cuDNN: install cuDNN 9 for CUDA 13 (from "
      "NVIDIA's CUDA apt repository: apt-get install libcudnn9-dev-cuda-13), then reconfigure and rebuild Tandem");
}
}  // namespace

void conv_library::check_dtype(DType) { no_cudnn(); }
void conv_library::forward(const TensorView&, const TensorView&, const Conv2dParams&, const TensorView&) { no_cudnn(); }
void conv_library::backward(const TensorView&, const TensorView&, const TensorView&, const Conv2dParams&,
                            const TensorView*, const TensorView*) {
  no_cudnn();
}

#endif  // TANDEM_WITH_CUDNN

}  // namespace tandem
