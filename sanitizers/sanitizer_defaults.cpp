// Linked into every executable of a -DTANDEM_SANITIZE=address[,undefined] build (CMakeLists.txt):
// the sanitizer runtime options, leak suppressions and dlclose() the suite runs under, built into the
// binaries so that they hold the same under ctest, on every rank mpirun starts, in the ranks
// ddp_spawn spawns, when `tandem fit` relaunches itself, and when a binary is run by hand.
// ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS in the environment still add to or override them.
#include "lsan_openmpi_suppressions.h"

#define TANDEM_SANITIZER_HOOK extern "C" __attribute__((visibility("default"), used))

// allocator_may_return_null=1: malloc and aligned_alloc return null when they cannot allocate,
// as glibc's do, so the engine's own "out of host memory" error is what a test sees (a throwing
// operator new still ends the process with a report).
TANDEM_SANITIZER_HOOK const char* __asan_default_options() { return "allocator_may_return_null=1"; }

// dlclose() leaves the library mapped. Open MPI keeps what its components allocate past
// MPI_Finalize and then unloads the components (mca_*.so); at exit LeakSanitizer would find
// those blocks with their first frames in an unmapped library, "<unknown module>", which no
// suppression can name. Mapped, the frames carry the component's file name (suppressed as
// `leak:mca_`, lsan_openmpi.supp) with the fast frame-pointer unwinder. The alternative, the
// DWARF unwinder on every malloc (fast_unwind_on_malloc=0), made the mpi tests about six times
// as costly in CPU time (collectives at 2 ranks: 17.6 s of user time against 2.8 s). Nothing
// here relies on a library being unloaded.
TANDEM_SANITIZER_HOOK int dlclose(void*) { return 0; }

TANDEM_SANITIZER_HOOK const char* __ubsan_default_options() { return "print_stacktrace=1"; }

// print_suppressions=0: the suppressed Open MPI allocations (about 3400 per rank) are not news.
TANDEM_SANITIZER_HOOK const char* __lsan_default_options() { return "print_suppressions=0"; }

// Only third-party memory that is never freed by design (sanitizers/lsan_openmpi.supp).
TANDEM_SANITIZER_HOOK const char* __lsan_default_suppressions() { return kLsanOpenMpiSuppressions; }
