#include "engine/accelerators/accelerator.h"

namespace tandem {

std::vector<AcceleratorDevice> Accelerator::get_parallel_devices(
    const std::vector<int>& indices) const {
  std::vector<AcceleratorDevice> out;
  out.reserve(indices.size());
  for (int i : indices) out.push_back(AcceleratorDevice{name(), i});
  return out;
}

}  // namespace tandem
