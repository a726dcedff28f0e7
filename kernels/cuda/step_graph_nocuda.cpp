// StepGraph for builds without CUDA: nothing to capture; the counters stay at zero.
#include "base/error.h"
#include "kernels/cuda/step_graph.h"

namespace tandem::cuda {

struct StepGraph::Impl {};

StepGraph::StepGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StepGraph::~StepGraph() = default;

std::unique_ptr<StepGraph> StepGraph::capture(int device, const std::function<void()>&) {
  throw DeviceError("CUDA graph capture on cuda:" + std::to_string(device) +
                    ": Tandem was built without CUDA; rebuild with -DTANDEM_CUDA=ON or set cuda_graph=false");
}
void StepGraph::replay() {}

uint64_t host_read_count() { return 0; }
uint64_t random_launch_count() { return 0; }
void count_host_read() {}
void count_random_launch() {}

}  // namespace tandem::cuda
