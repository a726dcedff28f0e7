// Stream capture and graphs in the emulation build (stream_capture.h): the graph API of
// cuda_runtime_api.h over lists of recorded operations.
#include "kernels/cuda/emulation/stream_capture.h"

#include <map>
#include <mutex>
#include <vector>

namespace tandem::emu {
namespace {

struct Capture {
  std::vector<QueuedOperation> operations;
  bool invalidated = false;
};

// A graph and its executable are the same list: instantiating copies it.
struct Graph {
  std::vector<QueuedOperation> operations;
};

struct Captures {
  std::mutex mutex;
  std::map<cudaStream_t, Capture> by_stream;
};

Captures& captures() {
  static Captures* c = new Captures;  // never destroyed: graphs may be released after static destruction
  return *c;
}

bool is_default_stream(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

}  // namespace

cudaError_t run_or_record(cudaStream_t stream, QueuedOperation operation) {
  if (!is_default_stream(stream)) {
    Captures& c = captures();
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.by_stream.find(stream);
    if (it != c.by_stream.end()) {
      if (it->second.invalidated) return cudaErrorStreamCaptureInvalidated;
      it->second.operations.push_back(std::move(operation));
      return cudaSuccess;
    }
  }
  return operation();  // outside the lock: a kernel may queue more work
}

bool invalidate_capture(cudaStream_t stream) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = c.by_stream.find(stream);
  if (it == c.by_stream.end()) return false;
  it->second.invalidated = true;
  return true;
}

void forget_capture(cudaStream_t stream) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.by_stream.erase(stream);
}

}  // namespace tandem::emu

using namespace tandem::emu;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (is_default_stream(stream)) return set_last_error(cudaErrorStreamCaptureUnsupported);
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.by_stream.count(stream)) return set_last_error(cudaErrorIllegalState);
  c.by_stream[stream] = Capture{};
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = c.by_stream.find(stream);
  if (it == c.by_stream.end()) return set_last_error(cudaErrorIllegalState);
  Capture capture = std::move(it->second);
  c.by_stream.erase(it);
  if (capture.invalidated) return set_last_error(cudaErrorStreamCaptureInvalidated);
  *graph = reinterpret_cast<cudaGraph_t>(new Graph{std::move(capture.operations)});
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = is_default_stream(stream) ? c.by_stream.end() : c.by_stream.find(stream);
  *status = it == c.by_stream.end() ? cudaStreamCaptureStatusNone
            : it->second.invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return set_last_error(cudaErrorInvalidValue);
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return set_last_error(cudaErrorInvalidValue);
  for (const QueuedOperation& operation : reinterpret_cast<Graph*>(exec)->operations) {
    const cudaError_t err = run_or_record(stream, operation);
    if (err != cudaSuccess) return set_last_error(err);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}

}  // extern "C"
