#include "collectives/mpi/persistent_allreduce.h"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define TANDEM_PERSISTENT_ALLREDUCE_INIT MPIX_Allreduce_init
#elif defined(MPI_VERSION) && MPI_VERSION >= 4
#define TANDEM_PERSISTENT_ALLREDUCE_INIT MPI_Allreduce_init
#endif

namespace tandem::collectives::mpi {

bool PersistentAllreduces::available() {
#ifdef TANDEM_PERSISTENT_ALLREDUCE_INIT
  return true;
#else
  return false;
#endif
}

std::shared_ptr<PersistentAllreduces::Entry> PersistentAllreduces::acquire(MPI_Comm comm, void* buffer, int count,
                                                                           MPI_Datatype type, MPI_Op op) {
#ifdef TANDEM_PERSISTENT_ALLREDUCE_INIT
  for (const auto& e : entries_) {
    if (e->buffer != buffer || e->count != count || e->type != type || e->op != op) continue;
    if (e->busy) return nullptr;  // the last one on this buffer is still running
    e->busy = true;
    return e;
  }
  if (entries_.size() >= kMaxEntries) {  // make room: free the oldest idle request
    auto idle = std::find_if(entries_.begin(), entries_.end(), [](const auto& e) { return !e->busy; });
    if (idle == entries_.end()) return nullptr;
    MPI_Request_free(&(*idle)->request);
    entries_.erase(idle);
  }
  auto e = std::make_shared<Entry>(Entry{buffer, count, type, op, MPI_REQUEST_NULL, /*busy=*/true});
  if (TANDEM_PERSISTENT_ALLREDUCE_INIT(MPI_IN_PLACE, buffer, count, type, op, comm, MPI_INFO_NULL, &e->request) !=
      MPI_SUCCESS)
    return nullptr;
  entries_.push_back(e);
  return e;
#else
  (void)comm, (void)buffer, (void)count, (void)type, (void)op;
  return nullptr;
#endif
}

void PersistentAllreduces::free_idle() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if ((*it)->busy) {
      ++it;
      continue;
    }
    if ((*it)->request != MPI_REQUEST_NULL) MPI_Request_free(&(*it)->request);
    it = entries_.erase(it);
  }
}

}  // namespace tandem::collectives::mpi
