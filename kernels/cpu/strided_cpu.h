// Strided iteration for CPU kernels over K operands that share a logical shape (broadcast
// operands have stride 0). Adjacent dims that are contiguous for every operand are merged,
// then rows (all dims but the last) are split across the thread pool. The callback receives
// each operand's element offset at the start of a row, the row length and the row strides,
// so it can run a tight (vectorizable) inner loop.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dispatch_cpu.h"

namespace tandem::cpu {

template <size_t K>
struct StridedLayout {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, K> strides;
};

template <size_t K>
StridedLayout<K> coalesce(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides) {
  StridedLayout<K> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move an offset
    bool merge = !out.shape.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = out.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (size_t k = 0; k < K; ++k) out.strides[k].back() = (*strides[k])[d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < K; ++k) out.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (out.shape.empty()) {  // a single element
    out.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// row_fn(const std::array<int64_t,K>& offsets, int64_t n, const std::array<int64_t,K>& inner_strides)
template <size_t K, typename RowFn>
void for_each_row(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides,
                  RowFn&& row_fn) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  StridedLayout<K> L = coalesce<K>(shape, strides);
  const int nd = int(L.shape.size());
  const int64_t inner = L.shape.back();
  std::array<int64_t, K> inner_strides;
  for (size_t k = 0; k < K; ++k) inner_strides[k] = L.strides[k].back();
  const int64_t rows = total / inner;
  cpu::parallel_loop(rows, total >= kParallelGrain && rows > 1, [&](int64_t row) {
    std::array<int64_t, K> off{};
    int64_t rem = row;
    for (int d = nd - 2; d >= 0; --d) {
      int64_t idx = rem % L.shape[size_t(d)];
      rem /= L.shape[size_t(d)];
      for (size_t k = 0; k < K; ++k) off[k] += idx * L.strides[k][size_t(d)];
    }
    row_fn(off, inner, inner_strides);
  });
}

}  // namespace tandem::cpu
