// Stream capture in the emulation build: a CUDA graph is the list of operations queued on a
// stream between cudaStreamBeginCapture and cudaStreamEndCapture, each kept as a closure over
// its arguments (pointers, sizes, launch shape; never the data). cudaGraphLaunch runs them in
// order, reading and writing device memory as it is at replay, which is what a GPU replays.
//
// Every operation the emulator queues goes through run_or_record: kernels (stream_launch),
// copies and memsets, the CUB twins and the cuBLASLt/cuDNN seams. As on a GPU, waiting for a
// capturing stream (cudaStreamSynchronize, cudaStreamQuery) fails with
// cudaErrorStreamCaptureUnsupported and invalidates the capture: later work on the stream fails
// with cudaErrorStreamCaptureInvalidated and cudaStreamEndCapture returns no graph. The default
// (legacy) stream cannot be captured. Not emulated: capture across streams (an event recorded in
// a capture and waited for on another stream joins nothing) and graph editing or update.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace tandem::emu {

using QueuedOperation = std::function<cudaError_t()>;

// Runs `operation` now, or appends it to the capture `stream` is recording (cudaSuccess then;
// cudaErrorStreamCaptureInvalidated after the capture was invalidated).
cudaError_t run_or_record(cudaStream_t stream, QueuedOperation operation);

// Sets the error cudaGetLastError returns next (emulated_runtime.cpp); returns `err`.
cudaError_t set_last_error(cudaError_t err);

// Invalidates the capture `stream` is recording; false when it records none.
bool invalidate_capture(cudaStream_t stream);

// Drops the capture of a stream being destroyed (its recorded operations with it), so that a
// stream created later at the same address does not inherit it.
void forget_capture(cudaStream_t stream);

}  // namespace tandem::emu
