#include "platform/distributed.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#ifdef XGRAD_HAVE_MPI
#include <mpi.h>
#endif

namespace xgrad::platform {

bool started_by_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

namespace {

#ifdef XGRAD_HAVE_MPI
bool g_mpi = false;
int g_size = 1;
int g_rank = 0;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI counts are ints: a larger buffer goes in pieces.
template <class T, class Op>
void in_chunks(T* data, std::size_t n, Op op) {
  constexpr std::size_t kChunk = static_cast<std::size_t>(INT_MAX) / 2;
  for (std::size_t offset = 0; offset < n; offset += kChunk)
    op(data + offset, static_cast<int>(std::min(kChunk, n - offset)));
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  abort_job(1, std::string("xgrad: error: ") + call + " failed: " + std::string(text, length));
}
#endif

}  // namespace

void init_distributed(int* argc, char*** argv) {
#ifdef XGRAD_HAVE_MPI
  if (g_mpi || !started_by_launcher()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(argc, argv);
  // Errors end the job with a message (check) rather than MPI's default of aborting without one.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  g_mpi = true;
  std::atexit(finalize_at_exit);
#else
  (void)argc;
  (void)argv;
  if (!started_by_launcher()) return;
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (size && std::atoi(size) > 1)
    throw std::runtime_error(std::string("started by mpirun as one of ") + size +
                             " processes, but this xgrad was built without MPI (XGRAD_MPI=OFF; install "
                             "libopenmpi-dev and rebuild)");
#endif
}

int world_size() {
#ifdef XGRAD_HAVE_MPI
  return g_size;
#else
  return 1;
#endif
}

int rank() {
#ifdef XGRAD_HAVE_MPI
  return g_rank;
#else
  return 0;
#endif
}

#ifdef XGRAD_HAVE_MPI
namespace {
MPI_Datatype mpi_type(const float*) { return MPI_FLOAT; }
MPI_Datatype mpi_type(const double*) { return MPI_DOUBLE; }

template <class T>
void allreduce_in_place(T* data, std::size_t n, MPI_Op op = MPI_SUM) {
  if (!g_mpi || g_size == 1) return;
  in_chunks(data, n, [op](T* p, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, p, count, mpi_type(p), op, MPI_COMM_WORLD), "MPI_Allreduce");
  });
}
void allreduce_max_in_place(float* data, std::size_t n) { allreduce_in_place(data, n, MPI_MAX); }

template <class T>
void broadcast_from(T* data, std::size_t n, int root) {
  if (!g_mpi || g_size == 1) return;
  in_chunks(data, n,
            [root](T* p, int count) { check(MPI_Bcast(p, count, mpi_type(p), root, MPI_COMM_WORLD), "MPI_Bcast"); });
}
}  // namespace
#else
namespace {
template <class T>
void allreduce_in_place(T*, std::size_t) {}
void allreduce_max_in_place(float*, std::size_t) {}
template <class T>
void broadcast_from(T*, std::size_t, int) {}
}  // namespace
#endif

void allreduce_sum(float* data, std::size_t n) { allreduce_in_place(data, n); }
void allreduce_sum(double* data, std::size_t n) { allreduce_in_place(data, n); }
void allreduce_max(float* data, std::size_t n) { allreduce_max_in_place(data, n); }
void broadcast(float* data, std::size_t n, int root) { broadcast_from(data, n, root); }
void broadcast(double* data, std::size_t n, int root) { broadcast_from(data, n, root); }

void barrier() {
#ifdef XGRAD_HAVE_MPI
  if (!g_mpi || g_size == 1) return;
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void abort_job(int exit_code, const std::string& message) {
  std::cerr << message << "\n" << std::flush;
  std::fflush(nullptr);
#ifdef XGRAD_HAVE_MPI
  if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::exit(exit_code);
}

}  // namespace xgrad::platform
