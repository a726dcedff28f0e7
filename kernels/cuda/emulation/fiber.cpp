// Fiber stacks and the context switch (see fiber.h).
#include "kernels/cuda/emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tandem::emu {

namespace {
[[noreturn]] void fatal(const char* what) {
  std::fprintf(stderr, "tandem CUDA emulator: %s\n", what);
  std::abort();
}

// The context that performed the switch into the code now running (sanitizer bookkeeping).
thread_local FiberContext* t_switched_from = nullptr;

struct FiberStart {
  void (*entry)(void*);
  void* arg;
};

TANDEM_EMU_UNTRACKED void after_switch_in(void* fake_stack) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, &t_switched_from->stack_bottom, &t_switched_from->stack_size);
#else
  (void)fake_stack;
#endif
}
}  // namespace

// Called on a new fiber's stack by the first switch into it.
extern "C" [[noreturn]] TANDEM_EMU_UNTRACKED void tandem_emu_fiber_start(FiberStart* start) {
  after_switch_in(nullptr);
  start->entry(start->arg);
  fatal("a fiber's entry returned instead of switching away");
}

#if defined(__x86_64__)
// void tandem_emu_switch(void** save_sp, void* load_sp): pushes the System V callee-saved
// registers, stores the stack pointer, loads the other one, pops its registers and returns into
// it. A new fiber's stack is laid out by fiber_init so that this `ret` enters the trampoline,
// which calls tandem_emu_fiber_start(r12) on a 16-byte aligned stack.
asm(R"(
  .text
  .globl tandem_emu_switch
  .type tandem_emu_switch, @function
tandem_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tandem_emu_switch, .-tandem_emu_switch

  .globl tandem_emu_trampoline
  .type tandem_emu_trampoline, @function
tandem_emu_trampoline:
  movq %r12, %rdi
  call tandem_emu_fiber_start
  ud2
  .size tandem_emu_trampoline, .-tandem_emu_trampoline
  .section .note.GNU-stack,"",@progbits
  .text
)");
extern "C" void tandem_emu_switch(void** save_sp, void* load_sp);
extern "C" void tandem_emu_trampoline();
#endif

FiberStack::FiberStack(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  guard_ = page;
  usable_ = (bytes + page - 1) / page * page;
  mapped_ = guard_ + usable_;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<char*>(p);
  mprotect(base_, guard_, PROT_NONE);  // a fiber overflowing its stack faults instead of corrupting
}

FiberStack::~FiberStack() {
#if defined(__SANITIZE_ADDRESS__)
  // The fibers' frames left stack redzones in the shadow of these pages; AddressSanitizer does not
  // clear them on munmap, so memory mapped here later (a library's buffer at exit) would read as
  // a stack overflow on its first write (seen in the emulated-GPU bagua tests under mpirun).
  __asan_unpoison_memory_region(base_, mapped_);
#endif
  munmap(base_, mapped_);
}

size_t default_fiber_stack_bytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return size_t(256) << 10;
#else
  return size_t(64) << 10;
#endif
}

TANDEM_EMU_UNTRACKED void fiber_init(FiberContext& ctx, FiberStack& stack, void (*entry)(void*), void* arg) {
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = stack.size();
  char* top = stack.bottom() + stack.size();
  // The start record lives at the top of the fiber's own stack.
  top -= 64;
  auto* start = new (top) FiberStart{entry, arg};
#if defined(__x86_64__)
  auto* slots = reinterpret_cast<uintptr_t*>(top) - 2;  // 16-byte aligned: top is
  // From the saved sp upwards: r15 r14 r13 r12 rbx rbp, return address (the trampoline), pad.
  uintptr_t* sp = slots - 7;
  sp[0] = sp[1] = sp[2] = 0;
  sp[3] = reinterpret_cast<uintptr_t>(start);  // r12
  sp[4] = sp[5] = 0;
  sp[6] = reinterpret_cast<uintptr_t>(&tandem_emu_trampoline);
  sp[7] = sp[8] = 0;
  ctx.sp = sp;
#else
  auto* uc = static_cast<ucontext_t*>(ctx.native);
  if (!uc) ctx.native = uc = new ucontext_t;
  getcontext(uc);
  uc->uc_stack.ss_sp = stack.bottom();
  uc->uc_stack.ss_size = size_t(top - stack.bottom());
  uc->uc_link = nullptr;
  makecontext(uc, reinterpret_cast<void (*)()>(&tandem_emu_fiber_start), 1, start);
#endif
#if defined(__SANITIZE_THREAD__)
  if (!ctx.tsan_fiber) ctx.tsan_fiber = __tsan_create_fiber(0);
#endif
}

TANDEM_EMU_UNTRACKED void fiber_release(FiberContext& ctx) {
#if defined(__SANITIZE_THREAD__)
  if (ctx.tsan_fiber) __tsan_destroy_fiber(ctx.tsan_fiber);
  ctx.tsan_fiber = nullptr;
#endif
#if !defined(__x86_64__)
  delete static_cast<ucontext_t*>(ctx.native);
  ctx.native = nullptr;
#endif
}

TANDEM_EMU_UNTRACKED void fiber_switch(FiberContext& from, FiberContext& to, bool from_finished) {
#if defined(__SANITIZE_THREAD__)
  if (!from.tsan_fiber) from.tsan_fiber = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(to.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(from_finished ? nullptr : &from.asan_fake_stack, to.stack_bottom, to.stack_size);
#else
  (void)from_finished;
#endif
  t_switched_from = &from;
#if defined(__x86_64__)
  tandem_emu_switch(&from.sp, to.sp);
#else
  if (!from.native) from.native = new ucontext_t;
  swapcontext(static_cast<ucontext_t*>(from.native), static_cast<ucontext_t*>(to.native));
#endif
  after_switch_in(from.asan_fake_stack);
}

}  // namespace tandem::emu
