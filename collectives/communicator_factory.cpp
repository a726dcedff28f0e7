// The one file with backend #ifs: TANDEM_WITH_MPI comes from CMake (collectives/mpi/* is only
// compiled when MPI was found).
#include "collectives/communicator_factory.h"
#include "collectives/rank_failure.h"

#include "collectives/local_communicator.h"
#if TANDEM_WITH_NCCL
#include "collectives/nccl/nccl_communicator.h"
#endif
#include "base/error.h"

#if TANDEM_WITH_MPI
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi/mpi_spawn.h"
#endif

namespace tandem::collectives {

const char* comm_backend_name(CommBackend backend) {
  switch (backend) {
    case CommBackend::Local: return "local";
    case CommBackend::Mpi: return "mpi";
    case CommBackend::Nccl: return "nccl";
  }
  return "?";
}

CommBackend parse_comm_backend(const std::string& name) {
  for (CommBackend b : {CommBackend::Local, CommBackend::Mpi, CommBackend::Nccl})
    if (name == comm_backend_name(b)) return b;
  throw ConfigError("unknown communication backend '" + name + "'; allowed: local, mpi, nccl");
}

bool comm_backend_compiled_in(CommBackend backend) {
  switch (backend) {
    case CommBackend::Local: return true;
    case CommBackend::Mpi: return TANDEM_WITH_MPI;
    case CommBackend::Nccl: return TANDEM_WITH_NCCL;
  }
  return false;
}

namespace {

[[noreturn]] void not_built(CommBackend backend) {
  if (backend == CommBackend::Mpi)
    throw ConfigError("the mpi communication backend was asked for, but Tandem was built without MPI; "
                      "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and reconfigure "
                      "with -DTANDEM_MPI=ON, or use the local backend for one process");
  throw ConfigError(std::string("the ") + comm_backend_name(backend) + " communication backend was asked for, "
                    "but Tandem was built without it (NCCL needs the CUDA toolkit with NCCL and Open MPI at "
                    "configure time); use mpi or local");
}

}  // namespace

void init_comm_runtime(CommBackend backend, int* argc, char*** argv) {
  if (backend == CommBackend::Local) return;
  if (!comm_backend_compiled_in(backend)) not_built(backend);
#if TANDEM_WITH_MPI
  mpi::ensure_mpi_initialized(argc, argv);
#endif
}

void announce_rank_failure(const std::string& error_type, int exit_code) {
#if TANDEM_WITH_MPI
  mpi::announce_rank_failure(error_type, exit_code);
#else
  (void)error_type;
  (void)exit_code;
#endif
}

std::shared_ptr<Communicator> make_communicator(CommBackend backend, const CommOptions& options, int device_index) {
  if (backend == CommBackend::Local) return std::make_shared<LocalCommunicator>(options);
  if (!comm_backend_compiled_in(backend)) not_built(backend);
#if TANDEM_WITH_MPI
  mpi::ensure_mpi_initialized(nullptr, nullptr);
  auto mpi_world = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, options);
#if TANDEM_WITH_NCCL
  if (backend == CommBackend::Nccl) {
    return std::make_shared<NcclCommunicator>(*mpi_world, device_index >= 0 ? device_index : mpi_world->local_rank(), options);
  }
#endif
  return mpi_world;
#else
  not_built(backend);
#endif
}

#if TANDEM_WITH_MPI
namespace {

// The host's communicator as MPI_Comm; ConfigError unless MPI is up and the handle names one.
MPI_Comm host_mpi_comm(HostComm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw ConfigError(std::string("a host MPI communicator (handle ") + std::to_string(comm.fortran_handle) +
                      ") was given, but MPI is " + (finalized ? "already finalized" : "not initialized") +
                      "; the host program initializes MPI (MPI_Init_thread with at least MPI_THREAD_FUNNELED) before "
                      "handing Tandem its communicator and finalizes it after Tandem is done");
  }
  const bool fits = comm.fortran_handle == static_cast<MPI_Fint>(comm.fortran_handle);
  // An unknown or freed handle converts to MPI_COMM_NULL or, in Open MPI, to a null pointer
  // (MPI_Comm{}); either would make the next MPI call abort the job.
  const MPI_Comm c = fits ? MPI_Comm_f2c(static_cast<MPI_Fint>(comm.fortran_handle)) : MPI_COMM_NULL;
  int size = 0;
  if (c == MPI_COMM_NULL || c == MPI_Comm{} || MPI_Comm_size(c, &size) != MPI_SUCCESS || size < 1) {
    throw ConfigError("host MPI communicator handle " + std::to_string(comm.fortran_handle) +
                      " is not a communicator of this process (MPI_COMM_NULL or unknown); pass MPI_Comm_c2f(comm) of a "
                      "live communicator (collectives::host_comm(comm) in C++)");
  }
  return c;
}

}  // namespace
#endif

HostCommShape describe_host_comm(HostComm comm) {
#if TANDEM_WITH_MPI
  const MPI_Comm c = host_mpi_comm(comm);
  HostCommShape shape;
  MPI_Comm_size(c, &shape.size);
  MPI_Comm_rank(c, &shape.rank);
  MPI_Comm node;
  MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, shape.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &shape.local_rank);
  MPI_Comm_size(node, &shape.local_size);
  // Node index: the rank of this node's first process among the nodes' first processes.
  MPI_Comm leaders;
  MPI_Comm_split(c, shape.local_rank == 0 ? 0 : MPI_UNDEFINED, shape.rank, &leaders);
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &shape.node_rank);
    MPI_Comm_free(&leaders);
  }
  MPI_Bcast(&shape.node_rank, 1, MPI_INT, 0, node);
  MPI_Comm_free(&node);
  return shape;
#else
  (void)comm;
  not_built(CommBackend::Mpi);
#endif
}

std::shared_ptr<Communicator> make_communicator(CommBackend backend, HostComm comm, const CommOptions& options,
                                                int device_index) {
  if (!comm_backend_compiled_in(backend)) not_built(backend);
#if TANDEM_WITH_MPI
  const MPI_Comm c = host_mpi_comm(comm);
  if (backend == CommBackend::Local) {
    int size = 0;
    MPI_Comm_size(c, &size);
    if (size != 1) {
      throw ConfigError("the local communication backend is a world of one process, but the host communicator has " +
                        std::to_string(size) + "; use mpi (or nccl for GPUs)");
    }
    return std::make_shared<LocalCommunicator>(options);
  }
  auto mpi_comm = std::make_shared<MpiCommunicator>(c, options);  // duplicates it
#if TANDEM_WITH_NCCL
  if (backend == CommBackend::Nccl) {
    return std::make_shared<NcclCommunicator>(*mpi_comm, device_index >= 0 ? device_index : mpi_comm->local_rank(), options);
  }
#endif
  (void)device_index;
  return mpi_comm;
#else
  (void)comm, (void)options, (void)device_index;
  not_built(CommBackend::Mpi);  // a host communicator is an MPI one, whatever the backend
#endif
}

std::shared_ptr<Communicator> spawn_world(const std::string& program, const std::vector<std::string>& args, int count,
                                          const std::vector<std::string>& env, const CommOptions& options) {
#if TANDEM_WITH_MPI
  MPI_Comm world = mpi::spawn_and_merge(program, args, count, env, options.timeout);
  auto comm = std::make_shared<MpiCommunicator>(world, options);  // duplicates it
  MPI_Comm_free(&world);
  return comm;
#else
  not_built(CommBackend::Mpi);
#endif
}

std::shared_ptr<Communicator> join_spawned_world(const CommOptions& options) {
#if TANDEM_WITH_MPI
  MPI_Comm world = mpi::merge_with_parent(options.timeout);
  auto comm = std::make_shared<MpiCommunicator>(world, options);
  MPI_Comm_free(&world);
  return comm;
#else
  not_built(CommBackend::Mpi);
#endif
}

}  // namespace tandem::collectives
