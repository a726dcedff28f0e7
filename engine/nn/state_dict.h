// StateDict: an insertion-ordered map from dotted names ("0.weight", "1.running_mean") to
// tensors. Modules and optimizers produce and consume it; the checkpoint writer serializes it
// (safetensors with PyTorch's names). Order matters to readers and writers that iterate, so it
// keeps registration order like PyTorch's OrderedDict; lookups go through an index.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/tensor.h"

namespace tandem {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  StateDict() = default;
  StateDict(std::initializer_list<Item> items) {
    for (const auto& it : items) insert(it.first, it.second);
  }

  // Inserts or replaces (keeping the first insertion's position).
  void insert(const std::string& name, const Tensor& t) {
    auto found = index_.find(name);
    if (found != index_.end()) {
      items_[found->second].second = t;
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(name, t);
  }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const Tensor& at(const std::string& name) const {
    auto found = index_.find(name);
    if (found == index_.end()) throw StateDictError("state dict has no key '" + name + "'");
    return items_[found->second].second;
  }
  // Removes a key (order of the rest is kept); returns whether it was there.
  bool erase(const std::string& name) {
    auto found = index_.find(name);
    if (found == index_.end()) return false;
    items_.erase(items_.begin() + long(found->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    return true;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& it : items_) out.push_back(it.first);
    return out;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace tandem
