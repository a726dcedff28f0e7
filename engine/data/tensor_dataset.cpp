#include "engine/data/tensor_dataset.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "base/error.h"
#include "engine/data/sampler.h"

namespace tandem::data {
namespace {

std::string index_error(const char* who, int64_t index, int64_t size) {
  return std::string(who) + ": index " + std::to_string(index) + " is outside [0, " +
         std::to_string(size) + "); indices come from the sampler, which must cover this dataset's size";
}

// out[b] = src[indices[b]] for every b: the batch tensor is [B, src.shape[1:]...].
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& indices) {
  Shape shape = src.shape();
  const int64_t rows = shape[0];
  shape[0] = int64_t(indices.size());
  Tensor out = Tensor::empty(shape, src.dtype());
  const size_t row_bytes = rows ? src.numel() / rows * dtype_size(src.dtype()) : 0;
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (int64_t index : indices) {
    if (index < 0 || index >= rows) throw ValueError(index_error("TensorDataset", index, rows));
    std::memcpy(to, from + size_t(index) * row_bytes, row_bytes);
    to += row_bytes;
  }
  return out;
}

}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) {
  if (!inputs.defined() || inputs.dim() < 1)
    throw ShapeError("TensorDataset: inputs must be a tensor of shape [N, ...], got " +
                     std::string(inputs.defined() ? "a 0-dim tensor" : "an undefined tensor"));
  if (!inputs.device().is_cpu())
    throw DeviceError("TensorDataset: inputs are on " + inputs.device().str() +
                      "; datasets live on the host (batches move to the device in the strategy): "
                      "pass inputs.to(Device::cpu())");
  size_ = inputs.size(0);
  if (targets.defined()) {
    if (targets.dim() != 1 || targets.size(0) != size_)
      throw ShapeError("TensorDataset: targets must have shape [" + std::to_string(size_) +
                       "] to match inputs " + inputs.shape_str() + ", got " + targets.shape_str());
    if (!targets.device().is_cpu())
      throw DeviceError("TensorDataset: targets are on " + targets.device().str() +
                        "; pass targets.to(Device::cpu())");
    targets_ = targets.detach().contiguous();
  }
  inputs_ = inputs.detach().contiguous();
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  Batch batch;
  batch.input = gather_rows(inputs_, indices);
  if (targets_.defined()) batch.target = gather_rows(targets_, indices);
  return batch;
}

SubsetDataset::SubsetDataset(std::shared_ptr<Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  if (!base_) throw ValueError("SubsetDataset: the base dataset is null");
  const int64_t n = base_->size();
  for (int64_t index : indices_)
    if (index < 0 || index >= n) throw ValueError(index_error("SubsetDataset", index, n));
}

Batch SubsetDataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> base_indices(indices.size());
  const int64_t n = size();
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= n) throw ValueError(index_error("SubsetDataset", indices[i], n));
    base_indices[i] = indices_[size_t(indices[i])];
  }
  return base_->get_batch(base_indices);
}

std::vector<std::shared_ptr<SubsetDataset>> random_split(std::shared_ptr<Dataset> dataset,
                                                         const std::vector<int64_t>& lengths,
                                                         uint64_t seed) {
  if (!dataset) throw ValueError("random_split: the dataset is null");
  int64_t total = 0;
  std::string listed;
  for (int64_t len : lengths) {
    if (len < 0) throw ValueError("random_split: lengths must be >= 0, got " + std::to_string(len));
    total += len;
    listed += (listed.empty() ? "" : ", ") + std::to_string(len);
  }
  if (total != dataset->size())
    throw ValueError("random_split: lengths [" + listed + "] sum to " + std::to_string(total) +
                     " but the dataset has " + std::to_string(dataset->size()) + " examples");
  std::vector<int64_t> order(static_cast<size_t>(total));
  std::iota(order.begin(), order.end(), int64_t{0});
  // A stream no epoch uses, so the split is unrelated to any epoch's shuffle with this seed.
  seeded_shuffle(order, seed, ~uint64_t{0});
  std::vector<std::shared_ptr<SubsetDataset>> parts;
  auto begin = order.begin();
  for (int64_t len : lengths) {
    std::vector<int64_t> part(begin, begin + len);
    std::sort(part.begin(), part.end());
    parts.push_back(std::make_shared<SubsetDataset>(dataset, std::move(part)));
    begin += len;
  }
  return parts;
}

}  // namespace tandem::data
