// Random fills, dropout and embedding on CUDA.
//
// Random numbers come from base/philox.h, the same header the CPU uses: element i of a
// draw at (seed, offset) takes lane i % 4 of Philox block offset + i / 4. Here one thread
// computes one Philox block and writes its 4 elements, so each block of 4 costs one Philox
// evaluation (the CPU evaluates it per element). Uniforms are exact 24-bit fractions, normals
// come from philox::normal_pair (IEEE-only double arithmetic), and the affine map
// a + (b - a) u / a + b z is one fused multiply-add in double, as the CPU's expression compiles
// under -march=native; for (a, b) = (0, 1), the only pair the op front ends pass, both forms
// are exact. So float32/float64 draws and dropout masks are bit-identical to the CPU's.
//
// Embedding backward is deterministic without float atomics: the indices are sorted stably
// (CUB radix sort of (index, position) pairs), runs of equal indices found by run-length
// encoding, and one block per distinct index adds its rows of gy in increasing position
// order, the CPU's order, so float32/float64 sums equal the CPU's bit for bit. Cost: a radix
// sort of n (int64 key, int32 value) pairs over ceil(log2(num_embeddings)) bits, a run-length
// encode and a scan of n ints, then one read of gy; a row repeated k times is summed serially
// by one block (k steps), which only a very skewed batch makes long.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <climits>
#include <string>

#include "base/philox.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/step_graph.h"

namespace tandem {
namespace {

using cuda::from_acc;
using cuda::to_acc;
using cuda::norm::VecN;

__device__ __forceinline__ philox::U32x4 philox_block(uint64_t seed, uint64_t offset, int64_t block) {
  const uint64_t counter = offset + uint64_t(block);
  return philox::philox4x32_10({{uint32_t(counter), uint32_t(counter >> 32), 0u, 0u}}, uint32_t(seed),
                               uint32_t(seed >> 32));
}

// Writes the (up to) 4 values of Philox block j: a full aligned block as one vector store.
template <typename V>
__device__ __forceinline__ void store_block(V* out, int64_t j, int64_t n, const V (&v)[4], bool vector_ok) {
  const int64_t i = 4 * j;
  if (vector_ok && i + 4 <= n) {
    *reinterpret_cast<VecN<V, 4>*>(out + i) = VecN<V, 4>{{v[0], v[1], v[2], v[3]}};
  } else {
#pragma unroll
    for (int l = 0; l < 4; ++l)
      if (i + l < n) out[i + l] = v[l];
  }
}

template <typename T>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    random_fill_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, bool normal, double a, double b,
                       bool vector_ok) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < blocks; j += int64_t(blockDim.x) * gridDim.x) {
    const philox::U32x4 r = philox_block(seed, offset, j);
    double v[4];
    if (normal) {
      float z[4];
      philox::normal_pair(r.v[0], r.v[1], z[0], z[1]);
      philox::normal_pair(r.v[2], r.v[3], z[2], z[3]);
#pragma unroll
      for (int l = 0; l < 4; ++l) v[l] = __fma_rn(b, double(z[l]), a);
    } else {
#pragma unroll
      for (int l = 0; l < 4; ++l) v[l] = __fma_rn(b - a, double(philox::uniform01(r.v[l])), a);
    }
    T t[4];
#pragma unroll
    for (int l = 0; l < 4; ++l) t[l] = from_acc<T>(v[l]);
    store_block(out, j, n, t, vector_ok);
  }
}

// mask = uniform >= p; y = mask ? x * scale : 0, scale = 1 / (1 - p) in the accumulation type.
template <typename T>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    dropout_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint64_t offset, float p,
                   cuda::acc_t<T> scale, bool vector_ok) {
  using A = cuda::acc_t<T>;
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < blocks; j += int64_t(blockDim.x) * gridDim.x) {
    const philox::U32x4 r = philox_block(seed, offset, j);
    const int64_t i = 4 * j;
    T in[4];
    if (vector_ok && i + 4 <= n) {
      const VecN<T, 4> vx = *reinterpret_cast<const VecN<T, 4>*>(x + i);
#pragma unroll
      for (int l = 0; l < 4; ++l) in[l] = vx.v[l];
    } else {
#pragma unroll
      for (int l = 0; l < 4; ++l) in[l] = i + l < n ? x[i + l] : from_acc<T>(A(0));
    }
    T out[4];
    uint8_t keep[4];
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      keep[l] = philox::uniform01(r.v[l]) >= p;
      out[l] = keep[l] ? from_acc<T>(A(to_acc(in[l])) * scale) : from_acc<T>(A(0));
    }
    store_block(y, j, n, out, vector_ok);
    store_block(mask, j, n, keep, vector_ok);
  }
}

// y row i = weight row idx[i], moved in units of V (the widest that divides the row and
// both pointers' alignment).
template <typename V>
__global__ void __launch_bounds__(cuda::kElementwiseThreads)
    embedding_kernel(const V* weight, const int64_t* idx, V* y, int64_t n, int64_t row_units) {
  const int64_t total = n * row_units;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += int64_t(blockDim.x) * gridDim.x) {
    const int64_t i = k / row_units, u = k - i * row_units;
    y[k] = weight[idx[i] * row_units + u];
  }
}

__global__ void iota_kernel(int32_t* out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    out[i] = int32_t(i);
}

// Block per run r of equal sorted indices: gw[row, :] = sum over the run's positions (in
// increasing order) of gy[position, :]. Runs past *num_runs do not exist.
template <typename T>
__global__ void embedding_backward_kernel(const T* gy, const uint64_t* run_rows, const int32_t* run_lengths,
                                          const int32_t* run_starts, const int32_t* num_runs,
                                          const int32_t* positions, T* gw, int64_t dim) {
  using A = cuda::acc_t<T>;
  const int64_t runs = *num_runs;
  for (int64_t r = blockIdx.x; r < runs; r += gridDim.x) {
    const int64_t begin = run_starts[r], end = begin + run_lengths[r];
    T* out = gw + int64_t(run_rows[r]) * dim;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      A acc = A(0);
      for (int64_t k = begin; k < end; ++k) acc += A(to_acc(gy[int64_t(positions[k]) * dim + j]));
      out[j] = from_acc<T>(acc);
    }
  }
}

template <typename T>
bool vector_aligned(const void* p) {
  return cuda::norm::aligned_to(p, 4 * sizeof(T));
}

}  // namespace

void CudaBackend::random_fill(const TensorView& out, uint64_t seed, uint64_t offset, bool normal, double a, double b) {
  cuda::count_random_launch();  // a CUDA graph would replay this offset (step_graph.h)
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::dispatch_float(out.dtype, "random_fill", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    cuda::launch<random_fill_kernel<T>>(cuda::grid_for((n + 3) / 4), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                        out.ptr<T>(), n, seed, offset, normal, a, b, vector_aligned<T>(out.data));
    TANDEM_CUDA_CHECK_LAUNCH("random_fill_kernel");
  });
}

void CudaBackend::dropout(const TensorView& x, double p, uint64_t seed, uint64_t offset, const TensorView& y,
                          const TensorView& mask) {
  cuda::count_random_launch();
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::dispatch_float(x.dtype, "dropout", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    using A = cuda::acc_t<T>;
    const bool vector_ok = vector_aligned<T>(x.data) && vector_aligned<T>(y.data) && vector_aligned<uint8_t>(mask.data);
    cuda::launch<dropout_kernel<T>>(cuda::grid_for((n + 3) / 4), cuda::kElementwiseThreads, 0, cuda::current_stream(), x.ptr<T>(),
                                    y.ptr<T>(), mask.ptr<uint8_t>(), n, seed, offset, float(p), A(1.0 / (1.0 - p)),
                                    vector_ok);
    TANDEM_CUDA_CHECK_LAUNCH("dropout_kernel");
  });
}

void CudaBackend::embedding(const TensorView& weight, const TensorView& idx, const TensorView& y) {
  const int64_t n = idx.numel(), dim = weight.shape[1];
  const int64_t row_bytes = dim * int64_t(dtype_size(weight.dtype));
  if (n == 0 || row_bytes == 0) return;
  auto launch = [&](auto unit_tag) {
    using V = TANDEM_CUDA_TYPE(unit_tag);
    const int64_t units = row_bytes / int64_t(sizeof(V));
    cuda::launch<embedding_kernel<V>>(cuda::grid_for(n * units), cuda::kElementwiseThreads, 0, cuda::current_stream(),
                                      static_cast<const V*>(weight.data), idx.ptr<int64_t>(), static_cast<V*>(y.data),
                                      n, units);
    TANDEM_CUDA_CHECK_LAUNCH("embedding_kernel");
  };
  auto fits = [&](size_t unit) {
    return row_bytes % int64_t(unit) == 0 && cuda::norm::aligned_to(weight.data, unit) &&
           cuda::norm::aligned_to(y.data, unit);
  };
  if (fits(16)) launch(cuda::TypeTag<uint4>{});
  else if (fits(8)) launch(cuda::TypeTag<uint2>{});
  else if (fits(4)) launch(cuda::TypeTag<uint32_t>{});
  else if (fits(2)) launch(cuda::TypeTag<uint16_t>{});
  else launch(cuda::TypeTag<uint8_t>{});
}

void CudaBackend::embedding_backward(const TensorView& gy, const TensorView& idx, const TensorView& gw) {
  const int64_t n = idx.numel(), num_rows = gw.shape[0], dim = gw.shape[1];
  cudaStream_t stream = cuda::current_stream();
  cuda::dispatch_float(gy.dtype, "embedding_backward", [&](auto tag) {
    using T = TANDEM_CUDA_TYPE(tag);
    if (gw.numel() > 0)  // rows no index names stay zero; all-zero bits are +0 in every float dtype
      TANDEM_CUDA_CHECK(cudaMemsetAsync(gw.data, 0, size_t(gw.numel()) * sizeof(T), stream));
    if (n == 0 || dim == 0) return;
    if (n > INT_MAX)
      throw ShapeError("embedding_backward on CUDA supports at most " + std::to_string(INT_MAX) + " indices, got " +
                       std::to_string(n));
    const int num_items = int(n);
    int end_bit = 1;  // indices are in [0, num_rows): sort only the bits they use
    while (end_bit < 64 && (uint64_t(num_rows - 1) >> end_bit) != 0) ++end_bit;

    // Scratch: sorted keys, unique keys (n uint64 each); positions in/out, run lengths, run
    // starts (n int32 each), the run count; then CUB's temporary storage.
    const auto* keys_in = idx.ptr<uint64_t>();  // valid indices are non-negative
    size_t sort_bytes = 0, encode_bytes = 0, scan_bytes = 0;
    TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys_in, static_cast<uint64_t*>(nullptr),
                                                      static_cast<const int32_t*>(nullptr),
                                                      static_cast<int32_t*>(nullptr), num_items, 0, end_bit, stream));
    TANDEM_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, static_cast<const uint64_t*>(nullptr),
                                                         static_cast<uint64_t*>(nullptr),
                                                         static_cast<int32_t*>(nullptr),
                                                         static_cast<int32_t*>(nullptr), num_items, stream));
    TANDEM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int32_t*>(nullptr),
                                                    static_cast<int32_t*>(nullptr), num_items, stream));
    const size_t temp_bytes = std::max({sort_bytes, encode_bytes, scan_bytes});
    auto round_up = [](size_t v) { return (v + 255) / 256 * 256; };
    const size_t keys_bytes = round_up(size_t(n) * sizeof(uint64_t)), ints_bytes = round_up(size_t(n) * sizeof(int32_t));
    cuda::norm::DeviceScratch scratch(2 * keys_bytes + 4 * ints_bytes + 256 + round_up(temp_bytes));
    char* base = scratch.as<char>();
    auto* sorted_keys = reinterpret_cast<uint64_t*>(base);
    auto* run_rows = reinterpret_cast<uint64_t*>(base + keys_bytes);
    auto* positions_in = reinterpret_cast<int32_t*>(base + 2 * keys_bytes);
    auto* positions = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + ints_bytes);
    auto* run_lengths = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + 2 * ints_bytes);
    auto* run_starts = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + 3 * ints_bytes);
    auto* num_runs = reinterpret_cast<int32_t*>(base + 2 * keys_bytes + 4 * ints_bytes);
    void* temp = base + 2 * keys_bytes + 4 * ints_bytes + 256;

    cuda::launch<iota_kernel>(cuda::grid_for(n), cuda::kElementwiseThreads, 0, stream, positions_in, n);
    TANDEM_CUDA_CHECK_LAUNCH("iota_kernel");
    // Stable: equal indices keep increasing positions.
    size_t bytes = sort_bytes;
    TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, sorted_keys, positions_in, positions,
                                                      num_items, 0, end_bit, stream));
    // Lengths past the run count are left unwritten; zero them so the scan reads defined values.
    TANDEM_CUDA_CHECK(cudaMemsetAsync(run_lengths, 0, size_t(n) * sizeof(int32_t), stream));
    bytes = encode_bytes;
    TANDEM_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp, bytes, sorted_keys, run_rows, run_lengths, num_runs,
                                                         num_items, stream));
    bytes = scan_bytes;
    TANDEM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, bytes, run_lengths, run_starts, num_items, stream));
    const int threads = dim >= cuda::kElementwiseThreads ? cuda::kElementwiseThreads : int((dim + 31) / 32 * 32);
    const int grid = int(std::min<int64_t>(n, 132 * 16));
    cuda::launch<embedding_backward_kernel<T>>(grid, threads, 0, stream, gy.ptr<T>(), run_rows, run_lengths, run_starts,
                                               num_runs, positions, gw.ptr<T>(), dim);
    TANDEM_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
  });
}

}  // namespace tandem
