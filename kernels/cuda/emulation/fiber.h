// Fibers for the CUDA emulator: one per emulated CUDA thread, switched cooperatively on one OS
// thread. A switch saves the callee-saved registers and the stack pointer (x86-64: a few lines
// of assembly in fiber.cpp, about ten times cheaper than swapcontext, which makes a system call
// for the signal mask on every switch); other architectures use ucontext.
//
// Sanitizers are told about every switch: AddressSanitizer (stack bounds, so it does not read
// a fiber's frames as a stack overflow) and ThreadSanitizer (each fiber is its own TSan thread,
// switched without synchronization, so only the emulator's explicit barriers order memory
// between CUDA threads; that is how the race-check build finds missing __syncthreads).
#pragma once
#include <cstddef>

// For the emulator's own bookkeeping, which the switches hand from fiber to fiber: ThreadSanitizer
// is told switches carry no ordering, so it must not track these accesses (kernel code it does).
#if defined(__SANITIZE_THREAD__)
#define TANDEM_EMU_UNTRACKED __attribute__((no_sanitize_thread, noinline))
#else
#define TANDEM_EMU_UNTRACKED
#endif

namespace tandem::emu {

// A fixed-size stack from mmap with a guard page below it; reused from launch to launch.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* bottom() const { return base_ + guard_; }
  size_t size() const { return usable_; }

 private:
  char* base_ = nullptr;
  size_t guard_ = 0, usable_ = 0, mapped_ = 0;
};

// The context of one execution: the scheduler's (an OS thread's own stack) or a fiber's.
struct FiberContext {
  void* sp = nullptr;              // saved stack pointer while switched out
  void* native = nullptr;          // ucontext_t on architectures without the assembly switch
  void* tsan_fiber = nullptr;      // ThreadSanitizer's fiber handle (race-check build)
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;  // AddressSanitizer's fake-stack handle across a switch
};

// Prepares `ctx` to start entry(arg) on `stack` at the next switch into it. entry must never
// return: a finished fiber switches away for good.
void fiber_init(FiberContext& ctx, FiberStack& stack, void (*entry)(void*), void* arg);
// Releases sanitizer state of a fiber that will not run again.
void fiber_release(FiberContext& ctx);
// Saves the running context into `from` and resumes `to`. `from_finished`: `from` will never be
// resumed (its sanitizer bookkeeping is dropped).
void fiber_switch(FiberContext& from, FiberContext& to, bool from_finished = false);
// Sizes of a fiber's stack: larger under sanitizers, whose frames are bigger.
size_t default_fiber_stack_bytes();

}  // namespace tandem::emu
