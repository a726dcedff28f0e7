#include "collectives/mpi/mpi_spawn.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "collectives/mpi/mpi_runtime.h"

namespace tandem::collectives::mpi {

namespace {

// MPI_Comm_spawn and MPI_Intercomm_merge block with no deadline: a child that dies before
// MPI_Init (or never merges) would leave the caller waiting forever. Past `limit` the job is
// aborted with `why` instead.
class Deadline {
 public:
  Deadline(std::chrono::milliseconds limit, std::string why)
      : thread_([this, limit, why = std::move(why)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) abort_job(why);
        }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string seconds(std::chrono::milliseconds t) { return std::to_string(double(t.count()) / 1000.0) + " s"; }

}  // namespace

MPI_Comm spawn_and_merge(const std::string& program, const std::vector<std::string>& args, int count,
                         const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  ensure_mpi_initialized(nullptr, nullptr);
  Deadline deadline(timeout, "the " + std::to_string(count) + " process(es) spawned from " + program +
                                 " did not join within the collective timeout (" + seconds(timeout) +
                                 "); one probably failed before starting MPI (see its output above)");
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  MPI_Info info;
  MPI_Info_create(&info);
  std::string lines;
  for (const std::string& e : env) lines += (lines.empty() ? "" : "\n") + e;
  if (!lines.empty()) MPI_Info_set(info, "env", lines.c_str());  // Open MPI's key: one KEY=VALUE per line
  // Open MPI gives a process started without mpirun one slot per core (or what
  // orte_set_default_slots says) and refuses to spawn past them (MPI_ERR_SPAWN); like mpirun's
  // relaunch (ddp), the spawn may place more ranks than slots. Within the slots it changes nothing.
  MPI_Info_set(info, "map_by", "slot:OVERSUBSCRIBE");
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

MPI_Comm merge_with_parent(std::chrono::milliseconds timeout) {
  ensure_mpi_initialized(nullptr, nullptr);
  Deadline deadline(timeout, "this spawned process could not join its spawner within the collective timeout (" +
                                 seconds(timeout) + ")");
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
