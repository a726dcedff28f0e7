// CUDA graph capture of work queued on one device's compute stream, and the counters that tell
// whether a piece of work can be captured at all.
//
// A graph records the kernels and copies that `body` queues (their arguments and addresses)
// once; replay() queues all of them again with a single launch, which removes the per-kernel
// launch cost (microseconds each) that dominates the step of a small model. What a replay
// repeats exactly as captured:
//   - addresses: every tensor body creates keeps its memory, which the allocator takes from a
//     private pool that lives as long as the graph (caching_allocator.h); new inputs must be
//     copied into the tensors the capture read;
//   - scalars and host decisions: a Philox seed and offset, a branch taken on the host, a
//     learning rate passed by value. random_launch_count() counts the launches that draw a
//     Philox offset, so a caller can refuse work that would replay the same random numbers;
//   - no host reads: a wait for the device (item(), to(cpu)) cannot be captured;
//     host_read_count() counts them, so a caller can check an eager run before capturing.
// Plain C++ (no CUDA types), so the Trainer can use it in every build: step_graph_nocuda.cpp
// says "built without CUDA".
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace tandem::cuda {

class StepGraph {
 public:
  // Captures what body queues on `device`'s compute stream; nothing runs until replay(). Throws
  // DeviceError when CUDA refuses the capture (body waited for the device, say); body's own
  // exceptions pass through. Either way the capture is abandoned and the stream stays usable.
  static std::unique_ptr<StepGraph> capture(int device, const std::function<void()>& body);
  ~StepGraph();  // the pool's memory goes back, behind the last replay queued
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Queues the whole graph on the device's compute stream (asynchronous, like a kernel).
  void replay();

 private:
  struct Impl;
  explicit StepGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Device-to-host copies and Backend::synchronize calls made so far by this process.
uint64_t host_read_count();
// Kernel launches so far that took a Philox seed and offset (random fills, dropout).
uint64_t random_launch_count();
void count_host_read();
void count_random_launch();

}  // namespace tandem::cuda
