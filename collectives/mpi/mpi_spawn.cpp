#include "collectives/mpi/mpi_spawn.h"

#include "collectives/mpi/mpi_runtime.h"
#include "engine/core/error.h"

namespace tandem::collectives::mpi {

MPI_Comm spawn_and_merge(const std::string& program, const std::vector<std::string>& args, int count,
                         const std::vector<std::string>& env) {
  ensure_mpi_initialized(nullptr, nullptr);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  MPI_Info info;
  MPI_Info_create(&info);
  std::string lines;
  for (const std::string& e : env) lines += (lines.empty() ? "" : "\n") + e;
  if (!lines.empty()) MPI_Info_set(info, "env", lines.c_str());  // Open MPI's key: one KEY=VALUE per line
  MPI_Comm children = MPI_COMM_NULL;
  std::vector<int> errors(size_t(count), MPI_SUCCESS);
  const int rc = MPI_Comm_spawn(program.c_str(), argv.data(), count, info, 0, MPI_COMM_SELF, &children, errors.data());
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) throw CommError(mpi_error_text("MPI_Comm_spawn", rc) + " while starting " + std::to_string(count) +
                                         " copies of " + program);
  for (int e : errors) {
    if (e != MPI_SUCCESS) throw CommError(mpi_error_text("MPI_Comm_spawn (a child)", e) + " while starting " + program);
  }
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Intercomm_merge(children, /*high=*/0, &world);
  MPI_Comm_free(&children);
  return world;
}

MPI_Comm merge_with_parent() {
  ensure_mpi_initialized(nullptr, nullptr);
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) {
    throw CommError("this process was marked as spawned (TANDEM_SPAWN_WORLD_SIZE is set) but has no MPI parent; "
                    "unset TANDEM_SPAWN_WORLD_SIZE, or start the job from one process with strategy=ddp_spawn");
  }
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Intercomm_merge(parent, /*high=*/1, &world);
  return world;
}

}  // namespace tandem::collectives::mpi
