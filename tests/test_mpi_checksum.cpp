// Run under `mpirun -np 2` by tests/test_mpi.sh (case checksum_mismatch): ranks whose parameters differ are stopped
// at the next parameter checksum, every --log-every steps, with the step and the rank named.
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

#include "platform/distributed.h"
#include "support/fault_hooks.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

TEST_CASE("data-parallel ranks whose parameters differ stop at the next checksum, naming the step and the rank") {
  xgrad::platform::init_distributed(nullptr, nullptr);
  REQUIRE_MESSAGE(xgrad::platform::world_size() == 2, "run this test as `mpirun -np 2 test_mpi_checksum`");
  const char* dir = std::getenv("XGRAD_MPI_TEST_DIR");  // the same on both ranks: it is part of their settings
  REQUIRE_MESSAGE(dir != nullptr, "XGRAD_MPI_TEST_DIR must name a directory");
  xgrad::train::TrainConfig c = xgrad::testing::tiny_run((std::filesystem::path(dir) / "run").string(), 40);
  c.log_every = 5;
  std::string message;
  try {
    // rank 1 changes a weight before step 7; step 10 is the next checked
    xgrad::train::train(c, xgrad::testing::desync_at({7}));
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  CHECK(message.find("step 10: the parameters of rank 1 differ from rank 0's") != std::string::npos);
  INFO("rank ", xgrad::platform::rank(), ": ", message);
}
