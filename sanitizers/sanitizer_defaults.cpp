// Linked into every executable of a -DTANDEM_SANITIZE=address[,undefined] build (CMakeLists.txt):
// the sanitizer runtime options and leak suppressions the suite runs under, built into the
// binaries so that they hold the same under ctest, on every rank mpirun starts, in the ranks
// ddp_spawn spawns, when `tandem fit` relaunches itself, and when a binary is run by hand.
// ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS in the environment still add to or override them.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#include "lsan_openmpi_suppressions.h"

#define TANDEM_SANITIZER_HOOK extern "C" __attribute__((visibility("default"), used))

namespace {

// Whether Open MPI started this process (it sets OMPI_COMM_WORLD_SIZE). Read from
// /proc/self/environ with raw system calls and plain loops: the runtime asks while it
// initializes, before getenv() sees the environment and before its own interceptors of open()
// and read() can run.
bool started_by_open_mpi() {
  static char environ_text[1 << 20];  // NUL-separated NAME=value entries
  const int fd = int(syscall(SYS_openat, AT_FDCWD, "/proc/self/environ", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  size_t size = 0;
  for (ssize_t n = 1; n > 0 && size < sizeof(environ_text) - 1; size += size_t(n))
    if ((n = syscall(SYS_read, fd, environ_text + size, sizeof(environ_text) - 1 - size)) < 0) n = 0;
  syscall(SYS_close, fd);
  static const char key[] = "OMPI_COMM_WORLD_SIZE=";
  for (size_t entry = 0; entry < size;) {
    size_t i = 0;
    while (key[i] != '\0' && entry + i < size && environ_text[entry + i] == key[i]) ++i;
    if (key[i] == '\0') return true;
    while (entry < size && environ_text[entry] != '\0') ++entry;
    ++entry;
  }
  return false;
}

}  // namespace

// allocator_may_return_null=1: malloc and aligned_alloc return null when they cannot allocate,
// as glibc's do, so the engine's own "out of host memory" error is what a test sees (a throwing
// operator new still ends the process with a report).
// fast_unwind_on_malloc=0, in processes Open MPI starts (mpirun's ranks, ddp_spawn's copies):
// record allocation stacks with the DWARF unwinder. The frame-pointer unwinder stops at the first
// frame of a library built without frame pointers, so a leak inside Open MPI shows one frame in
// a component Open MPI has dlclose()d by exit ("<unknown module>"), which no suppression below
// can name; the full stack reaches libmpi and is matched. Everywhere else it would make the suite
// about ten times slower (test_nn: 0.23 s of CPU with the fast unwinder, 2.4 s without).
TANDEM_SANITIZER_HOOK const char* __asan_default_options() {
  return started_by_open_mpi() ? "allocator_may_return_null=1:fast_unwind_on_malloc=0" : "allocator_may_return_null=1";
}

TANDEM_SANITIZER_HOOK const char* __ubsan_default_options() { return "print_stacktrace=1"; }

// print_suppressions=0: the suppressed Open MPI allocations (about 3400 per rank) are not news.
TANDEM_SANITIZER_HOOK const char* __lsan_default_options() { return "print_suppressions=0"; }

// Only third-party memory that is never freed by design (sanitizers/lsan_openmpi.supp).
TANDEM_SANITIZER_HOOK const char* __lsan_default_suppressions() { return kLsanOpenMpiSuppressions; }
