// Emulated twins of the three CUB device algorithms kernels/cuda uses, with CUB's two-call
// temporary-storage protocol: a first call with temp_storage == nullptr only sets temp_bytes;
// the second must pass at least that many bytes, which the twin then writes over (so a caller
// that hands it less is caught by AddressSanitizer in the sanitized emulation build). Results
// are CUB's: SortPairs is a stable sort on key bits [begin_bit, end_bit); Encode writes the runs
// of equal keys; ExclusiveSum starts at 0. The work itself is queued on the given stream like a
// kernel (run at once, or recorded by a stream capture: stream_capture.h). The emulation build
// puts this folder before the CUDA include path, so `#include <cub/device/device_radix_sort.cuh>`
// finds these.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cuda/emulation/stream_capture.h"

namespace cub {
namespace emulated {
// Claims `need` bytes of the caller's temporary storage, or reports the size (first call).
inline cudaError_t temp_storage(void* temp, size_t& temp_bytes, size_t need) {
  need = std::max<size_t>(need, 1);
  if (!temp) {
    temp_bytes = need;
    return cudaSuccess;
  }
  if (temp_bytes < need) return cudaErrorInvalidValue;
  std::memset(temp, 0xab, need);
  return cudaSuccess;
}
}  // namespace emulated

struct DeviceRadixSort {
  template <typename K, typename V, typename N>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out, const V* values_in,
                               V* values_out, N num_items, int begin_bit = 0, int end_bit = int(sizeof(K) * 8),
                               cudaStream_t stream = nullptr) {
    const size_t n = size_t(num_items);
    if (cudaError_t err = emulated::temp_storage(temp, temp_bytes, n * (sizeof(K) + sizeof(V))); err || !temp)
      return err;
    return tandem::emu::run_or_record(stream, [=] {
      sort_pairs(keys_in, keys_out, values_in, values_out, n, begin_bit, end_bit);
      return cudaSuccess;
    });
  }

 private:
  template <typename K, typename V>
  static void sort_pairs(const K* keys_in, K* keys_out, const V* values_in, V* values_out, size_t n, int begin_bit,
                         int end_bit) {
    const int bits = end_bit - begin_bit;
    const uint64_t mask = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
    auto digit = [&](K key) { return (uint64_t(key) >> begin_bit) & mask; };
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return digit(keys_in[a]) < digit(keys_in[b]); });
    std::vector<K> keys(n);
    std::vector<V> values(n);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = keys_in[order[i]];
      values[i] = values_in[order[i]];
    }
    std::copy(keys.begin(), keys.end(), keys_out);
    std::copy(values.begin(), values.end(), values_out);
  }
};

struct DeviceRunLengthEncode {
  template <typename K, typename L, typename C, typename N>
  static cudaError_t Encode(void* temp, size_t& temp_bytes, const K* in, K* unique_out, L* counts_out, C* num_runs_out,
                            N num_items, cudaStream_t stream = nullptr) {
    const size_t n = size_t(num_items);
    if (cudaError_t err = emulated::temp_storage(temp, temp_bytes, sizeof(C) + n / 8); err || !temp) return err;
    return tandem::emu::run_or_record(stream, [=] {
      size_t runs = 0;
      for (size_t i = 0; i < n; ++runs) {
        size_t j = i + 1;
        while (j < n && in[j] == in[i]) ++j;
        unique_out[runs] = in[i];
        counts_out[runs] = L(j - i);
        i = j;
      }
      *num_runs_out = C(runs);
      return cudaSuccess;
    });
  }
};

struct DeviceScan {
  template <typename TIn, typename TOut, typename N>
  static cudaError_t ExclusiveSum(void* temp, size_t& temp_bytes, const TIn* in, TOut* out, N num_items,
                                  cudaStream_t stream = nullptr) {
    const size_t n = size_t(num_items);
    if (cudaError_t err = emulated::temp_storage(temp, temp_bytes, sizeof(TOut) * (n / 128 + 1)); err || !temp)
      return err;
    return tandem::emu::run_or_record(stream, [=] {
      TOut running{};
      for (size_t i = 0; i < n; ++i) {
        const TOut v = TOut(in[i]);
        out[i] = running;
        running += v;
      }
      return cudaSuccess;
    });
  }
};

}  // namespace cub
