// Data parallelism across processes: the few collective operations the trainer needs, over MPI when xgrad was built
// with it (CMake option XGRAD_MPI) and started by an MPI launcher (mpirun, srun --mpi=pmix), over one process
// otherwise. Only platform/distributed.cpp includes <mpi.h>.
#pragma once

#include <cstddef>
#include <string>

namespace xgrad::platform {

/// Starts MPI when this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE or PMIX_RANK in the
/// environment) and xgrad was built with MPI; does nothing otherwise, so that a plain `xgrad train` neither pays
/// MPI's start-up nor prints its warnings. Call once, early in main; later calls do nothing. MPI is finalized at exit.
/// Throws std::runtime_error if a launcher started this process but xgrad was built without MPI (XGRAD_MPI=OFF) and
/// the launcher asks for more than one process: each would train alone, believing it is the whole job.
void init_distributed(int* argc, char*** argv);

/// Whether an MPI launcher (mpirun, srun --mpi=pmix) started this process: OMPI_COMM_WORLD_SIZE or PMIX_RANK is set.
bool started_by_launcher();

/// Processes in the job (1 without MPI).
int world_size();

/// This process's index in the job, 0 .. world_size() - 1 (0 without MPI).
int rank();

/// Replaces data[0 .. n) on every process by the element-wise sum over all processes (MPI_Allreduce, MPI_SUM).
/// A collective: every process must call it with the same n. Without MPI, leaves data unchanged.
void allreduce_sum(float* data, std::size_t n);
void allreduce_sum(double* data, std::size_t n);
/// Replaces data[0 .. n) on every process by the element-wise maximum over all processes (MPI_Allreduce, MPI_MAX).
/// A collective, as allreduce_sum.
void allreduce_max(float* data, std::size_t n);

/// Copies data[0 .. n) of process `root` into data on every process (MPI_Bcast). A collective.
void broadcast(float* data, std::size_t n, int root = 0);
void broadcast(double* data, std::size_t n, int root = 0);

/// Waits until every process has called it (MPI_Barrier).
void barrier();

/// Ends the whole job: writes `message` (one line, "\n" added) to stderr, then MPI_Abort with `exit_code`, which
/// makes the launcher stop every other process and exit nonzero. Without MPI (or with one process), exits the
/// process with `exit_code` after writing the message.
[[noreturn]] void abort_job(int exit_code, const std::string& message);

}  // namespace xgrad::platform
