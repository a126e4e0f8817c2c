#include "parallel/comm/mpi_runtime.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "framework/error.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_progress_engine.h"

namespace ternion {

namespace {

// Cached at MPI_Init: after it, only the progress thread may call MPI (MPI_THREAD_SERIALIZED),
// so these queries must not.
std::atomic<bool> g_initialized{false};
std::atomic<int> g_world_rank{0};
std::atomic<int> g_world_size{1};

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int already = 0;
  MPI_Initialized(&already);
  TN_CHECK_AS(CommError, !already,
              "MPI is already initialised: construct one MpiRuntime per process");
  // MULTIPLE would let any thread call MPI; we only need SERIALIZED, because every MPI call after
  // this constructor goes through the one progress thread.
  int provided = MPI_THREAD_SINGLE;
  // Open MPI's non-blocking all-reduce (libnbc) defaults to a binomial reduce + broadcast for
  // in-place buffers, 2-2.5x slower than its ring from 1 MB up (docs/benchmarks.md). Gradient
  // buckets are that large, so ask for the ring unless the user chose an algorithm.
  ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  const int status = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  TN_CHECK_AS(CommError, status == MPI_SUCCESS,
              "MPI_Init_thread failed: ", mpi_error_string(status));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    TN_THROW(CommError, "MPI provides only ", thread_level_name(provided),
             "; Ternion's progress thread needs at least MPI_THREAD_SERIALIZED");
  }
  int rank = 0, size = 1;
  try {
    // Errors not tied to one of our communicators are reported on MPI_COMM_WORLD.
    TN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI initialisation");
    TN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), "MPI initialisation");
    TN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI initialisation");
    TN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI initialisation");
  } catch (...) {
    MPI_Finalize();
    throw;
  }
  g_world_rank = rank;
  g_world_size = size;
  g_initialized = true;
}

MpiRuntime::~MpiRuntime() {
  MpiProgressEngine::shut_down();
  // Communicators destroyed from here on skip MPI_Comm_free: MPI_Finalize releases them.
  g_initialized = false;
  MPI_Finalize();
  g_world_rank = 0;
  g_world_size = 1;
}

bool MpiRuntime::initialized() { return g_initialized.load(); }
int MpiRuntime::world_rank() { return g_world_rank.load(); }
int MpiRuntime::world_size() { return g_world_size.load(); }

std::unique_ptr<Communicator> mpi_world_communicator(const std::string& name) {
  // A duplicate of MPI_COMM_WORLD, so that each world communicator owns its handle like every
  // other one, and messages of two of them never match each other.
  MPI_Comm world = MPI_COMM_NULL;
  MpiProgressEngine::instance().run([&] {
    TN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world),
                 detail::concat("creating the world communicator (world rank ",
                                MpiRuntime::world_rank(), ")"));
  });
  return std::make_unique<MpiCommunicator>(world, name);
}

void abort_job(const std::string& message, int status) {
  // Several threads of one rank may fail at once. Only the first prints and aborts: Open MPI's
  // MPI_Abort crashes when two threads enter it together, and the job needs the message once.
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));  // the first one ends us
  }
  std::fprintf(stderr, "ternion: rank %d: %s\n", MpiRuntime::world_rank(), message.c_str());
  std::fflush(stderr);
  if (MpiRuntime::initialized()) {
    // Possibly while the progress thread is inside MPI: Open MPI grants MPI_THREAD_MULTIPLE,
    // and an abort is the one call we accept racing it in any case.
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // MPI_Abort does not return; this is for a non-conforming MPI
  }
  std::exit(status);
}

}  // namespace ternion
