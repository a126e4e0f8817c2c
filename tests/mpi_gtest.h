// For GoogleTest programs that mpirun starts on several ranks (their main is
// tests/mpi_gtest_main.cpp): every rank runs every test in the same order, rank 0 prints
// gtest's report, other ranks print only their own failures tagged with the rank, and every
// rank exits with the worst status of all.
#pragma once

#include "parallel/comm/communicator.h"

namespace ternion::testing_mpi {

Communicator& world();  // the job's world communicator, valid while the tests run

}  // namespace ternion::testing_mpi
