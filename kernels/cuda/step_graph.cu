// StepGraph (step_graph.h): stream capture on the compute stream into a private memory pool,
// instantiation, replay; and the host-read / random-launch counters.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "base/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/step_graph.h"

namespace tandem::cuda {

namespace {
std::atomic<uint64_t> g_host_reads{0};
std::atomic<uint64_t> g_random_launches{0};
}  // namespace

uint64_t host_read_count() { return g_host_reads.load(std::memory_order_relaxed); }
uint64_t random_launch_count() { return g_random_launches.load(std::memory_order_relaxed); }
void count_host_read() { g_host_reads.fetch_add(1, std::memory_order_relaxed); }
void count_random_launch() { g_random_launches.fetch_add(1, std::memory_order_relaxed); }

struct StepGraph::Impl {
  int device = 0;
  int pool = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

StepGraph::StepGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StepGraph::~StepGraph() {
  DeviceGuard guard(impl_->device, std::nothrow);  // after a sticky device error too: never throws
  // An executable graph still running is freed by the driver when it completes.
  if (impl_->exec) cudaGraphExecDestroy(impl_->exec);
  if (impl_->graph) cudaGraphDestroy(impl_->graph);
  // Later allocations queue behind the last replay on the same stream, so the pool's blocks
  // can go straight back to the ordinary free lists.
  release_capture_pool(impl_->device, impl_->pool);
}

std::unique_ptr<StepGraph> StepGraph::capture(int device, const std::function<void()>& body) {
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->pool = begin_capture_pool(device);
  // From here the StepGraph owns the pool: every way out destroys it, which releases the pool.
  std::unique_ptr<StepGraph> graph(new StepGraph(std::move(impl)));
  Impl& g = *graph->impl_;
  // Relaxed mode: during capture the allocator may call cudaMalloc (new pool blocks) and query
  // events of other streams, which the stricter modes forbid. What must not happen (a wait on
  // the capturing stream) still fails the capture, and the caller falls back to eager work.
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    end_capture_pool(device);
    check_runtime(err, "cudaStreamBeginCapture(compute stream)", __FILE__, __LINE__);
  }
  try {
    body();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);  // abandons the capture; the stream works again
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    end_capture_pool(device);
    throw;
  }
  err = cudaStreamEndCapture(stream, &g.graph);
  end_capture_pool(device);
  if (err != cudaSuccess || g.graph == nullptr) {
    cudaGetLastError();
    throw DeviceError(std::string("CUDA graph capture on cuda:") + std::to_string(device) +
                      " failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                      " (the captured work waited for the device or used another stream)");
  }
  TANDEM_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  return graph;
}

void StepGraph::replay() {
  DeviceGuard guard(impl_->device);
  TANDEM_CUDA_CHECK(cudaGraphLaunch(impl_->exec, compute_stream(impl_->device)));
}

}  // namespace tandem::cuda
